/*
 * pg_cursor.c - the PostgreSQL engine's cursors (pg.c's invariants 2 and
 * 4): rows fetched in pages that grow as a walk goes on, kept on the
 * cursor while its values may still be in use, and made stale by the
 * transaction's own changes inside the span they cover.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pg_int.h"

#define PG_ROWS_FIRST 4          /* a cursor's first fetch: most read 1 to 3 rows */
#define PG_ROWS_MAX 256          /* a walk's fetches grow 4 times a time up to this */
#define PG_FETCH_BYTES (1 << 20) /* and no more once a fetch brought this much */

struct kv_ecur {
	struct pg_conn *c;
	kv_etxn *x;               /* NULL while its transaction is reset */
	enum kv_db db;
	PGresult *res;            /* the last rows fetched, in the order dir walks */
	int nrows, row;           /* row: the current one; -1 not positioned */
	int dir;                  /* 1: res ascends; -1: it descends */
	int more;                 /* rows may follow res's last in dir */
	int stale, cur_stale;     /* invariant 4 */
	int holes;                /* a row behind the current one may be changed */
	int limit;                /* rows the next fetch asks */
	PGresult **old;           /* results it handed out before res */
	size_t nold, oldcap;
	kv_ecur *next, **prevp;   /* c->curs */
};

static int row_cmp(const kv_ecur *cur, int row, const void *k, size_t klen)
{
	return pg_key_cmp(PQgetvalue(cur->res, row, 0), (size_t)PQgetlength(cur->res, row, 0),
			  k, klen);
}

/* A change of key k of db in c's transaction (invariant 4). */
void pg_touch(struct pg_conn *c, enum kv_db db, const void *k, size_t klen)
{
	for (kv_ecur *cur = c->curs; cur; cur = cur->next) {
		int lo, hi;

		if (cur->db != db || !cur->res || cur->row < 0 || cur->stale)
			continue;
		lo = cur->dir > 0 ? 0 : cur->nrows - 1;
		hi = cur->nrows - 1 - lo;
		if ((cur->more || cur->dir > 0) && row_cmp(cur, lo, k, klen) > 0)
			continue; /* below its rows */
		if ((cur->more || cur->dir < 0) && row_cmp(cur, hi, k, klen) < 0)
			continue; /* above them */
		if (row_cmp(cur, cur->row, k, klen) == 0)
			cur->cur_stale = cur->holes = 1;
		else
			cur->stale = 1;
	}
}

/* The top level ended: every cursor of c lets go of its rows (pg.c
 * invariant 2). */
void pg_cursors_end(struct pg_conn *c)
{
	for (kv_ecur *cur = c->curs; cur; cur = cur->next) {
		PQclear(cur->res);
		cur->res = NULL;
		pg_clear_all(cur->old, &cur->nold);
		cur->row = -1;
		cur->x = NULL;
	}
}

static void pg_cur_link(kv_ecur *cur, struct pg_conn *c)
{
	cur->c = c;
	cur->next = c->curs;
	if (c->curs)
		c->curs->prevp = &cur->next;
	cur->prevp = &c->curs;
	c->curs = cur;
}

static void pg_cur_unlink(kv_ecur *cur)
{
	*cur->prevp = cur->next;
	if (cur->next)
		cur->next->prevp = cur->prevp;
}

int pg_cur_open(kv_env *e, kv_etxn *x, enum kv_db db, kv_ecur **out)
{
	kv_ecur *cur = calloc(1, sizeof(*cur));

	(void)e;
	if (!cur)
		return ENOMEM;
	cur->x = x;
	cur->db = db;
	cur->row = -1;
	cur->limit = PG_ROWS_FIRST;
	pg_cur_link(cur, x->c);
	*out = cur;
	return 0;
}

int pg_cur_renew(kv_env *e, kv_etxn *x, kv_ecur *cur)
{
	(void)e;
	if (cur->c != x->c) {
		pg_cur_unlink(cur);
		pg_cur_link(cur, x->c);
	}
	cur->x = x;
	cur->row = -1;
	return 0;
}

void pg_cur_close(kv_env *e, kv_ecur *cur)
{
	struct pg_conn *c;

	(void)e;
	if (!cur)
		return;
	c = cur->c;
	pg_cur_unlink(cur);
	if (cur->x) { /* its values stay valid to the end of the txn (contract 5) */
		if (cur->res && pg_keep(&c->held, &c->nheld, &c->held_cap, cur->res))
			cur->res = NULL; /* leaked rather than freed under a caller */
		for (size_t i = 0; i < cur->nold; i++)
			if (pg_keep(&c->held, &c->nheld, &c->held_cap, cur->old[i]))
				break; /* the rest leaked, as above */
	} else {
		PQclear(cur->res);
		pg_clear_all(cur->old, &cur->nold);
	}
	free(cur->old);
	free(cur);
}

void pg_cur_forget(kv_env *e, kv_ecur *cur)
{
	(void)e;
	pg_clear_all(cur->old, &cur->nold);
}

/* Fetch rows by s from key from (NULL for FIRST and LAST), walking dir. */
static int pg_cur_fetch(kv_ecur *cur, enum pg_stmt s, const kv_val *from, int dir)
{
	PGresult *r;
	int rc;

	if (!cur->x)
		return EINVAL; /* its transaction ended, not renewed */
	rc = pg_call(cur->c, cur->x->depth, cur->db, s, from, NULL, cur->limit, &r);
	if (rc)
		return rc;
	if (cur->res) { /* its values were handed out: kept (invariant 2) */
		if ((rc = pg_keep(&cur->old, &cur->nold, &cur->oldcap, cur->res))) {
			PQclear(r);
			return rc;
		}
		cur->res = NULL;
	}
	cur->nrows = PQntuples(r);
	cur->stale = cur->cur_stale = cur->holes = 0;
	if (!cur->nrows) {
		PQclear(r);
		cur->row = -1;
		return KV_ENOTFOUND;
	}
	cur->res = r;
	cur->row = 0;
	cur->dir = dir;
	cur->more = cur->nrows == cur->limit;
	return 0;
}

