/*
 * pg_conn.c - the PostgreSQL engine's connections (pg.c holds the engine):
 * connecting with bounded waits, pipeline mode, reading results in the
 * order their statements went, errors, the reset of a lost connection, a
 * pool of idle ones; and what concerns the store as a whole on them: its
 * tables made and checked, its size, a sync.
 *
 * Invariants:
 *  1. Every connection is in pipeline mode and nonblocking. Statements go
 *     out without waiting; pend lists each message sent whose results are
 *     unread, in order, and pg_drain reads all of them (after a Sync, or a
 *     flush request within an implicit transaction, pg.c), so the one
 *     result a caller waits for is never taken for another's.
 *  2. No call waits longer than wait_ms for the server (poll() on the
 *     socket, beside the server's own statement_timeout and TCP
 *     keepalives): past it the connection is lost.
 *  3. A lost connection (broken) is logged once and fails every call with
 *     EIO until pg_alive resets it; its unread results are forgotten. A
 *     FATAL from the server is enough to call it lost, the end of the
 *     stream may come much later (pg_alive); one whose session the server
 *     ended that way under a top level's first statement is reset at once
 *     and the statement sent again (pg_stmt.c: pg_call).
 *  4. A failed statement is logged and charged to the transaction level
 *     that sent it if that level is still open (fail_depth: the outermost
 *     such level); statements the server skipped after it in the same
 *     pipeline segment (PIPELINE_ABORTED) report its code.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pg_int.h"

#define PG_POOL_MAX 4          /* idle connections kept */
#define PG_SCHEMA "kvfs 1"     /* kvfs_meta's comment: the tables' version */

/* Copy url to out without its password (user:PASSWORD@ or password=...). */
void pg_display(const char *url, char *out, size_t n)
{
	const char *auth = strstr(url, "://"), *at = NULL, *colon = NULL, *s;
	size_t o = 0;

	if (auth) {
		size_t alen;

		auth += 3;
		alen = strcspn(auth, "/?");
		at = memrchr(auth, '@', alen);
		if (at)
			colon = memchr(auth, ':', (size_t)(at - auth));
	}
	for (s = url; *s && o + 4 < n; s++) {
		if (colon && s == colon) {
			s = at - 1; /* drop ":PASSWORD" */
			continue;
		}
		if (!strncmp(s, "password=", 9) && (s == url || strchr("?& ", s[-1]))) {
			o += (size_t)snprintf(out + o, n - o, "password=***");
			s += 9 + strcspn(s + 9, "& ") - 1;
			continue;
		}
		out[o++] = *s;
	}
	out[o < n ? o : n - 1] = 0;
}

/* The first line of a libpq message. */
static void first_line(const char *msg, char *out, size_t n)
{
	int len = msg ? (int)strcspn(msg, "\n") : 0;

	if (len)
		snprintf(out, n, "%.*s", len, msg);
	else
		snprintf(out, n, "connection lost");
}

int pg_lost(struct pg_conn *c, const char *why)
{
	char line[256];

	if (!c->broken) {
		first_line(why, line, sizeof(line));
		kv_log("postgresql %s: %s", c->pe->disp, line);
	}
	c->broken = 1;
	c->pend_at = c->pend_n = 0;
	c->unsynced = 0;
	return EIO;
}

int pg_lost_pq(struct pg_conn *c)
{
	return pg_lost(c, PQerrorMessage(c->pq));
}

/* Server notices (a ROLLBACK outside a transaction warns): not for kvfs's
 * users; errors reach us as results. But a FATAL while idle (a restart, an
 * administrator ending the backend) comes as a notice, before the end of
 * the stream that may follow only later: the connection is as good as
 * lost, and pg_alive must not take it for alive meanwhile. */
static void pg_notice(void *arg, const PGresult *r)
{
	struct pg_conn *c = arg;
	const char *sev = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);

	if (sev && (!strcmp(sev, "FATAL") || !strcmp(sev, "PANIC"))) {
		c->closing = 1;
		first_line(PQresultErrorMessage(r), c->last_err, sizeof(c->last_err));
	}
}

