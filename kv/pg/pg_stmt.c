/*
 * pg_stmt.c - the PostgreSQL engine's statements (pg.c invariant 5): each
 * prepared once a connection, at its first use and in the same round trip,
 * with binary parameters and results; transaction control, savepoints,
 * the writers' lock and NOTIFY too (enum pg_cmd, pg_int.h): parsing and
 * planning them each time cost the server ~17 us a statement, eight a
 * create. A level's statements go after what it still owes the server
 * (pg_prelude: its BEGIN or SAVEPOINT, sent lazily).
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_int.h"

#define PG_BEGIN_READ "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
#define PG_PEND_MAX 1024         /* changes sent before their results are read */
#define PG_BYTEA 17              /* type oids */
#define PG_INT4 23

/* %1$s: the map's name. Parameters in order: key, value (S_SAME and
 * S_DELSAME: the one guessed), the value it replaces (S_SWAP's guess),
 * row limit. */
static const struct {
	const char *sql;
	unsigned char key, val, old, limit;
} pg_stmts[S_N] = {
	[S_GET] = {"SELECT v FROM kvfs_%1$s WHERE k = $1", 1, 0, 0},
	[S_PUT] = {"INSERT INTO kvfs_%1$s (k, v) VALUES ($1, $2) "
		   "ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
		   1, 1, 0, 0},
	/* The main query's snapshot precedes the insert: a row means the key
	 * was there (its value, as LMDB gives it), none that it went in. */
	[S_PUTNEW] = {"WITH i AS (INSERT INTO kvfs_%1$s (k, v) VALUES ($1, $2) "
		      "ON CONFLICT DO NOTHING RETURNING 1) "
		      "SELECT v FROM kvfs_%1$s WHERE k = $1 AND NOT EXISTS (SELECT FROM i)",
		      1, 1, 0, 0},
	[S_DEL] = {"DELETE FROM kvfs_%1$s WHERE k = $1", 1, 0, 0, 0},
	[S_COUNT] = {"SELECT count(*) FROM kvfs_%1$s", 0, 0, 0, 0},
	[S_FIRST] = {"SELECT k, v FROM kvfs_%1$s ORDER BY k LIMIT $1", 0, 0, 0, 1},
	[S_LAST] = {"SELECT k, v FROM kvfs_%1$s ORDER BY k DESC LIMIT $1", 0, 0, 0, 1},
	[S_GE] = {"SELECT k, v FROM kvfs_%1$s WHERE k >= $1 ORDER BY k LIMIT $2", 1, 0, 0, 1},
	[S_GT] = {"SELECT k, v FROM kvfs_%1$s WHERE k > $1 ORDER BY k LIMIT $2", 1, 0, 0, 1},
	[S_LT] = {"SELECT k, v FROM kvfs_%1$s WHERE k < $1 ORDER BY k DESC LIMIT $2", 1, 0, 0,
		  1},
	/* A guess checked (pg_guess.c invariant 1): the row as guessed, or
	 * the division fails the transaction (22012). The divisor is a
	 * subquery, which the planner never folds to a constant, so the error
	 * comes at execution and only when the guess was wrong. The first
	 * change of a guessed key checks it as it goes: a put replaces the
	 * value guessed (S_SWAP), or makes the row guessed absent (S_INSERT);
	 * a del removes the value guessed (S_DELSAME). */
	[S_SAME] = {"SELECT 1 / (SELECT count(*) FROM kvfs_%1$s WHERE k = $1 AND v = $2)", 1, 1,
		    0, 0},
	[S_ABSENT] = {"SELECT 1 / (1 - (SELECT count(*) FROM kvfs_%1$s WHERE k = $1))", 1, 0, 0,
		      0},
	[S_SWAP] = {"WITH u AS (UPDATE kvfs_%1$s SET v = $2 WHERE k = $1 AND v = $3 RETURNING 1) "
		    "SELECT 1 / (SELECT count(*) FROM u)",
		    1, 1, 1, 0},
	[S_INSERT] = {"WITH i AS (INSERT INTO kvfs_%1$s (k, v) VALUES ($1, $2) "
		      "ON CONFLICT DO NOTHING RETURNING 1) SELECT 1 / (SELECT count(*) FROM i)",
		      1, 1, 0, 0},
	[S_DELSAME] = {"WITH d AS (DELETE FROM kvfs_%1$s WHERE k = $1 AND v = $2 RETURNING 1) "
		       "SELECT 1 / (SELECT count(*) FROM d)",
		       1, 1, 0, 0},
};

