/*
 * pg.c - the PostgreSQL engine (engine.h): kv/'s maps as tables of the
 * database a postgresql:// URL names, so that a filesystem outlives a host
 * and several hosts reach it. pg_conn.c holds the connections, pg_stmt.c
 * the statements, pg_cursor.c the cursors, pg_cache.c what a transaction
 * knows, pg_listen.c the other mounts.
 *
 * Schema: a table a map, kvfs_<name> (k bytea PRIMARY KEY, v bytea NOT
 * NULL), found through the connection's search_path (one database may hold
 * several filesystems, a schema each: ?options=-csearch_path%3Dfs1 in the
 * URL). kvfs_data's values are stored EXTERNAL: the record layer checksums
 * and compresses blocks, pglz would only spend CPU. kvfs_meta's comment is
 * the tables' version (PG_SCHEMA in pg_conn.c, which makes them).
 *
 * Connections: the writer's (read-write opens), one a reader (read_begin's
 * transaction, kept for its thread), and idle ones in a pool (read-only
 * txn_begin, usage, sync). Round trips:
 *   read:  read_begin sends nothing and no BEGIN goes: its statements run
 *          in the server's implicit transaction, which lasts to the next
 *          Sync (a wait sends a flush request instead, pg_conn.c), in
 *          REPEATABLE READ, READ ONLY (the readers' connections' defaults),
 *          so its snapshot is taken at the first statement, at or after
 *          read_begin; read_end sends the Sync without waiting, its result
 *          read with the next statement's. A getattr (read_begin, get,
 *          read_end) is one round trip and one statement. A read-only
 *          txn_begin's sends BEGIN ISOLATION LEVEL REPEATABLE READ, READ
 *          ONLY with its first statement, and ROLLBACK at its end.
 *   write: BEGIN, SAVEPOINT, a plain put, cur_del, RELEASE and ROLLBACK go
 *          out without waiting; get, del, a NOOVERWRITE put, count, a
 *          cursor's fetch and COMMIT wait for their result, one round trip
 *          that carries whatever went before. A child that sent changes
 *          without waiting reads their results at its commit (one round
 *          trip), so that a failure is its own (contract 4).
 *   both:  a get, del or NOOVERWRITE put of a key the transaction read or
 *          wrote before is answered from what it knows (pg_cache.c: no
 *          round trip; a del of a key known there goes without waiting);
 *          prefetch sends a get without waiting, so that the gets an op
 *          names first share one round trip.
 *   guess: a writer's top level begun with KV_TXN_GUESS answers a get of a
 *          key it does not know from what the mount knew (pg_guess.c), and
 *          sends the check with the key's first change or before COMMIT:
 *          a batch's reads, changes and COMMIT are then one round trip.
 *
 * A connection's transaction (depth: the innermost open level):
 *
 *   none --begin--> depth 0 --child begin: SAVEPOINT s1--> depth 1 ...
 *    ^                |     <--child commit: RELEASE s1----'
 *    |                |     <--child abort: ROLLBACK TO s1, RELEASE s1
 *    '--commit: COMMIT; abort: ROLLBACK, read_end: Sync (not waited for)
 *
 * Invariants:
 *  1. bytea compares as memcmp, then length: ORDER BY k is contract 1's.
 *  2. Values handed out (get, cursors) point into PGresults kept on the
 *     connection (held, or a cursor's own) until the top level ends, or
 *     until cur_forget drops its cursor's older ones (contract 5).
 *  3. A level whose statement failed takes only abort (every call returns
 *     the failure). Abort sends a Sync first when statements went since the
 *     last one: the server skips to the next Sync after an error, and would
 *     skip the ROLLBACK too.
 *  4. A cursor's rows are what its transaction holds: a change inside the
 *     span of keys its rows cover (to the map's end when no rows follow in
 *     its direction) makes it stale, and its next move fetches again from
 *     its key. A change of its current key alone (cur_del) makes only
 *     GET_CURRENT, and a move back over the rows it passed, fetch again:
 *     a walk that deletes as it goes needs no more fetches (contract 6).
 *  5. Statements are prepared once a connection, at first use, in the same
 *     round trip; parameters and results are binary. Transaction control,
 *     the writers' lock and NOTIFY too (enum pg_cmd): parsing and planning
 *     them each time cost the server ~17 us a statement, eight a create.
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_int.h"

/* ------------------------------------------------------------- helpers -- */