/* A walk goes on: fetch more rows a time, up to PG_ROWS_MAX and while the
 * last fetch brought less than PG_FETCH_BYTES. */
static void pg_cur_grow(kv_ecur *cur)
{
	size_t bytes = 0;

	for (int i = 0; i < cur->nrows; i++)
		bytes += (size_t)PQgetlength(cur->res, i, 1);
	if (cur->limit < PG_ROWS_MAX && bytes < PG_FETCH_BYTES)
		cur->limit *= 4;
}

/* NEXT (d 1) or PREV (d -1) from the current row. */
static int pg_cur_step(kv_ecur *cur, int d)
{
	kv_val at;

	if (!cur->stale && !(cur->holes && d != cur->dir)) {
		int i = cur->row + d * cur->dir;

		if (i >= 0 && i < cur->nrows) {
			cur->row = i;
			cur->cur_stale = 0;
			return 0;
		}
		if (i >= cur->nrows && !cur->more) {
			cur->row = -1; /* past the end (contract 6) */
			return KV_ENOTFOUND;
		}
		pg_cur_grow(cur);
	}
	pg_val(cur->res, cur->row, 0, &at); /* stays valid: the result is kept */
	return pg_cur_fetch(cur, d > 0 ? S_GT : S_LT, &at, d);
}

/* SET_RANGE or SET_KEY to k among the rows the cursor holds, when they
 * tell: it stands on them, they ascend and nothing in their span changed
 * since they came (invariant 4), so any key from the first row to the last
 * is one of them. 1 when they told (*rc 0, or KV_ENOTFOUND for a SET_KEY
 * of a key not there); 0: fetch. A listing seeks to the entry it gave
 * last, then steps on: one fetch a batch of rows, not one an entry. */
static int pg_cur_seek_held(kv_ecur *cur, const kv_val *k, enum kv_cop op, int *rc)
{
	int lo = 0, hi;

	if (!cur->x || !cur->res || cur->row < 0 || cur->dir < 0 || cur->stale ||
	    cur->cur_stale || cur->holes)
		return 0;
	hi = cur->nrows - 1;
	if (row_cmp(cur, 0, k->data, k->size) > 0 || row_cmp(cur, hi, k->data, k->size) < 0)
		return 0;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (row_cmp(cur, mid, k->data, k->size) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*rc = 0;
	cur->row = lo;
	if (op == KV_SET_KEY && row_cmp(cur, lo, k->data, k->size)) {
		cur->row = -1;
		*rc = KV_ENOTFOUND;
	}
	return 1;
}

int pg_cur_get(kv_env *e, kv_ecur *cur, kv_val *k, kv_val *v, enum kv_cop op)
{
	kv_val at;
	int rc;

	(void)e;
	switch (op) {
	case KV_FIRST:
	case KV_LAST:
		cur->limit = PG_ROWS_FIRST;
		rc = op == KV_FIRST ? pg_cur_fetch(cur, S_FIRST, NULL, 1)
				    : pg_cur_fetch(cur, S_LAST, NULL, -1);
		break;
	case KV_SET_KEY:
	case KV_SET_RANGE:
		if (pg_cur_seek_held(cur, k, op, &rc))
			break;
		cur->limit = PG_ROWS_FIRST;
		at = *k;
		rc = pg_cur_fetch(cur, S_GE, &at, 1);
		if (!rc && op == KV_SET_KEY && row_cmp(cur, 0, at.data, at.size)) {
			cur->row = -1;
			rc = KV_ENOTFOUND;
		}
		break;
	case KV_NEXT:
	case KV_PREV:
		if (cur->row >= 0)
			rc = pg_cur_step(cur, op == KV_NEXT ? 1 : -1);
		else
			rc = pg_cur_get(e, cur, k, v, op == KV_NEXT ? KV_FIRST : KV_LAST);
		break;
	case KV_GET_CURRENT:
		if (cur->row < 0)
			return EINVAL;
		rc = 0;
		if (cur->stale || cur->cur_stale) {
			pg_val(cur->res, cur->row, 0, &at);
			rc = pg_cur_fetch(cur, S_GE, &at, 1);
			if (!rc && row_cmp(cur, 0, at.data, at.size)) {
				cur->row = -1;
				rc = KV_ENOTFOUND;
			}
		}
		break;
	default:
		return EINVAL;
	}
	if (rc)
		return rc;
	if (k)
		pg_val(cur->res, cur->row, 0, k);
	if (v)
		pg_val(cur->res, cur->row, 1, v);
	return 0;
}

int pg_cur_del(kv_env *e, kv_ecur *cur)
{
	kv_val at;
	int rc;

	(void)e;
	if (!cur->x || cur->row < 0)
		return EINVAL;
	if (cur->x->kind != PG_WRITE)
		return EACCES;
	pg_val(cur->res, cur->row, 0, &at);
	rc = pg_owed_key(cur->c, cur->x->depth, cur->db, at.data, at.size);
	if (!rc)
		rc = pg_send_stmt(cur->c, cur->x->depth, cur->db, S_DEL, &at, NULL, 0, 0);
	if (!rc) { /* its rows stay right: NEXT moves on from them */
		pg_touch(cur->c, cur->db, at.data, at.size);
		pg_cache_set(cur->c, cur->x->depth, cur->db, at.data, at.size, PC_NONE, NULL, 0,
			     0);
	}
	return rc;
}
