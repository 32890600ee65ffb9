/*
 * pg_lease.c - a mount alone holds its PostgreSQL-backed filesystem to
 * itself, and may then keep a window as a mount of an image file does
 * (kv/window.c invariant 7): changes told once applied, committed within
 * the window's milliseconds, a close(2) that waits for nothing.
 *
 * The lease is an advisory lock of the filesystem's (pg_names). Every
 * mount holds it shared for as long as it is mounted (pg_lease_join: on the
 * writer's connection, or on a read-only mount's own); a mount's writer
 * takes it whole besides (pg_lease), which the server grants only while no
 * other session holds it at all.
 *
 * Invariants:
 *  1. While a mount holds the lease no other mount has the store open, so
 *     what its window holds uncommitted hides from no program elsewhere:
 *     close-to-open holds without a commit at close. The tools that only
 *     read (fsck.kvfs -n, kvfs-dump) take no lease: they see the last
 *     commit, a window old at most.
 *  2. A mount whose open finds the lease held asks for it (a NOTIFY on the
 *     lease channel, again each LEASE_ASK_MS) and waits, LEASE_WAIT_MS at
 *     most, then fails with EBUSY. The holder's listener hears the ask
 *     (kv_lease_asked); its writer commits the window and gives the lease
 *     up (pg_lease(e, 0)), and tries to take it again only LEASE_AWAY_MS
 *     later, when the asker holds it shared: refused, so it tries once a
 *     LEASE_RETRY_MS until the other mount is gone.
 *  3. A lease ends with its session: a lost connection ends it with the
 *     window, which is lost and reported (window.c invariant 5); the
 *     writer's connection, made again, joins shared first (pg_reset) and
 *     holds the lease no more.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pg_int.h"

#define LEASE_WAIT_MS 30000 /* an open waits this long for the lease's holder */
#define LEASE_ASK_MS 1000   /* and asks again this often */
#define LEASE_POLL_MS 10    /* looking this often whether it was given up */
#define LEASE_AWAY_MS 2000  /* given up: not tried again before */
#define LEASE_RETRY_MS 1000 /* refused: not tried again before */

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int pg_lease_share(struct pg_conn *c, int64_t *asked)
{
	struct pg_env *pe = c->pe;
	char sql[96];
	int64_t now;
	int got, rc;

	snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_lock_shared(%lld)", pe->lease_key);
	rc = pg_ask_bool(c, sql, &got);
	if (rc || got)
		return rc;
	now = now_ms();
	if (*asked && now - *asked < LEASE_ASK_MS)
		return EAGAIN;
	snprintf(sql, sizeof(sql), "SELECT pg_notify('%s', '') IS NULL", pe->lease_chan);
	rc = pg_ask_bool(c, sql, NULL);
	*asked = now;
	return rc ? rc : EAGAIN;
}

int pg_lease_join(struct pg_conn *c, char *err, size_t errlen)
{
	struct pg_env *pe = c->pe;
	int64_t t0 = now_ms(), asked = 0;
	int rc;

	while ((rc = pg_lease_share(c, &asked)) == EAGAIN) {
		if (now_ms() - t0 >= LEASE_WAIT_MS) {
			kv_seterr(err, errlen,
				  "'%s' is held by a mount elsewhere that did not give it up in "
				  "%d s (its daemon stopped?)",
				  pe->disp, LEASE_WAIT_MS / 1000);
			return EBUSY;
		}
		usleep(LEASE_POLL_MS * 1000);
	}
	if (rc)
		kv_seterr(err, errlen, "'%s': %s", pe->disp,
			  c->last_err[0] ? c->last_err : "connection lost");
	return rc;
}

int pg_lease(kv_env *e, int take)
{
	struct pg_env *pe = e->eng_priv;
	struct pg_conn *c = pe->w;
	char sql[96];
	int got = 0;

	if (!c || !e->mount)
		return 0;
	if (!take) {
		if (pe->leased && !c->broken) {
			snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock(%lld)",
				 pe->lease_key);
			pg_ask_bool(c, sql, NULL); /* lost: it went with the session */
		}
		pe->leased = 0;
		pe->lease_at = now_ms() + LEASE_AWAY_MS;
		return 0;
	}
	if (pe->leased && !c->broken)
		return 1; /* a connection lost meanwhile: W's first statement finds it */
	pe->leased = 0; /* a broken connection's session ends, and the lease with it */
	if (now_ms() < pe->lease_at)
		return 0;
	snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_lock(%lld)", pe->lease_key);
	/* made again first if lost: the lease went with the old session */
	if (pg_alive(c) || pg_ask_bool(c, sql, &got) || !got) {
		pe->lease_at = now_ms() + LEASE_RETRY_MS;
		return 0;
	}
	pe->leased = 1;
	return 1;
}