int pg_keep(PGresult ***arr, size_t *n, size_t *cap, PGresult *r)
{
	if (*n == *cap) {
		size_t ncap = *cap ? 2 * *cap : 16;
		PGresult **a = realloc(*arr, ncap * sizeof(*a));

		if (!a)
			return ENOMEM;
		*arr = a;
		*cap = ncap;
	}
	(*arr)[(*n)++] = r;
	return 0;
}

void pg_clear_all(PGresult **arr, size_t *n)
{
	for (size_t i = 0; i < *n; i++)
		PQclear(arr[i]);
	*n = 0;
}

void pg_val(const PGresult *r, int row, int col, kv_val *v)
{
	v->size = (size_t)PQgetlength(r, row, col);
	v->data = PQgetvalue(r, row, col);
}

int pg_key_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	int d = n ? memcmp(a, b, n) : 0;

	return d ? d : (alen > blen) - (alen < blen);
}

static unsigned pg_serial(struct pg_conn *c)
{
	if (!++c->serial)
		c->serial = 1; /* 0 is no level's */
	return c->serial;
}

/* -------------------------------------------------------- transactions -- */

/* The top level ended: what it handed out goes (invariant 2), and what it
 * knew (pg_cache.c invariant 3). */
static void pg_txn_end(struct pg_conn *c)
{
	for (size_t i = c->pend_at; i < c->pend_n; i++)
		c->pend[i].ent = NULL;
	pg_cache_end(c);
	pg_clear_all(c->held, &c->nheld);
	pg_cursors_end(c);
	c->depth = -1;
	c->fail_depth = INT_MAX;
	c->fail_rc = 0;
	c->begin_cmd = C_NONE;
	c->begun = 0;
	c->guessing = 0;
	c->rsv.on = 0;
	memset(c->deferred, 0, sizeof(c->deferred));
}

/* End the server's transaction without waiting (invariant 3). No Sync
 * follows the ROLLBACK: the server ends a transaction at the Execute of
 * its ROLLBACK, and without a Sync it sends nothing back until the next
 * statement's (no ReadyForQuery to write and read: a getattr took 38 us
 * with one here, 29 us without, against 25 us for a bare SELECT). Until
 * then pg_stat_activity shows the connection "active" in "ROLLBACK". */
static void pg_end_rollback(struct pg_conn *c)
{
	if (c->implicit) { /* its Sync ends it (a read: nothing to commit) */
		c->implicit = 0;
		if (!pg_sync(c))
			pg_flush_now(c);
		return;
	}
	if (c->begun && !pg_sync(c) && !pg_send_cmd(c, 0, C_ROLLBACK, NULL, 0))
		pg_flush_now(c);
}

static int pg_top_begin(kv_etxn *x, int begin_cmd)
{
	struct pg_conn *c = x->c;
	int rc = pg_alive(c);

	if (rc)
		return rc;
	assert(c->depth < 0);
	c->depth = 0;
	c->open[0] = pg_serial(c);
	c->begin_cmd = begin_cmd;
	c->begun = 0;
	c->quiet = 1;
	x->depth = 0;
	x->active = 1;
	return 0;
}

static int pg_child_begin(kv_etxn *parent, kv_etxn **out)
{
	struct pg_conn *c = parent->c;
	int d = parent->depth + 1, rc;
	kv_etxn *x;

	if (parent->kind != PG_WRITE)
		return EINVAL;
	assert(c->depth == parent->depth);
	if (d >= PG_MAX_DEPTH)
		return KV_ETXN_FULL;
	x = calloc(1, sizeof(*x));
	if (!x)
		return ENOMEM;
	*x = (kv_etxn){.c = c, .depth = d, .kind = PG_WRITE, .active = 1};
	rc = pg_prelude(c, parent->depth); /* the parent's reserved put is the parent's */
	if (!rc)
		rc = pg_owed_all(c, parent->depth);
	if (rc)
		goto free_x;
	c->depth = d;
	c->open[d] = pg_serial(c);
	c->deferred[d] = 0;
	rc = pg_send_cmd(c, c->open[d], C_SAVEPOINT + d, NULL, 0);
	if (rc) {
		c->depth = d - 1;
		goto free_x;
	}
	*out = x;
	return 0;
free_x:
	free(x);
	return rc;
}