int pg_push(struct pg_conn *c, unsigned id, int prep, int sync, int want)
{
	if (c->pend_n == c->pend_cap) {
		size_t cap = c->pend_cap ? 2 * c->pend_cap : 64;
		struct pg_pend *p = realloc(c->pend, cap * sizeof(*p));

		if (!p)
			return pg_lost(c, "out of memory"); /* the results could not be read */
		c->pend = p;
		c->pend_cap = cap;
	}
	c->pend[c->pend_n++] = (struct pg_pend){.id = id, .prep = (short)prep, .sync = (unsigned char)sync,
						 .want = (unsigned char)want};
	c->unsynced = !sync;
	return 0;
}

int pg_send_text(struct pg_conn *c, unsigned id, const char *sql, int want)
{
	if (c->broken)
		return EIO;
	if (!PQsendQueryParams(c->pq, sql, 0, NULL, NULL, NULL, NULL, 0))
		return pg_lost_pq(c);
	return pg_push(c, id, 0, 0, want);
}

int pg_sync(struct pg_conn *c)
{
	if (c->broken)
		return EIO;
	if (!c->unsynced)
		return 0;
	if (!PQpipelineSync(c->pq))
		return pg_lost_pq(c);
	return pg_push(c, 0, 0, 1, 0);
}

void pg_flush_now(struct pg_conn *c)
{
	if (!c->broken && PQflush(c->pq) < 0)
		pg_lost_pq(c);
}

static void deadline_in(struct timespec *dl, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, dl);
	dl->tv_sec += ms / 1000;
	dl->tv_nsec += (long)(ms % 1000) * 1000000;
	if (dl->tv_nsec >= 1000000000) {
		dl->tv_sec++;
		dl->tv_nsec -= 1000000000;
	}
}

/* Wait until the socket is ready for events, or lose the connection at
 * the deadline (invariant 2). */
static int pg_poll(struct pg_conn *c, short events, const struct timespec *dl)
{
	for (;;) {
		struct pollfd p = {.fd = PQsocket(c->pq), .events = events};
		struct timespec now;
		long long ms;
		int n;

		clock_gettime(CLOCK_MONOTONIC, &now);
		ms = (long long)(dl->tv_sec - now.tv_sec) * 1000 + (dl->tv_nsec - now.tv_nsec) / 1000000;
		if (ms <= 0) {
			char why[80];

			snprintf(why, sizeof(why), "no answer from the server in %u s",
				 (c->wait_ms + 999) / 1000);
			return pg_lost(c, why);
		}
		n = poll(&p, 1, ms > INT_MAX ? INT_MAX : (int)ms);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return pg_lost(c, strerror(errno));
	}
}

static int pg_flush(struct pg_conn *c, const struct timespec *dl)
{
	for (;;) {
		int r = PQflush(c->pq);

		if (r == 0)
			return 0;
		if (r < 0)
			return pg_lost_pq(c);
		/* Read too while we wait: a server blocked on its own output to
		 * us would never read ours. */
		if (pg_poll(c, POLLIN | POLLOUT, dl))
			return EIO;
		if (!PQconsumeInput(c->pq))
			return pg_lost_pq(c);
	}
}

/* The next result (NULL ends a statement's). */
static int pg_next(struct pg_conn *c, const struct timespec *dl, PGresult **r)
{
	while (PQisBusy(c->pq)) {
		if (pg_poll(c, POLLIN, dl))
			return EIO;
		if (!PQconsumeInput(c->pq))
			return pg_lost_pq(c);
	}
	*r = PQgetResult(c->pq);
	return 0;
}

/* SQLSTATE to what kvfs's callers can act on (err.c passes these on). */
static int pg_state_errno(const char *st)
{
	if (!st)
		return EIO;
	if (!strcmp(st, "53100")) /* disk_full */
		return ENOSPC;
	if (!strcmp(st, "53200")) /* out_of_memory */
		return ENOMEM;
	if (!strcmp(st, "25006")) /* read_only_sql_transaction: a standby */
		return EROFS;
	if (!strcmp(st, "42501")) /* insufficient_privilege */
		return EACCES;
	if (!strcmp(st, "22012")) /* division_by_zero: only a guess's check divides */
		return KV_EGUESS;
	return EIO;
}