/* Whether statement i (pg_conn.prepared's numbering) is prepared; mark it. */
static int pg_prepared(struct pg_conn *c, int i)
{
	uint16_t bit = (uint16_t)(1u << (i % S_N));

	if (c->prepared[i / S_N] & bit)
		return 1;
	c->prepared[i / S_N] |= bit;
	return 0;
}

static void pg_cmd_sql(const struct pg_conn *c, int cmd, char *sql, size_t n)
{
	static const char *const fixed[] = {
		/* the writer's statements each see what committed before them,
		 * the writers' lock's waits included, whatever the server's
		 * default isolation (a snapshot taken as the lock statement
		 * began would miss the commit it waited for) */
		[C_BEGIN] = "BEGIN ISOLATION LEVEL READ COMMITTED", [C_BEGIN_READ] = PG_BEGIN_READ,
		[C_COMMIT] = "COMMIT",
		[C_ROLLBACK] = "ROLLBACK"};

	if (cmd < C_LOCK)
		snprintf(sql, n, "%s", fixed[cmd]);
	else if (cmd == C_LOCK)
		snprintf(sql, n, "%s", c->pe->lock_sql);
	else if (cmd == C_NOTIFY)
		snprintf(sql, n, "SELECT pg_notify('%s', $1)", c->pe->chan);
	else if (cmd < C_RELEASE)
		snprintf(sql, n, "SAVEPOINT s%d", cmd - C_SAVEPOINT);
	else if (cmd < C_UNDO)
		snprintf(sql, n, "RELEASE SAVEPOINT s%d", cmd - C_RELEASE);
	else
		snprintf(sql, n, "ROLLBACK TO SAVEPOINT s%d", cmd - C_UNDO);
}

/* Send command cmd as level id (param: its text parameter, C_NOTIFY's);
 * want as pg_send_text's. */
int pg_send_cmd(struct pg_conn *c, unsigned id, int cmd, const char *param, int want)
{
	int i = KV_NDB * S_N + cmd, rc;
	char name[16];

	if (c->broken)
		return EIO;
	if (cmd != C_BEGIN && cmd != C_BEGIN_READ)
		c->quiet = 0;
	snprintf(name, sizeof(name), "kc%d", cmd);
	if (!pg_prepared(c, i)) {
		char sql[128];

		pg_cmd_sql(c, cmd, sql, sizeof(sql));
		if (!PQsendPrepare(c->pq, name, sql, param ? 1 : 0, NULL))
			return pg_lost_pq(c);
		if ((rc = pg_push(c, id, 1 + i, 0, 0)))
			return rc;
	}
	if (!PQsendQueryPrepared(c->pq, name, param ? 1 : 0, &param, NULL, NULL, 0))
		return pg_lost_pq(c);
	return pg_push(c, id, 0, 0, want);
}

/* Before a statement of level depth: the pipeline kept short, the level
 * not failed (invariant 3), the lazy BEGIN and a reserved put sent. */
int pg_prelude(struct pg_conn *c, int depth)
{
	int rc;

	/* The writer's transaction (the window) may have begun long ago, idle
	 * while the server restarted or failed over: with nothing of it sent
	 * yet, its connection is checked now and made again, not failed.
	 * (A reader's begins just before its first statement.) */
	if (c->begin_cmd && c->writer && (rc = pg_alive(c)))
		return rc;
	if (c->broken)
		return EIO;
	if (c->pend_n - c->pend_at >= PG_PEND_MAX && (rc = pg_drain(c, NULL)))
		return rc;
	if (c->fail_depth <= depth)
		return c->fail_rc;
	if (c->begin_cmd) {
		int b = c->begin_cmd;

		c->begin_cmd = C_NONE;
		c->begun = 1;
		if ((rc = pg_send_cmd(c, c->open[0], b, NULL, 0)))
			return rc;
	}
	if (c->rsv.on) {
		kv_val k = {c->rsv.klen, c->rsv.key}, v = {c->rsv.len, c->rsv.buf};

		c->rsv.on = 0;
		rc = pg_send_stmt(c, c->rsv.depth, c->rsv.db, S_PUT, &k, &v, 0, 0);
		if (!rc) /* its bytes are known now (pg_cache.c invariant 1) */
			pg_cache_set(c, c->rsv.depth, c->rsv.db, k.data, k.size, PC_VAL, v.data,
				     v.size, 1);
		return rc;
	}
	return 0;
}