/* A child's changes dropped; its failure with them. */
static void pg_child_abort(kv_etxn *x)
{
	struct pg_conn *c = x->c;
	int d = x->depth;

	assert(c->depth == d);
	if (c->rsv.on && c->rsv.depth == d)
		c->rsv.on = 0;
	c->open[d] = 0; /* results of its statements still to come are dropped */
	c->depth = d - 1;
	if (c->fail_depth == d)
		c->fail_depth = INT_MAX;
	pg_cache_abort(c, d);
	/* The parent's cursors: the child's writes made those they touch
	 * stale already (pg_touch), so they fetch again after the rollback. */
	if (!pg_sync(c) && !pg_send_cmd(c, c->open[d - 1], C_UNDO + d, NULL, 0))
		pg_send_cmd(c, c->open[d - 1], C_RELEASE + d, NULL, 0);
	free(x);
}

static int pg_child_commit(kv_etxn *x)
{
	struct pg_conn *c = x->c;
	int d = x->depth, rc;

	rc = pg_prelude(c, d);
	/* its changes' results, so that a failure is its own; but a mount
	 * alone, whose window tells ops before their commit anyway, waits for
	 * nothing here (engine.h, contract 2: a failure fails all it holds) */
	if (!rc && c->deferred[d] && !c->pe->leased)
		rc = pg_drain(c, NULL);
	if (!rc && c->fail_depth <= d)
		rc = c->fail_rc;
	if (rc) {
		pg_child_abort(x);
		return rc;
	}
	c->open[d] = 0;
	c->depth = d - 1;
	pg_cache_commit(c, d);
	rc = pg_send_cmd(c, c->open[d - 1], C_RELEASE + d, NULL, 0); /* the parent's now */
	free(x);
	return rc;
}

static int pg_commit_top(kv_etxn *x)
{
	struct pg_conn *c = x->c;
	PGresult *r = NULL;
	int rc = 0;

	/* a transaction that only read guesses sends their checks too: what
	 * its caller did with them is checked before it is told done */
	if (x->kind == PG_WRITE && (c->begun || c->rsv.on || pg_owes(c))) {
		rc = pg_prelude(c, 0);
		if (!rc)
			rc = pg_owed_all(c, 0);
		if (!rc)
			rc = pg_send_cmd(c, c->open[0], C_COMMIT, NULL, 1);
		if (!rc)
			rc = pg_drain(c, &r);
		if (!rc && strcmp(PQcmdStatus(r), "COMMIT"))
			rc = EIO; /* the server rolled it back */
		PQclear(r);
		if (!rc && c->writer)
			pg_guess_commit(c->pe, c); /* before the cache goes */
	}
	if (rc || x->kind != PG_WRITE)
		pg_end_rollback(c);
	pg_txn_end(c);
	return rc;
}

/* A top level is over: a read-only txn_begin's connection goes back to the
 * pool. */
static void pg_top_done(struct pg_env *pe, kv_etxn *x)
{
	x->active = 0;
	if (x->kind == PG_RDONLY) {
		pg_pool_put(pe, x->c);
		free(x);
	}
}

static int pg_txn_begin(kv_env *e, kv_etxn *parent, unsigned flags, kv_etxn **out)
{
	struct pg_env *pe = e->eng_priv;
	kv_etxn *x;
	int rc;

	if (parent)
		return pg_child_begin(parent, out);
	if (flags & KV_TXN_RDONLY) {
		x = calloc(1, sizeof(*x));
		if (!x)
			return ENOMEM;
		x->kind = PG_RDONLY;
		rc = pg_pool_get(pe, &x->c, NULL, 0);
		if (!rc)
			rc = pg_top_begin(x, C_BEGIN_READ);
		if (rc) {
			if (x->c)
				pg_pool_put(pe, x->c);
			free(x);
			return rc;
		}
	} else {
		if (!pe->w)
			return EACCES; /* a read-only open */
		x = &pe->wtx;
		assert(!x->active); /* one write txn (contract 3) */
		*x = (kv_etxn){.c = pe->w, .kind = PG_WRITE};
		rc = pg_top_begin(x, C_BEGIN);
		if (rc)
			return rc;
		pe->w->guessing = (flags & KV_TXN_GUESS) && pg_guess_quiet(pe);
	}
	*out = x;
	return 0;
}