/* A prepare p failed, or the server skipped it after a failure before it
 * in its pipeline segment: prepare it again at its next use. */
static void pg_unprepared(struct pg_conn *c, const struct pg_pend *p)
{
	int i = p->prep - 1;

	if (p->prep)
		c->prepared[i / S_N] &= (uint16_t)~(1u << (i % S_N));
}

/* A statement failed (invariant 4). */
static int pg_failed(struct pg_conn *c, const struct pg_pend *p, const PGresult *r)
{
	const char *sev = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);
	int rc = pg_state_errno(PQresultErrorField(r, PG_DIAG_SQLSTATE));

	if (sev && strcmp(sev, "ERROR"))
		c->closing = 1; /* FATAL, PANIC: the server ends the session */
	if (c->closing || PQstatus(c->pq) != CONNECTION_OK)
		return pg_lost(c, PQresultErrorMessage(r));
	first_line(PQresultErrorMessage(r), c->last_err, sizeof(c->last_err));
	if (rc == KV_EGUESS) /* not an error: the transaction runs again */
		pg_guess_clear(c->pe);
	else
		kv_log("postgresql %s: %s", c->pe->disp, c->last_err);
	pg_unprepared(c, p);
	for (int d = 0; d <= c->depth; d++) {
		if (c->open[d] != p->id)
			continue;
		if (d < c->fail_depth) {
			c->fail_depth = d;
			c->fail_rc = rc;
		}
		break;
	}
	return rc;
}

/* The results of one statement p: rc its code; *out the result when p is
 * wanted and succeeded. */
static int pg_read_one(struct pg_conn *c, const struct pg_pend *p, const struct timespec *dl,
		       int *seg_rc, int *rc, PGresult **out)
{
	PGresult *r = NULL, *end = NULL;
	int prc = 0;

	if (pg_next(c, dl, &r))
		return EIO;
	if (!r)
		return pg_lost_pq(c);
	switch (PQresultStatus(r)) {
	case PGRES_COMMAND_OK:
	case PGRES_TUPLES_OK:
		break;
	case PGRES_PIPELINE_ABORTED:
		prc = *seg_rc ? *seg_rc : EIO;
		pg_unprepared(c, p);
		break;
	default:
		prc = *seg_rc = pg_failed(c, p, r);
		break;
	}
	if (c->broken || pg_next(c, dl, &end)) {
		PQclear(r);
		return EIO;
	}
	if (end) { /* one result a statement: nothing else is sent */
		PQclear(end);
		PQclear(r);
		return pg_lost(c, "unexpected results from the server");
	}
	if (p->want) {
		*rc = prc;
		if (out && !prc) {
			*out = r;
			return 0;
		}
	}
	if (p->ent) { /* a prefetch's: to the cache (pg.c) */
		pg_prefetched(c, p, prc ? NULL : r);
		if (!prc)
			return 0;
	}
	PQclear(r);
	return 0;
}

int pg_drain(struct pg_conn *c, PGresult **res)
{
	struct timespec dl;
	int rc = 0, seg_rc = 0;

	if (res)
		*res = NULL;
	if (c->implicit) { /* a Sync would end its transaction (pg.c): a flush */
		if (!PQsendFlushRequest(c->pq))
			return pg_lost_pq(c);
	} else if (pg_sync(c)) {
		return EIO;
	}
	deadline_in(&dl, c->wait_ms);
	if (pg_flush(c, &dl))
		return EIO;
	while (c->pend_at < c->pend_n) {
		struct pg_pend p = c->pend[c->pend_at++];

		if (p.sync) {
			PGresult *r = NULL;

			if (pg_next(c, &dl, &r))
				return EIO;
			if (!r || PQresultStatus(r) != PGRES_PIPELINE_SYNC) {
				PQclear(r);
				return r ? pg_lost(c, "unexpected results from the server")
					 : pg_lost_pq(c);
			}
			PQclear(r);
			seg_rc = 0;
			continue;
		}
		if (pg_read_one(c, &p, &dl, &seg_rc, &rc, res)) {
			if (res && *res) {
				PQclear(*res);
				*res = NULL;
			}
			return EIO;
		}
	}
	c->pend_at = c->pend_n = 0;
	memset(c->deferred, 0, sizeof(c->deferred));
	return rc;
}