static int pg_prepare(struct pg_conn *c, unsigned id, enum kv_db db, enum pg_stmt s)
{
	char name[16], sql[512];
	Oid types[4];
	int n = 0;

	if (pg_prepared(c, (int)db * S_N + (int)s))
		return 0;
	snprintf(name, sizeof(name), "kv%d_%d", (int)db, (int)s);
	snprintf(sql, sizeof(sql), pg_stmts[s].sql, kv_db_names[db]);
	if (pg_stmts[s].key)
		types[n++] = PG_BYTEA;
	if (pg_stmts[s].val)
		types[n++] = PG_BYTEA;
	if (pg_stmts[s].old)
		types[n++] = PG_BYTEA;
	if (pg_stmts[s].limit)
		types[n++] = PG_INT4;
	if (!PQsendPrepare(c->pq, name, sql, n, types))
		return pg_lost_pq(c);
	return pg_push(c, id, 1 + (int)db * S_N + (int)s, 0, 0);
}

/* Send statement s of db as level depth; want: the caller reads its result
 * (pg_drain), else it is a change whose result is read later. */
int pg_send_stmt(struct pg_conn *c, int depth, enum kv_db db, enum pg_stmt s,
			const kv_val *k, const kv_val *v, int limit, int want)
{
	return pg_send_old(c, depth, db, s, k, v, NULL, limit, want);
}

int pg_send_old(struct pg_conn *c, int depth, enum kv_db db, enum pg_stmt s, const kv_val *k,
		const kv_val *v, const kv_val *old, int limit, int want)
{
	static const int fmts[4] = {1, 1, 1, 1};
	const char *vals[4];
	unsigned char lim[4];
	int lens[4], n = 0, rc;
	char name[16];

	c->quiet = 0;
	if ((rc = pg_prelude(c, depth)) || (rc = pg_prepare(c, c->open[depth], db, s)))
		return rc;
	if (pg_stmts[s].key) {
		if (k->size > INT_MAX)
			return EINVAL;
		vals[n] = k->size ? k->data : ""; /* NULL would be SQL's NULL */
		lens[n++] = (int)k->size;
	}
	if (pg_stmts[s].val) {
		if (v->size > INT_MAX)
			return EINVAL;
		vals[n] = v->size ? v->data : "";
		lens[n++] = (int)v->size;
	}
	if (pg_stmts[s].old) {
		if (old->size > INT_MAX)
			return EINVAL;
		vals[n] = old->size ? old->data : "";
		lens[n++] = (int)old->size;
	}
	if (pg_stmts[s].limit) {
		for (int i = 0; i < 4; i++)
			lim[i] = (unsigned char)((unsigned)limit >> (24 - 8 * i));
		vals[n] = (const char *)lim;
		lens[n++] = 4;
	}
	snprintf(name, sizeof(name), "kv%d_%d", (int)db, (int)s);
	if (!PQsendQueryPrepared(c->pq, name, n, vals, lens, fmts, 1))
		return pg_lost_pq(c);
	if (!want)
		c->deferred[depth] = 1;
	return pg_push(c, c->open[depth], 0, 0, want);
}

/* Send s and read its result. A top level's first statement whose session
 * the server ended (its FATAL: a restart, an administrator) goes again,
 * once, on a new connection: a server that closed the connection as the
 * statement went, later than pg_alive could tell at the begin, then costs
 * the caller nothing. Safe: nothing of the transaction went before it but
 * its BEGIN (quiet), the session's end undid whatever of it ran (no COMMIT
 * goes through here), and nothing of it was handed out. A connection lost
 * otherwise (no answer in time) may hold a session the server still runs,
 * the statement's locks with it: its failure stands. */
int pg_call(struct pg_conn *c, int depth, enum kv_db db, enum pg_stmt s, const kv_val *k,
		   const kv_val *v, int limit, PGresult **r)
{
	int again = depth == 0 && c->quiet && !c->rsv.on, begin_cmd = c->begin_cmd;
	int rc = pg_send_stmt(c, depth, db, s, k, v, limit, 1);

	if (!rc)
		rc = pg_drain(c, r);
	if (rc && again && c->broken && c->closing) {
		int implicit = c->implicit;

		c->implicit = 0; /* the reset's own statements end with a Sync */
		rc = pg_alive(c);
		c->implicit = implicit;
		c->begin_cmd = begin_cmd;
		c->begun = 0;
		if (!rc)
			rc = pg_send_stmt(c, depth, db, s, k, v, limit, 1);
		if (!rc)
			rc = pg_drain(c, r);
	}
	return rc;
}

int pg_hold(struct pg_conn *c, PGresult *r)
{
	int rc = pg_keep(&c->held, &c->nheld, &c->held_cap, r);

	if (rc)
		PQclear(r); /* nothing of it handed out yet */
	return rc;
}