static int pg_txn_commit(kv_env *e, kv_etxn *x)
{
	int rc;

	if (x->depth > 0)
		return pg_child_commit(x);
	rc = pg_commit_top(x);
	pg_top_done(e->eng_priv, x);
	return rc;
}

static void pg_txn_abort(kv_env *e, kv_etxn *x)
{
	if (x->depth > 0) {
		pg_child_abort(x);
		return;
	}
	x->c->rsv.on = 0;
	pg_end_rollback(x->c);
	pg_txn_end(x->c);
	pg_top_done(e->eng_priv, x);
}

static int pg_read_begin(kv_env *e, kv_etxn **xp)
{
	struct pg_env *pe = e->eng_priv;
	kv_etxn *x = *xp;
	int rc;

	if (!x) {
		x = calloc(1, sizeof(*x));
		if (!x)
			return ENOMEM;
		x->kind = PG_READ;
		rc = pg_pool_get(pe, &x->c, NULL, 0);
		if (rc) {
			free(x);
			return rc;
		}
		*xp = x;
	}
	assert(!x->active);
	rc = pg_top_begin(x, C_NONE);
	x->c->implicit = !rc;
	x->gen = pg_guess_gen(pe);
	return rc;
}

static void pg_read_end(kv_env *e, kv_etxn *x)
{
	(void)e;
	pg_end_rollback(x->c);
	pg_txn_end(x->c);
	x->active = 0;
}

static void pg_read_free(kv_env *e, kv_etxn *x)
{
	if (!x)
		return;
	if (x->active)
		pg_read_end(e, x);
	pg_pool_put(e->eng_priv, x->c);
	free(x);
}

/* ------------------------------------------------------------- records -- */

/* What level depth knows of key k of db (pg_cache.c): a value or an
 * absence, a prefetch's result waited for, or a guess; NULL to ask the
 * server (or a failure in *rc). */
static struct pg_centry *pg_known(struct pg_conn *c, int depth, enum kv_db db, const kv_val *k,
				  int *rc)
{
	struct pg_centry *ce;

	*rc = pg_prelude(c, depth); /* a failed level; a reserved put sent */
	if (*rc)
		return NULL;
	ce = pg_cache_find(c, db, k->data, k->size);
	if (!ce && c->guessing && depth == 0) /* a child reads: its abort loses no check */
		return pg_guessed(c, depth, db, k);
	if (!ce || ce->state != PC_PEND)
		return ce;
	*rc = pg_drain(c, NULL);
	if (!*rc && c->fail_depth <= depth)
		*rc = c->fail_rc;
	if (*rc)
		return NULL;
	ce = pg_cache_find(c, db, k->data, k->size);
	if (ce && ce->state == PC_PEND) { /* its result went with a lost connection */
		pg_cache_drop(c, db, k->data, k->size);
		ce = NULL;
	}
	return ce;
}

/* The server's answer r to a get of key k of db (0 or 1 rows, taken):
 * KV_ENOTFOUND, or 0 with *v and r held; the cache told either way. */
static int pg_got(struct pg_conn *c, int depth, enum kv_db db, const kv_val *k, PGresult *r,
		  kv_val *v)
{
	int rc;

	if (PQntuples(r) == 0) {
		PQclear(r);
		pg_cache_set(c, depth, db, k->data, k->size, PC_NONE, NULL, 0, 0);
		return KV_ENOTFOUND;
	}
	if ((rc = pg_hold(c, r)))
		return rc;
	pg_val(r, 0, 0, v);
	pg_cache_set(c, depth, db, k->data, k->size, PC_VAL, v->data, v->size, 0);
	return 0;
}

static int pg_get(kv_env *e, kv_etxn *x, enum kv_db db, const kv_val *k, kv_val *v)
{
	struct pg_env *pe = e->eng_priv;
	struct pg_centry *ce;
	PGresult *r;
	int rc;

	ce = pg_known(x->c, x->depth, db, k, &rc);
	if (rc)
		return rc;
	if (ce) {
		rc = ce->state == PC_NONE ? KV_ENOTFOUND : 0;
		v->data = (void *)ce->val;
		v->size = ce->vlen;
	} else {
		rc = pg_call(x->c, x->depth, db, S_GET, k, NULL, 0, &r);
		if (!rc)
			rc = pg_got(x->c, x->depth, db, k, r, v);
	}
	/* a reader's answer: the writer's next batch may guess it (the
	 * LOOKUP before a create found the name's bucket empty) */
	if (x->kind == PG_READ && pe->guess && (rc == 0 || rc == KV_ENOTFOUND))
		pg_guess_read(pe, x->gen, db, k->data, k->size, rc ? NULL : v->data,
			      rc ? 0 : v->size, !rc);
	return rc;
}

