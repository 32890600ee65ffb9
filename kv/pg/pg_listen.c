/*
 * pg_listen.c - many mounts of one PostgreSQL-backed filesystem: the
 * names its writers share (an advisory lock each write transaction takes
 * after BEGIN, so writers of all mounts commit one at a time), and the
 * listener: a thread with a connection of its own that LISTENs on the
 * filesystem's channel and hands each NOTIFY the others' commits sent
 * (change.c's messages) to kv_change_deliver.
 *
 * Invariants:
 *  1. The lock and the channel are named by the schema that holds the
 *     filesystem's tables (locks and channels are the database's): one
 *     database may hold several filesystems, a schema each, whose writers
 *     and messages stay apart, whatever kvfs-tune does to their labels.
 *  2. The listener never blocks for long: it waits on its socket and on its
 *     stop eventfd together, so pg_listen(e, 0) returns within one
 *     delivery; a lost connection is made again every second meanwhile,
 *     and what was sent while it was away is lost (the kernel's short
 *     timeouts on such a mount bound the harm: fs/options.c).
 *  3. A mount alone sends no notices (each costs the server and this
 *     mount's listener a wakeup a commit): pg_publish sends once others is
 *     set, which happens when the listener, on (re)connecting, finds
 *     another mount's lock held, or hears another mount. Each listener
 *     says hello (an empty message) once it listens, so a mount that comes
 *     later is heard within a delivery; until then its kernel caches
 *     nothing of what it was not told (it caches nothing for longer than
 *     its timeout).
 *  4. A read-write mount's listener also LISTENs on the lease's channel
 *     (pg_lease.c): an ask there goes to kv_lease_asked, and sets others
 *     (the asker will be there once the lease is given up).
 *  5. A read-only mount's listener keeps its share of the lease (pe->hold,
 *     used by no other thread once the mount is open): it looks each
 *     RETRY_MS whether that connection was lost, makes it again and takes
 *     the share again, one try a look (a writer elsewhere that holds the
 *     lease meanwhile is asked for it), so that writer is never alone for
 *     long while this mount reads, and notices are never held up.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "pg_int.h"

#define RETRY_MS 1000

struct pg_listener {
	struct pg_env *pe;
	pthread_t thread;
	int stop_fd;   /* an eventfd: written once to stop */
	int said_lost; /* the loss was logged (once, until it is back) */
};

void pg_names(struct pg_env *pe, const char *schema)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

	for (const char *p = schema; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	snprintf(pe->lock_sql, sizeof(pe->lock_sql), "SELECT pg_advisory_xact_lock(%lld)",
		 (long long)h);
	snprintf(pe->chan, sizeof(pe->chan), "kvfs_%016llx", (unsigned long long)h);
	pe->mount_key = (long long)(h ^ 0x6d6f756e74ULL); /* "mount" */
	pe->lease_key = (long long)(h ^ 0x6c65617365ULL); /* "lease" */
	snprintf(pe->lease_chan, sizeof(pe->lease_chan), "%s_lease", pe->chan);
}

int pg_mount_lock(struct pg_conn *c, char *err, size_t errlen)
{
	struct pg_env *pe = c->pe;
	char sql[96];
	int rc;

	snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_lock%s(%lld)",
		 pe->e->mount ? "_shared" : "", pe->mount_key);
	for (int tries = 0;; tries++) {
		int got;

		rc = pg_ask_bool(c, sql, &got);
		if (rc)
			return rc;
		if (got) {
			pe->mount_held = 1;
			return 0;
		}
		if (tries == 50)
			break;
		usleep(100 * 1000);
	}
	if (pe->e->mount)
		kv_seterr(err, errlen, "'%s' is in use by fsck.kvfs or kvfs-tune", pe->disp);
	else
		kv_seterr(err, errlen, "'%s' is mounted (unmount it on every host first)",
			  pe->disp);
	return EBUSY;
}

/* Wait up to ms for fd (or the stop): 1 when stopped. */
static int wait_for(struct pg_listener *l, int fd, int ms)
{
	struct pollfd p[2] = {{.fd = l->stop_fd, .events = POLLIN}, {.fd = fd, .events = POLLIN}};

	while (poll(p, fd >= 0 ? 2 : 1, ms) < 0 && errno == EINTR)
		;
	return (p[0].revents & POLLIN) != 0;
}

/* Invariant 3: an empty message of this mount's. */
static int say_hello(struct pg_listener *l, PGconn *pq)
{
	char msg[KV_CHANGE_HEAD + 1];
	const char *params[2] = {l->pe->chan, msg};
	PGresult *r;
	int ok;

	kv_change_head(l->pe->e, msg);
	r = PQexecParams(pq, "SELECT pg_notify($1, $2)", 2, NULL, params, NULL, NULL, 0);
	ok = PQresultStatus(r) == PGRES_TUPLES_OK;
	PQclear(r);
	return ok ? 0 : -1;
}