int pg_ask_bool(struct pg_conn *c, const char *sql, int *yes)
{
	PGresult *r = NULL;
	int rc = pg_send_text(c, 0, sql, 1);

	if (!rc)
		rc = pg_drain(c, &r);
	if (rc)
		return rc;
	if (yes)
		*yes = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	return 0;
}

/* Session settings, then how long a call may wait (invariant 2). A
 * statement_timeout of the URL's or the server's stays; without one, calls
 * get PG_STMT_TIMEOUT. The writer's synchronous_commit follows the env's
 * durability (engine.h contract 8): off for KV_DURABLE_NONE (pg.c's sync
 * flushes), else on (when the server's default is off): a commit of the
 * default mode waits for the WAL, and for a synchronous standby. Off for
 * the default mode too, a file fsync'd before a failover was missing on
 * the promoted standby (pg.faults), though sync commits a transaction of
 * its own with it on; until that is understood, the default waits. */
static int pg_setup(struct pg_conn *c)
{
	enum kv_durability d = c->pe->e->durability;
	PGresult *r;
	int rc;

	c->wait_ms = 30000 + PG_WAIT_SLACK_MS;
	if (PQsetnonblocking(c->pq, 1) || !PQenterPipelineMode(c->pq))
		return pg_lost_pq(c);
	rc = pg_send_text(c, 0,
			  "SELECT set_config('statement_timeout', '" PG_STMT_TIMEOUT "', false) "
			  "WHERE current_setting('statement_timeout') = '0'",
			  0);
	/* the readers' transactions (pg.c: read_begin) take no BEGIN */
	if (!rc && !c->writer)
		rc = pg_send_text(c, 0,
				  "SET default_transaction_isolation = 'repeatable read'", 0);
	if (!rc && !c->writer)
		rc = pg_send_text(c, 0, "SET default_transaction_read_only = on", 0);
	if (!rc && c->writer)
		rc = pg_send_text(c, 0,
				  d == KV_DURABLE_NONE
					  ? "SET synchronous_commit = off"
					  : "SELECT set_config('synchronous_commit', 'on', false) "
					    "WHERE current_setting('synchronous_commit') = 'off'",
				  0);
	if (!rc)
		rc = pg_send_text(c, 0,
				  "SELECT setting FROM pg_settings WHERE name = 'statement_timeout'", 1);
	if (!rc)
		rc = pg_drain(c, &r);
	if (rc)
		return rc;
	if (PQntuples(r) == 1) {
		unsigned long ms = strtoul(PQgetvalue(r, 0, 0), NULL, 10);

		if (ms && ms < UINT_MAX - PG_WAIT_SLACK_MS)
			c->wait_ms = (unsigned)ms + PG_WAIT_SLACK_MS;
	}
	PQclear(r);
	return 0;
}

PGconn *pg_pq_connect(struct pg_env *pe)
{
	/* Defaults the URL may override (it is expanded in place of dbname,
	 * after them): a bounded connect, and TCP keepalives and a user
	 * timeout so a vanished server fails calls instead of hanging them. */
	static const char *const keys[] = {"connect_timeout", "keepalives", "keepalives_idle",
					   "keepalives_interval", "keepalives_count",
					   "tcp_user_timeout", "fallback_application_name",
					   "dbname", NULL};
	const char *vals[] = {"5", "1", "10", "5", "3", "30000", "kvfs", pe->e->path, NULL};

	return PQconnectdbParams(keys, vals, 1);
}