/* engine.h: the get goes now, its result to the cache; the get that
 * follows waits for it with whatever else went meanwhile. */
static void pg_prefetch(kv_env *e, kv_etxn *x, enum kv_db db, const kv_val *k)
{
	struct pg_conn *c = x->c;

	(void)e;
	if (pg_cache_find(c, db, k->data, k->size))
		return; /* known, or on its way */
	if (c->guessing && x->depth == 0 && pg_guessed(c, x->depth, db, k))
		return;
	if (pg_send_stmt(c, x->depth, db, S_GET, k, NULL, 0, 0))
		return; /* the get will say why */
	c->pend[c->pend_n - 1].ent =
		pg_cache_set(c, x->depth, db, k->data, k->size, PC_PEND, NULL, 0, 0);
}

void pg_prefetched(struct pg_conn *c, const struct pg_pend *p, PGresult *r)
{
	struct pg_centry *ce = p->ent;
	kv_val v;

	if (ce->state != PC_PEND) { /* dropped, or changed since it went */
		PQclear(r);
		return;
	}
	if (!r || (PQntuples(r) && pg_hold(c, r))) { /* pg_hold cleared it */
		pg_cache_drop(c, ce->db, ce->key, ce->klen);
		return;
	}
	if (!PQntuples(r)) {
		PQclear(r);
		ce->state = PC_NONE;
		return;
	}
	pg_val(r, 0, 0, &v);
	ce->state = PC_VAL;
	ce->val = v.data;
	ce->vlen = v.size;
}

/* KV_PUT_RESERVE: the bytes go with the next statement (contract 7). */
static int pg_reserve(kv_etxn *x, enum kv_db db, const kv_val *k, kv_val *v)
{
	struct pg_conn *c = x->c;
	struct pg_reserve *rs = &c->rsv;
	int rc = pg_prelude(c, x->depth); /* sends the one before */

	if (!rc)
		rc = pg_owed_key(c, x->depth, db, k->data, k->size);
	if (rc)
		return rc;
	if (k->size > rs->kcap || v->size > rs->cap) {
		size_t kcap = k->size > rs->kcap ? k->size : rs->kcap;
		size_t cap = v->size > rs->cap ? v->size : rs->cap;
		unsigned char *key = realloc(rs->key, kcap ? kcap : 1);

		if (!key)
			return ENOMEM;
		rs->key = key;
		rs->kcap = kcap;
		key = realloc(rs->buf, cap ? cap : 1);
		if (!key)
			return ENOMEM;
		rs->buf = key;
		rs->cap = cap;
	}
	if (k->size)
		memcpy(rs->key, k->data, k->size);
	rs->klen = k->size;
	rs->len = v->size;
	rs->db = db;
	rs->depth = x->depth;
	rs->on = 1;
	v->data = rs->buf;
	pg_touch(c, db, k->data, k->size);
	pg_cache_drop(c, db, k->data, k->size); /* known again when it goes */
	return 0;
}

/* NOOVERWRITE: KV_EKEYEXIST with the value there in *v (as LMDB gives
 * it); 1 when it went in (S_PUTNEW), 0 when the put is still to be made. */