/* Invariant 3: the mount lock held by another session than this mount's. */
static int count_others(struct pg_listener *l, PGconn *pq)
{
	unsigned long long key = (unsigned long long)l->pe->mount_key;
	char sql[256];
	PGresult *r;
	int ok;

	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
		 "AND classid = %llu AND objid = %llu AND objsubid = 1 AND database = "
		 "(SELECT oid FROM pg_database WHERE datname = current_database())",
		 key >> 32, key & 0xffffffffULL);
	r = PQexec(pq, sql);
	ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
	if (ok && atoll(PQgetvalue(r, 0, 0)) > 1)
		atomic_store(&l->pe->others, 1);
	PQclear(r);
	return ok ? 0 : -1;
}

static PGconn *listen_connect(struct pg_listener *l)
{
	struct pg_env *pe = l->pe;
	char sql[160];
	PGconn *pq = pg_pq_connect(l->pe);
	PGresult *r;
	int n;

	if (!pq || PQstatus(pq) != CONNECTION_OK)
		goto lost;
	/* named, so that pg_stat_activity tells it from the other sessions;
	 * the lease's channel for a read-write mount (invariant 4) */
	n = snprintf(sql, sizeof(sql), "SET application_name = 'kvfs listener'; LISTEN %s",
		     pe->chan);
	if (!pe->e->readonly)
		snprintf(sql + n, sizeof(sql) - (size_t)n, "; LISTEN %s", pe->lease_chan);
	r = PQexec(pq, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		PQclear(r);
		goto lost;
	}
	PQclear(r);
	if (say_hello(l, pq) || count_others(l, pq))
		goto lost;
	if (l->said_lost)
		kv_log("%s: hearing the other mounts again (changes made meanwhile may show "
		       "only once the kernel's cache times out)", l->pe->disp);
	l->said_lost = 0;
	return pq;
lost:
	if (!l->said_lost)
		kv_log("%s: cannot hear the other mounts: %s", l->pe->disp,
		       pq ? PQerrorMessage(pq) : "out of memory");
	l->said_lost = 1;
	PQfinish(pq);
	return NULL;
}

/* Invariant 5: a read-only mount's share of the lease, made again once its
 * connection is found lost (pg_alive: no wait on the server while it is
 * up), then taken again: one try a look, the holder asked for it, never a
 * wait here for a mount elsewhere. */
static void hold_check(struct pg_env *pe)
{
	int rc;

	if (!pe->hold || pg_alive(pe->hold) || !pe->hold_lost)
		return;
	rc = pg_lease_share(pe->hold, &pe->hold_asked);
	if (rc == 0)
		pe->hold_lost = 0;
	else if (rc != EAGAIN) /* made again at the next look */
		pg_lost(pe->hold, "cannot take a share of the lease again");
}

static void *listen_main(void *arg)
{
	struct pg_listener *l = arg;
	PGconn *pq = NULL;
	char hello[KV_CHANGE_HEAD + 1];

	kv_change_head(l->pe->e, hello);

	for (;;) {
		PGnotify *n;

		if (!pq && !(pq = listen_connect(l))) {
			if (wait_for(l, -1, RETRY_MS))
				break;
			hold_check(l->pe);
			continue;
		}
		if (wait_for(l, PQsocket(pq), l->pe->hold ? RETRY_MS : -1))
			break;
		hold_check(l->pe);
		if (!PQconsumeInput(pq)) {
			PQfinish(pq);
			pq = NULL;
			continue;
		}
		while ((n = PQnotifies(pq))) {
			if (!strcmp(n->relname, l->pe->lease_chan)) {
				/* a mount that opens asks for the lease (pg_lease.c):
				 * it will be there once given, so commits notify */
				atomic_store(&l->pe->others, 1);
				kv_lease_asked(l->pe->e);
				PQfreemem(n);
				continue;
			}
			if (strncmp(n->extra, hello, KV_CHANGE_HEAD) != 0) { /* another mount's */
				atomic_store(&l->pe->others, 1);
				pg_guess_heard(l->pe); /* what it changed, guessed no more */
			}
			if (kv_change_deliver(l->pe->e, n->extra, strlen(n->extra)) == -EINVAL)
				kv_log("%s: a notice on %s that is not kvfs's, left alone",
				       l->pe->disp, l->pe->chan);
			PQfreemem(n);
		}
	}
	PQfinish(pq);
	return NULL;
}

void pg_listen_free(struct pg_env *pe)
{
	struct pg_listener *l = pe->listener;
	uint64_t one = 1;

	if (!l)
		return;
	if (write(l->stop_fd, &one, sizeof(one)) != sizeof(one))
		kv_log("%s: cannot stop the listener", pe->disp); /* an eventfd does not fail */
	pthread_join(l->thread, NULL);
	close(l->stop_fd);
	free(l);
	pe->listener = NULL;
}

int pg_listen(kv_env *e, int on)
{
	struct pg_env *pe = e->eng_priv;
	struct pg_listener *l;
	int rc;

	if (!on) {
		pg_listen_free(pe);
		return 0;
	}
	if (pe->listener)
		return 0;
	l = calloc(1, sizeof(*l));
	if (!l)
		return ENOMEM;
	l->pe = pe;
	l->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (l->stop_fd < 0) {
		rc = errno;
		free(l);
		return rc;
	}
	rc = pthread_create(&l->thread, NULL, listen_main, l);
	if (rc) {
		close(l->stop_fd);
		free(l);
		return rc;
	}
	pe->listener = l;
	return 0;
}