int pg_connect(struct pg_env *pe, int writer, struct pg_conn **out, char *err, size_t errlen)
{
	struct pg_conn *c;
	char line[256];
	int rc;

	c = calloc(1, sizeof(*c));
	if (!c)
		return ENOMEM;
	c->pe = pe;
	c->writer = writer;
	c->depth = -1;
	c->fail_depth = INT_MAX;
	c->pq = pg_pq_connect(pe);
	if (!c->pq) {
		free(c);
		return ENOMEM;
	}
	if (PQstatus(c->pq) != CONNECTION_OK) {
		first_line(PQerrorMessage(c->pq), line, sizeof(line));
		kv_seterr(err, errlen, "'%s': %s", pe->disp, line);
		pg_conn_free(c);
		return EIO;
	}
	PQsetNoticeReceiver(c->pq, pg_notice, c);
	rc = pg_setup(c);
	if (rc) {
		kv_seterr(err, errlen, "'%s': %s", pe->disp,
			  c->last_err[0] ? c->last_err : "connection lost while setting it up");
		pg_conn_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void pg_conn_free(struct pg_conn *c)
{
	if (!c)
		return;
	PQfinish(c->pq);
	pg_cache_free(c);
	free(c->pend);
	free(c->held);
	free(c->rsv.key);
	free(c->rsv.buf);
	free(c);
}

/* Once, and logged: the server may be back (a restart, a standby promoted
 * that the URL's hosts name). */
static int pg_reset(struct pg_conn *c)
{
	PQreset(c->pq);
	if (PQstatus(c->pq) != CONNECTION_OK)
		return EIO;
	c->broken = c->closing = 0;
	c->pend_at = c->pend_n = 0;
	c->unsynced = 0;
	memset(c->prepared, 0, sizeof(c->prepared));
	if (pg_setup(c))
		return EIO;
	/* the mount lock went with the old session: taken again, or the
	 * store was meanwhile given to a tool that repairs it */
	if (c->writer && c->pe->mount_held && pg_mount_lock(c, NULL, 0)) {
		kv_log("postgresql %s: taken by fsck.kvfs or kvfs-tune while away: "
		       "no more changes from this mount", c->pe->disp);
		c->broken = 1;
		return EIO;
	}
	/* the lease went with the old session (pg_lease.c invariant 3); a
	 * read-only mount's share is the listener's to take again, without
	 * waiting (pg_listen.c invariant 5) */
	if (c == c->pe->hold)
		c->pe->hold_lost = 1;
	if (c->writer && c->pe->e->mount) {
		char err[256];

		c->pe->leased = 0;
		if (pg_lease_join(c, err, sizeof(err))) {
			kv_log("postgresql %s: %s", c->pe->disp, err);
			c->broken = 1;
			return EIO;
		}
	}
	kv_log("postgresql %s: connected again", c->pe->disp);
	return 0;
}

/* What the server sent while no call read: libpq parses it only when asked
 * for results (PQconsumeInput reads the socket, no more), and a message
 * after the results still owed (a read_end's Sync, pg.c) only once those
 * are taken. Then a FATAL that came while idle reaches pg_notice. */
static void pg_take_input(struct pg_conn *c)
{
	if (c->pend_at < c->pend_n)
		pg_drain(c, NULL); /* its code was its ended transaction's */
	if (!c->broken)
		PQisBusy(c->pq); /* parses */
	if (!c->broken && c->closing)
		pg_lost(c, c->last_err);
}

int pg_alive(struct pg_conn *c)
{
	/* A server that closed the connection meanwhile (a restart, an
	 * administrator) sent a FATAL message, then the end of the stream.
	 * The end comes only as its process exits, some time after
	 * pg_stat_activity stopped listing it: the FATAL must be enough. It
	 * may be read already (with the last results a call waited for):
	 * parsed first, when that costs no wait. */
	if (!c->broken && c->pend_at == c->pend_n)
		pg_take_input(c);
	for (int i = 0; i < 4 && !c->broken; i++) {
		struct pollfd p = {.fd = PQsocket(c->pq), .events = POLLIN};

		if (PQstatus(c->pq) != CONNECTION_OK)
			pg_lost_pq(c);
		else if (poll(&p, 1, 0) <= 0)
			break;
		else if (!PQconsumeInput(c->pq))
			pg_lost_pq(c);
		else
			pg_take_input(c);
	}
	return c->broken ? pg_reset(c) : 0;
}

int pg_pool_get(struct pg_env *pe, struct pg_conn **out, char *err, size_t errlen)
{
	struct pg_conn *c;

	pthread_mutex_lock(&pe->lock);
	c = pe->pool;
	if (c) {
		pe->pool = c->next;
		pe->npool--;
	}
	pthread_mutex_unlock(&pe->lock);
	if (!c)
		return pg_connect(pe, 0, out, err, errlen);
	c->next = NULL;
	*out = c;
	return 0;
}

void pg_pool_put(struct pg_env *pe, struct pg_conn *c)
{
	pthread_mutex_lock(&pe->lock);
	if (!c->broken && pe->npool < PG_POOL_MAX) {
		c->next = pe->pool;
		pe->pool = c;
		pe->npool++;
		c = NULL;
	}
	pthread_mutex_unlock(&pe->lock);
	pg_conn_free(c);
}

/* --------------------------------------------------------- the tables -- */

/* ARRAY['kvfs_meta', ...] into buf. */
static const char *pg_tables(char *buf, size_t n)
{
	size_t o = (size_t)snprintf(buf, n, "ARRAY[");

	for (int i = 0; i < KV_NDB && o < n; i++)
		o += (size_t)snprintf(buf + o, n - o, "%s'kvfs_%s'", i ? "," : "", kv_db_names[i]);
	if (o < n)
		snprintf(buf + o, n - o, "]");
	return buf;
}

/* What the database holds: the tables missing (their names, "" for none),
 * the tables' version (kvfs_meta's comment) and the server's page size;
 * the names of the filesystem's lock and channel (pg_names) from the
 * schema that holds its tables. */
static int pg_inspect(struct pg_conn *c, char *missing, size_t mlen, char *schema, size_t slen,
		      uint32_t *page)
{
	char tables[256], sql[896];
	PGresult *r;
	int rc;

	snprintf(sql, sizeof(sql),
		 "SELECT (SELECT string_agg(n, ' ') FROM unnest(%s) AS t(n) "
		 "WHERE to_regclass(n) IS NULL), "
		 "obj_description(to_regclass('kvfs_meta'), 'pg_class'), "
		 "current_setting('block_size'), "
		 "(SELECT relnamespace::regnamespace::text FROM pg_class "
		 "WHERE oid = to_regclass('kvfs_meta'))",
		 pg_tables(tables, sizeof(tables)));
	rc = pg_send_text(c, 0, sql, 1);
	if (!rc)
		rc = pg_drain(c, &r);
	if (rc)
		return rc;
	snprintf(missing, mlen, "%s", PQgetvalue(r, 0, 0));
	snprintf(schema, slen, "%s", PQgetvalue(r, 0, 1));
	*page = (uint32_t)strtoul(PQgetvalue(r, 0, 2), NULL, 10);
	if (!*page)
		*page = 8192;
	pg_names(c->pe, PQgetvalue(r, 0, 3));
	PQclear(r);
	return 0;
}

/* The message of c's failure rc in err. */
static int pg_fail_msg(struct pg_conn *c, int rc, char *err, size_t errlen)
{
	kv_seterr(err, errlen, "'%s': %s", c->pe->disp,
		  c->last_err[0] && !c->broken ? c->last_err : "connection lost");
	return rc;
}

static int missing_count(const char *missing)
{
	int n = missing[0] != 0;

	for (const char *p = missing; *p; p++)
		n += *p == ' ';
	return n;
}

int pg_store_make(struct pg_conn *c, int force, uint32_t *page, char *err, size_t errlen)
{
	char missing[256], schema[64], sql[512];
	int rc;

	rc = pg_send_text(c, 0, "BEGIN", 0);
	if (!rc)
		rc = pg_inspect(c, missing, sizeof(missing), schema, sizeof(schema), page);
	if (!rc && missing_count(missing) < KV_NDB && !force) {
		kv_seterr(err, errlen, "'%s' already holds a kvfs filesystem (use -f to replace it)",
			  c->pe->disp);
		rc = EEXIST;
		goto rollback;
	}
	if (!rc && force && missing_count(missing) < KV_NDB) {
		PGresult *r = NULL;

		/* not under a mount: the whole mount lock, until this commits */
		snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_xact_lock(%lld)",
			 c->pe->mount_key);
		rc = pg_send_text(c, 0, sql, 1);
		if (!rc)
			rc = pg_drain(c, &r);
		if (!rc && PQgetvalue(r, 0, 0)[0] != 't') {
			kv_seterr(err, errlen, "'%s' is mounted (unmount it on every host first)",
				  c->pe->disp);
			rc = EBUSY;
		}
		PQclear(r);
		if (rc)
			goto rollback;
	}
	if (!rc && force) {
		size_t o = (size_t)snprintf(sql, sizeof(sql), "DROP TABLE IF EXISTS ");

		for (int i = 0; i < KV_NDB; i++)
			o += (size_t)snprintf(sql + o, sizeof(sql) - o, "%skvfs_%s", i ? ", " : "",
					      kv_db_names[i]);
		rc = pg_send_text(c, 0, sql, 0);
	}
	for (int i = 0; !rc && i < KV_NDB; i++) {
		snprintf(sql, sizeof(sql),
			 "CREATE TABLE kvfs_%s (k bytea PRIMARY KEY, v bytea NOT NULL)",
			 kv_db_names[i]);
		rc = pg_send_text(c, 0, sql, 0);
	}
	/* blocks come checksummed and compressed: pglz would only spend CPU */
	if (!rc)
		rc = pg_send_text(c, 0, "ALTER TABLE kvfs_data ALTER COLUMN v SET STORAGE EXTERNAL",
				  0);
	if (!rc)
		rc = pg_send_text(c, 0, "COMMENT ON TABLE kvfs_meta IS '" PG_SCHEMA "'", 1);
	if (!rc)
		rc = pg_drain(c, NULL); /* its failure, or one before it */
	if (!rc)
		return 0;
	pg_fail_msg(c, rc, err, errlen);
rollback: /* after a Sync: the server skips to the next after an error */
	if (!pg_sync(c) && !pg_send_text(c, 0, "ROLLBACK", 0))
		pg_drain(c, NULL);
	return rc;
}

int pg_store_check(struct pg_conn *c, uint32_t *page, char *err, size_t errlen)
{
	char missing[256], schema[64];
	int rc = pg_inspect(c, missing, sizeof(missing), schema, sizeof(schema), page);
	const char *disp = c->pe->disp;

	if (rc)
		return pg_fail_msg(c, rc, err, errlen);
	if (strstr(missing, "kvfs_meta")) {
		kv_seterr(err, errlen, "'%s' holds no kvfs filesystem", disp);
		return KV_EINVAL;
	}
	if (missing[0]) {
		kv_seterr(err, errlen, "'%s': damaged filesystem (tables missing: %s)", disp,
			  missing);
		return KV_EINVAL;
	}
	if (strcmp(schema, PG_SCHEMA)) {
		kv_seterr(err, errlen, "'%s': a kvfs filesystem of another version ('%s')", disp,
			  schema);
		return KV_EVERSION;
	}
	return 0;
}

/* Run sql (statements of text, the last one's result wanted) on a pool
 * connection; *out its result. */
static int pg_side(struct pg_env *pe, const char *const *sql, int n, PGresult **out)
{
	struct pg_conn *c = NULL;
	int rc = pg_pool_get(pe, &c, NULL, 0);

	if (!rc)
		rc = pg_alive(c);
	for (int i = 0; !rc && i < n; i++)
		rc = pg_send_text(c, 0, sql[i], i == n - 1);
	if (!rc)
		rc = pg_drain(c, out);
	if (c)
		pg_pool_put(pe, c);
	return rc;
}

/* A transaction that has an xid (txid_current) and commits with
 * synchronous_commit on flushes the WAL up to its commit record, which
 * follows that of every commit made before. */
int pg_store_sync(struct pg_env *pe)
{
	static const char *const sql[] = {"BEGIN", "SET LOCAL synchronous_commit = on",
					  "SELECT txid_current()", "COMMIT"};
	PGresult *r = NULL;
	int rc = pg_side(pe, sql, 4, &r);

	PQclear(r);
	return rc;
}

int pg_store_bytes(struct pg_env *pe, uint64_t *bytes)
{
	char tables[256], sql[512];
	const char *q = sql;
	PGresult *r;
	int rc;

	snprintf(sql, sizeof(sql),
		 "SELECT coalesce(sum(pg_total_relation_size(to_regclass(n))), 0) "
		 "FROM unnest(%s) AS t(n)",
		 pg_tables(tables, sizeof(tables)));
	rc = pg_side(pe, &q, 1, &r);
	if (rc)
		return rc;
	*bytes = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return 0;
}