static int pg_put_new(kv_etxn *x, enum kv_db db, const kv_val *k, kv_val *v, unsigned flags)
{
	struct pg_conn *c = x->c;
	/* With RESERVE, a look first; without, the insert itself. */
	enum pg_stmt s = flags & KV_PUT_RESERVE ? S_GET : S_PUTNEW;
	struct pg_centry *ce;
	PGresult *r;
	kv_val there;
	int rc;

	ce = pg_known(c, x->depth, db, k, &rc);
	if (rc)
		return rc;
	if (ce && ce->state == PC_NONE)
		return 0; /* a plain put does */
	if (ce) {
		v->data = (void *)ce->val;
		v->size = ce->vlen;
		return KV_EKEYEXIST;
	}
	rc = pg_call(c, x->depth, db, s, k, v, 0, &r);
	if (rc)
		return rc;
	if (s == S_PUTNEW && !PQntuples(r)) {
		PQclear(r);
		pg_touch(c, db, k->data, k->size);
		pg_cache_set(c, x->depth, db, k->data, k->size, PC_VAL, v->data, v->size, 1);
		return 1;
	}
	rc = pg_got(c, x->depth, db, k, r, &there);
	if (rc == KV_ENOTFOUND)
		return 0;
	if (rc == 0) {
		*v = there;
		rc = KV_EKEYEXIST;
	}
	return rc;
}

static int pg_put(kv_env *e, kv_etxn *x, enum kv_db db, const kv_val *k, kv_val *v,
		  unsigned flags)
{
	struct pg_conn *c = x->c;
	struct pg_centry *ce;
	int rc;

	(void)e;
	if (x->kind != PG_WRITE)
		return EACCES;
	if (flags & KV_PUT_NOOVERWRITE) {
		rc = pg_put_new(x, db, k, v, flags);
		if (rc)
			return rc == 1 ? 0 : rc;
	}
	if (flags & KV_PUT_RESERVE)
		return pg_reserve(x, db, k, v);
	ce = c->guessing ? pg_cache_find(c, db, k->data, k->size) : NULL;
	if (ce && ce->owed) { /* the change checks the guess */
		kv_val old = {ce->vlen, (void *)ce->val};

		ce->owed = 0;
		rc = pg_send_old(c, x->depth, db, ce->state == PC_VAL ? S_SWAP : S_INSERT, k, v,
				 &old, 0, 0);
	} else {
		rc = pg_send_stmt(c, x->depth, db, S_PUT, k, v, 0, 0);
	}
	if (!rc) {
		pg_touch(c, db, k->data, k->size);
		pg_cache_set(c, x->depth, db, k->data, k->size, PC_VAL, v->data, v->size, 1);
	}
	return rc;
}

static int pg_del(kv_env *e, kv_etxn *x, enum kv_db db, const kv_val *k)
{
	struct pg_conn *c = x->c;
	struct pg_centry *ce;
	PGresult *r;
	int rc, gone;

	(void)e;
	if (x->kind != PG_WRITE)
		return EACCES;
	ce = pg_known(c, x->depth, db, k, &rc);
	if (rc)
		return rc;
	if (ce && ce->state == PC_NONE)
		return KV_ENOTFOUND;
	if (ce) { /* there: nothing to wait for, as a put */
		kv_val old = {ce->vlen, (void *)ce->val};

		rc = pg_send_stmt(c, x->depth, db, ce->owed ? S_DELSAME : S_DEL, k, &old, 0, 0);
		ce->owed = 0;
		if (rc)
			return rc;
	} else {
		rc = pg_call(c, x->depth, db, S_DEL, k, NULL, 0, &r);
		if (rc)
			return rc;
		gone = strcmp(PQcmdTuples(r), "0") != 0;
		PQclear(r);
		pg_cache_set(c, x->depth, db, k->data, k->size, PC_NONE, NULL, 0, 0);
		if (!gone)
			return KV_ENOTFOUND;
	}
	pg_touch(c, db, k->data, k->size);
	pg_cache_set(c, x->depth, db, k->data, k->size, PC_NONE, NULL, 0, 0);
	return 0;
}

static int pg_count(kv_env *e, kv_etxn *x, enum kv_db db, uint64_t *n)
{
	const unsigned char *p;
	PGresult *r;
	int rc;

	(void)e;
	rc = pg_call(x->c, x->depth, db, S_COUNT, NULL, NULL, 0, &r);
	if (rc)
		return rc;
	if (PQntuples(r) != 1 || PQgetlength(r, 0, 0) != 8) {
		PQclear(r);
		return EIO;
	}
	p = (const unsigned char *)PQgetvalue(r, 0, 0);
	*n = kv_get_be64(p);
	PQclear(r);
	return 0;
}

/* ----------------------------------------------------------------- env -- */

static struct pg_env *pg_env_new(kv_env *e)
{
	struct pg_env *pe = calloc(1, sizeof(*pe));

	if (!pe)
		return NULL;
	pe->e = e;
	pthread_mutex_init(&pe->lock, NULL);
	pg_display(e->path, pe->disp, sizeof(pe->disp));
	return pe;
}

static void pg_env_free(struct pg_env *pe)
{
	pg_conn_free(pe->w);
	pg_conn_free(pe->hold);
	while (pe->pool) {
		struct pg_conn *c = pe->pool;

		pe->pool = c->next;
		pg_conn_free(c);
	}
	pg_guess_free(pe);
	pthread_mutex_destroy(&pe->lock);
	free(pe);
}

/* create and open return 0 or a negative errno value, as the record
 * layer's kv_mkfs and kv_open do (lmdb.c too). */
static int pg_neg(int rc)
{
	return rc == KV_EINVAL ? -EINVAL : rc == KV_EVERSION ? -EPROTONOSUPPORT : -rc;
}

/* The tables made and init's records written in one transaction (DDL is
 * transactional here): all of it, or nothing changed, even with force. */
static int pg_create(kv_env *e, int force, int (*init)(kv_env *e, kv_etxn *x, void *arg),
		     void *arg, char *err, size_t errlen)
{
	struct pg_env *pe = pg_env_new(e);
	kv_etxn *x;
	int rc;

	if (!pe)
		return -ENOMEM;
	rc = pg_connect(pe, 1, &pe->w, err, errlen);
	if (rc)
		goto free_pe;
	rc = pg_store_make(pe->w, force, &e->page_size, err, errlen); /* BEGIN sent */
	if (rc)
		goto free_pe;
	e->eng_priv = pe;
	x = &pe->wtx;
	*x = (kv_etxn){.c = pe->w, .kind = PG_WRITE};
	rc = pg_top_begin(x, C_NONE);
	if (!rc) {
		pe->w->begun = 1;
		rc = init ? -init(e, x, arg) : 0; /* init: 0 or a negative errno value */
		if (rc) {
			pg_end_rollback(x->c);
			pg_txn_end(x->c);
		} else {
			rc = pg_commit_top(x);
		}
		x->active = 0; /* pg_top_done's, for the writer's level */
		if (rc && err && !err[0])
			kv_seterr(err, errlen, "'%s': %s", pe->disp,
				  pe->w->last_err[0] ? pe->w->last_err : kv_strerror(rc));
	}
	e->eng_priv = NULL;
free_pe:
	pg_env_free(pe);
	return rc ? pg_neg(rc) : 0;
}

static int pg_open(kv_env *e, char *err, size_t errlen)
{
	struct pg_env *pe = pg_env_new(e);
	struct pg_conn *c;
	int rc;

	if (!pe)
		return -ENOMEM;
	rc = pg_connect(pe, !e->readonly, &c, err, errlen);
	if (rc)
		goto free_pe;
	rc = pg_store_check(c, &e->page_size, err, errlen);
	if (rc) {
		pg_conn_free(c);
		goto free_pe;
	}
	if (!e->readonly && (rc = pg_mount_lock(c, err, errlen)) != 0) {
		pg_conn_free(c);
		goto free_pe;
	}
	/* a mount's share of the lease: a mount elsewhere that holds it alone
	 * commits and gives it up first (pg_lease.c) */
	if (e->mount && (rc = pg_lease_join(c, err, errlen)) != 0) {
		pg_conn_free(c);
		goto free_pe;
	}
	if (!e->readonly && (rc = pg_guess_init(pe)) != 0) {
		kv_seterr(err, errlen, "'%s': %s", pe->disp, strerror(rc));
		pg_conn_free(c);
		goto free_pe;
	}
	if (e->readonly && e->mount)
		pe->hold = c; /* holds the lease shared */
	else if (e->readonly)
		pg_pool_put(pe, c); /* the first reader's */
	else
		pe->w = c;
	e->eng_priv = pe;
	return 0;
free_pe:
	pg_env_free(pe);
	return pg_neg(rc);
}

static void pg_close(kv_env *e)
{
	struct pg_env *pe = e->eng_priv;

	if (!pe)
		return;
	assert(!pe->wtx.active);
	pg_listen_free(pe);
	pg_env_free(pe);
	e->eng_priv = NULL;
}

/* Commits wait for their WAL flush (synchronous_commit on, pg_conn.c)
 * but with KV_DURABLE_NONE; sync flushes it (pg_store_sync) for all but
 * KV_DURABLE_FULL, where every commit was durable already. */
static int pg_sync_env(kv_env *e)
{
	struct pg_env *pe = e->eng_priv;

	if (!pe->w || e->durability == KV_DURABLE_FULL)
		return 0;
	return pg_store_sync(pe);
}

/* The bytes the tables, their indexes and TOAST take on the server (file
 * and used alike); no map, so no room of ours (engine.h). What may still
 * be written is the server's to know (its disk, quotas, a cloud plan):
 * statfs gets the room to max_size (-o max_size) or to a nominal 1 PiB,
 * as network filesystems report a size they do not know. */
#define PG_NOMINAL_ROOM (1ULL << 50)
static int pg_usage(kv_env *e, struct kv_usage *u)
{
	uint64_t room = e->max_size ? e->max_size : PG_NOMINAL_ROOM;
	int rc = pg_store_bytes(e->eng_priv, &u->used_bytes);

	if (rc)
		return rc;
	u->file_bytes = u->used_bytes;
	u->ahead_bytes = u->map_bytes = u->promised_bytes = 0;
	u->extent_bytes = u->reserve_bytes = 0;
	u->max_bytes = e->max_size;
	u->avail_bytes = room > u->used_bytes ? room - u->used_bytes : 0;
	u->page_size = e->page_size;
	return 0;
}

/* Many mounts: their writers one at a time (engine.h: shared). Sent
 * without waiting: the next statement's result waits for it, no round
 * trip more. Readers that the record layer routes into the writer's open
 * transaction do not take it. */
static int pg_lock(kv_env *e, kv_etxn *x)
{
	struct pg_env *pe = e->eng_priv;
	int rc;

	assert(x->depth == 0 && x->kind == PG_WRITE);
	rc = pg_prelude(x->c, 0);
	(void)pe;
	return rc ? rc : pg_send_cmd(x->c, x->c->open[0], C_LOCK, NULL, 0);
}

/* The message goes in the top-level transaction, without waiting: NOTIFY
 * delivers it when the transaction commits, or never. change.c's messages
 * are lower-case hex, 'i', 'n', '/', "kvfs1" and spaces (text, a parameter). */
static int pg_publish(kv_env *e, kv_etxn *x, const char *msg, size_t len)
{
	struct pg_conn *c = x->c;
	char *text;
	int rc;

	assert(x->depth == 0 && x->kind == PG_WRITE);
	assert(strspn(msg, "0123456789abcdefikvsn/ ") == len);
	if (!atomic_load(&((struct pg_env *)e->eng_priv)->others))
		return 0; /* no one to tell yet (pg_listen.c invariant 3) */
	text = strndup(msg, len);
	if (!text)
		return ENOMEM;
	rc = pg_prelude(c, 0);
	if (!rc)
		rc = pg_send_cmd(c, c->open[0], C_NOTIFY, text, 0);
	free(text);
	return rc;
}

static int pg_backup(kv_env *e, const char *dest, char *err, size_t errlen)
{
	(void)e;
	(void)dest;
	kv_seterr(err, errlen, "use pg_dump or pg_basebackup for a PostgreSQL-backed filesystem");
	return -EOPNOTSUPP;
}

const struct kv_engine kv_engine_pg = {
	.name = "postgresql",
	.create = pg_create,
	.open = pg_open,
	.close = pg_close,
	.txn_begin = pg_txn_begin,
	.txn_commit = pg_txn_commit,
	.txn_abort = pg_txn_abort,
	.read_begin = pg_read_begin,
	.read_end = pg_read_end,
	.read_free = pg_read_free,
	.get = pg_get,
	.prefetch = pg_prefetch,
	.put = pg_put,
	.del = pg_del,
	.count = pg_count,
	.cur_open = pg_cur_open,
	.cur_renew = pg_cur_renew,
	.cur_close = pg_cur_close,
	.cur_get = pg_cur_get,
	.cur_del = pg_cur_del,
	.cur_forget = pg_cur_forget,
	.sync = pg_sync_env,
	.usage = pg_usage,
	.backup = pg_backup,
	.publish = pg_publish,
	.listen = pg_listen,
	.lock = pg_lock,
	.lease = pg_lease,
	.any_thread = 1,
	.shared = 1,
};
