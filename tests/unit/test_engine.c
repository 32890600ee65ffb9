/*
 * test_engine.c - the engine contract (kv/engine.h) against a model, for
 * each engine of the table below: random sequences of put, NOOVERWRITE,
 * RESERVE, del and get in write transactions with children committed or
 * aborted, checked against an in-memory sorted map; cursors walking both
 * ways, seeking, deleting and moving on after writes ahead of them; read
 * snapshots that must not see later commits; keys that are prefixes of
 * others, empty values, 64 KiB values; values handed out that must stay as
 * they were until their transaction ends.
 *
 * PostgreSQL runs on the cluster whose URL KVFS_TEST_PG_URL holds (ctest
 * starts one with tests/pg/cluster.sh run); without it the engine is
 * skipped, and the test exits 77 when no engine ran. Each test gets a
 * store of its own (a schema, for PostgreSQL). KVFS_TEST_SEED changes the
 * random sequences.
 *
 * LMDB runs the same body on image files in a temporary directory: the
 * test uses the engine's calls alone, on a kv_env made by hand. Where
 * LMDB does less than the contract's words (a cursor past an end; values
 * of a write transaction after writes to other keys), the engine's row of
 * the table says so and those checks are left out for it. Give an
 * engine's name as the argument to run only it.
 *
 * Here: the random sequences, puts and reads, the env's calls, and main;
 * the cursors in test_engine_cursor.c, PostgreSQL's own in
 * test_engine_pg.c, what they share in engine_test.c.
 */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "engine_test.h"

/* ---------------------------------------------------- random sequences -- */

/* 1 to 4 bytes from a few that test the order: 0x00 sorts first, 0x80 and
 * 0xff after 0x7f (unsigned), and short keys are prefixes of longer. */
static size_t rnd_key(unsigned char *k)
{
	static const unsigned char alpha[] = {0x00, 0x01, 0x61, 0x7f, 0x80, 0xff};
	size_t n = 1 + rndn(3);

	for (size_t i = 0; i < n; i++)
		k[i] = alpha[rndn(sizeof(alpha))];
	return n;
}

static size_t rnd_val(unsigned char *v)
{
	unsigned r = rndn(40);
	size_t n = r < 6 ? 0 : r == 6 ? 65536 : 1 + rndn(300);

	for (size_t i = 0; i < n; i++)
		v[i] = (unsigned char)rnd();
	return n;
}

/* A value handed out, to check it stays as it was (contract 5). */
struct rec {
	int depth;
	enum kv_db db;
	unsigned char k[8];
	size_t kn;
	const void *p;
	size_t n;
	unsigned char *copy;
};

struct run {
	kv_env *e;
	kv_etxn *x[4];
	struct model m[4][2]; /* per level, per map */
	int depth;
	struct rcur {         /* per level: one cursor kept positioned */
		kv_ecur *c;
		int db;
		int pos;          /* 0: not positioned; 1: on k; 2: its place unspecified */
		int gone;         /* k deleted since (its NEXT is the key after) */
		int touched;      /* k written by a child level */
		unsigned char k[8];
		size_t kn;
	} cur[4];
	struct rec recs[512];
	int nrecs;
	unsigned char *vbuf;
};

static const enum kv_db run_db[2] = {KV_DB_INODE, KV_DB_DATA};

static void rec_add(struct run *r, enum kv_db db, const kv_val *k, const kv_val *v)
{
	struct rec *q;

	if (r->nrecs == (int)(sizeof(r->recs) / sizeof(r->recs[0])) || v->size > 4096)
		return;
	q = &r->recs[r->nrecs++];
	*q = (struct rec){.depth = r->depth, .db = db, .kn = k->size, .p = v->data, .n = v->size};
	memcpy(q->k, k->data, k->size);
	q->copy = malloc(v->size + 1);
	memcpy(q->copy, v->data, v->size);
}

/* Drop the records of a level that ended, or of a key written (k). */
static void rec_drop(struct run *r, int above, enum kv_db db, const void *k, size_t kn)
{
	int j = 0;

	for (int i = 0; i < r->nrecs; i++) {
		struct rec *q = &r->recs[i];

		if (q->depth > above || (k && q->db == db && !kcmp(q->k, q->kn, k, kn)))
			free(q->copy);
		else
			r->recs[j++] = *q;
	}
	r->nrecs = j;
}

static void rec_check(struct run *r)
{
	for (int i = 0; i < r->nrecs; i++)
		assert_memory_equal(r->recs[i].p, r->recs[i].copy, r->recs[i].n);
}

/* A write of key k of map i at the current level: the values handed out
 * for k go (all of them, where values_stay is 0), and the cursors on k
 * know. Where the contract does not say where a cursor stands (its
 * deleted key put again; its key written by a child that committed), it
 * is only positioned again. */
static void wrote(struct run *r, int i, const unsigned char *k, size_t kn, int del)
{
	if (the->values_stay)
		rec_drop(r, 4, run_db[i], k, kn);
	else
		rec_drop(r, -1, 0, NULL, 0);
	for (int d = 0; d <= r->depth; d++) {
		struct rcur *c = &r->cur[d];

		if (!c->c || c->pos != 1 || c->db != i || kcmp(c->k, c->kn, k, kn))
			continue;
		if (d < r->depth)
			c->touched = 1;
		else if (del)
			c->gone = 1;
		else if (c->gone)
			c->pos = 2;
	}
}

static void step_put(struct run *r, int i, unsigned flags)
{
	struct model *m = &r->m[r->depth][i];
	unsigned char k[8];
	kv_val kv = {rnd_key(k), k}, v = {rnd_val(r->vbuf), r->vbuf};
	int exact, rc;
	size_t at = m_seek(m, k, kv.size, &exact);

	rc = ENG->put(r->e, r->x[r->depth], run_db[i], &kv, &v, flags);
	if ((flags & KV_PUT_NOOVERWRITE) && exact) {
		assert_int_equal(rc, KV_EKEYEXIST);
		ent_is(&m->a[at], &kv, &v); /* the value there, in v */
		return;
	}
	assert_int_equal(rc, 0);
	if (flags & KV_PUT_RESERVE) { /* the caller writes the bytes now */
		for (size_t j = 0; j < v.size; j++)
			((unsigned char *)v.data)[j] = (unsigned char)rnd();
	}
	wrote(r, i, k, kv.size, 0);
	m_put(m, k, kv.size, v.data, v.size);
}

static void step_del_get(struct run *r, int i, int del)
{
	struct model *m = &r->m[r->depth][i];
	unsigned char k[8];
	kv_val kv = {rnd_key(k), k}, v;
	int exact, rc;
	size_t at = m_seek(m, k, kv.size, &exact);

	if (del) {
		rc = ENG->del(r->e, r->x[r->depth], run_db[i], &kv);
		assert_int_equal(rc, exact ? 0 : KV_ENOTFOUND);
		wrote(r, i, k, kv.size, 1);
		m_del(m, k, kv.size);
		return;
	}
	rc = ENG->get(r->e, r->x[r->depth], run_db[i], &kv, &v);
	assert_int_equal(rc, exact ? 0 : KV_ENOTFOUND);
	if (exact) {
		ent_is(&m->a[at], &kv, &v);
		rec_add(r, run_db[i], &kv, &v);
	}
}

/* The level's cursor: a move checked against the model. */
static void step_cursor(struct run *r)
{
	struct rcur *c = &r->cur[r->depth];
	kv_env *e = r->e;
	struct model *m;
	unsigned char sk[8];
	kv_val k = {rnd_key(sk), sk}, v, seek = k;
	int exact, op = (int)rndn(8), rc;
	size_t at = 0;
	long want;

	if (!c->c) {
		c->db = (int)rndn(2);
		assert_int_equal(ENG->cur_open(e, r->x[r->depth], run_db[c->db], &c->c), 0);
		c->pos = 0;
	}
	m = &r->m[r->depth][c->db];
	if (c->pos == 2 && (op == 1 || op == 2 || op >= 6))
		return; /* position it first */
	if (c->pos)
		at = m_seek(m, c->k, c->kn, &exact);
	switch (op) {
	case 0: /* FIRST, or NEXT unpositioned */
	case 1:
		rc = ENG->cur_get(e, c->c, &k, &v, op ? KV_NEXT : KV_FIRST);
		want = (op == 0 || !c->pos) ? 0 : (long)(exact ? at + 1 : at);
		if (op == 1 && c->pos && !exact)
			assert_true(c->gone); /* its key went: the next is the one after */
		break;
	case 2: /* PREV, while its key is there */
		if (!c->pos || c->gone)
			return;
		rc = ENG->cur_get(e, c->c, &k, &v, KV_PREV);
		want = (long)at - 1;
		break;
	case 3:
		rc = ENG->cur_get(e, c->c, &k, &v, KV_LAST);
		want = (long)m->n - 1;
		break;
	case 4: /* SET_RANGE */
		rc = ENG->cur_get(e, c->c, &k, &v, KV_SET_RANGE);
		want = (long)m_seek(m, seek.data, seek.size, &exact);
		break;
	case 5: /* SET_KEY */
		rc = ENG->cur_get(e, c->c, &k, &v, KV_SET_KEY);
		at = m_seek(m, seek.data, seek.size, &exact);
		want = exact ? (long)at : -1;
		break;
	case 6: /* GET_CURRENT: a value overwritten since shows */
		if (!c->pos || c->gone)
			return;
		rc = ENG->cur_get(e, c->c, &k, &v, KV_GET_CURRENT);
		want = (long)at;
		break;
	default: /* cur_del */
		if (!c->pos || c->gone)
			return;
		assert_int_equal(ENG->cur_del(e, c->c), 0);
		wrote(r, c->db, c->k, c->kn, 1);
		m_del(m, c->k, c->kn);
		return;
	}
	if (want < 0 || want >= (long)m->n) {
		assert_int_equal(rc, KV_ENOTFOUND);
		/* A failed seek may leave it anywhere (LMDB: where the key
		 * would be); past an end, contract 6 says unpositioned, but
		 * LMDB stays on the end key (cursor_moves checks the words):
		 * here it is only positioned again. */
		c->pos = 2;
		return;
	}
	assert_int_equal(rc, 0);
	ent_is(&m->a[want], &k, &v);
	rec_add(r, run_db[c->db], &k, &v);
	c->pos = 1;
	c->gone = 0;
	c->kn = k.size;
	memcpy(c->k, k.data, k.size);
}

static void level_close_cursor(struct run *r, int d)
{
	if (r->cur[d].c)
		ENG->cur_close(r->e, r->cur[d].c);
	r->cur[d] = (struct rcur){0};
}

static void step_child(struct run *r, int begin)
{
	int d = r->depth;

	if (begin) {
		if (d == 3)
			return;
		r->x[d + 1] = wbegin(r->e, r->x[d]);
		for (int i = 0; i < 2; i++)
			m_copy(&r->m[d + 1][i], &r->m[d][i]);
		r->depth++;
		return;
	}
	if (!d)
		return;
	level_close_cursor(r, d);
	rec_check(r);
	if (rndn(3)) {
		commit_ok(r->e, r->x[d]);
		for (int i = 0; i < 2; i++)
			m_copy(&r->m[d - 1][i], &r->m[d][i]);
		if (r->cur[d - 1].touched)
			r->cur[d - 1].pos = 2;
	} else {
		wabort(r->e, r->x[d]);
	}
	r->cur[d - 1].touched = 0;
	for (int i = 0; i < 2; i++)
		m_free(&r->m[d][i]);
	r->depth--;
	rec_drop(r, r->depth, 0, NULL, 0);
}

/* A prefetch (engine.h): changes nothing the model sees; the gets, puts
 * and dels of the key that follow answer as without it. */
static void step_prefetch(struct run *r, int i)
{
	unsigned char k[8];
	kv_val kv = {rnd_key(k), k};

	ENG->prefetch(r->e, r->x[r->depth], run_db[i], &kv);
}

static void step(struct run *r)
{
	unsigned op = rndn(108), i = rndn(2);
	uint64_t n;

	if (op >= 100)
		step_prefetch(r, (int)i);
	else if (op < 25)
		step_put(r, (int)i, 0);
	else if (op < 31)
		step_put(r, (int)i, KV_PUT_NOOVERWRITE);
	else if (op < 37)
		step_put(r, (int)i, KV_PUT_RESERVE);
	else if (op < 48)
		step_del_get(r, (int)i, 1);
	else if (op < 60)
		step_del_get(r, (int)i, 0);
	else if (op < 65)
		step_child(r, 1);
	else if (op < 70)
		step_child(r, 0);
	else if (op < 92)
		step_cursor(r);
	else if (op < 95) {
		assert_int_equal(ENG->count(r->e, r->x[r->depth], run_db[i], &n), 0);
		assert_int_equal(n, r->m[r->depth][i].n);
	} else if (op < 97) {
		walk_is(r->e, r->x[r->depth], run_db[i], &r->m[r->depth][i]);
	} else if (r->cur[r->depth].c) {
		ENG->cur_forget(r->e, r->cur[r->depth].c);
		rec_drop(r, r->depth - 1, 0, NULL, 0); /* its values may go */
	}
}

static void random_sequences(void **state)
{
	struct fix *f = *state;
	const char *s = getenv("KVFS_TEST_SEED");
	struct model committed[2] = {{0}};
	struct run r = {.e = f->e};
	kv_etxn *rx;

	rng_state = s ? strtoull(s, NULL, 0) : 0x5eed5eed;
	print_message("seed %#llx\n", (unsigned long long)rng_state);
	r.vbuf = malloc(65536);
	assert_non_null(r.vbuf);
	for (int round = 0; round < 40; round++) {
		int abort_top = rndn(8) == 0;

		r.x[0] = wbegin(f->e, NULL);
		for (int i = 0; i < 2; i++)
			m_copy(&r.m[0][i], &committed[i]);
		for (int n = 0; n < 40; n++)
			step(&r);
		while (r.depth)
			step_child(&r, 0);
		level_close_cursor(&r, 0);
		rec_check(&r);
		rec_drop(&r, -1, 0, NULL, 0);
		if (abort_top) {
			wabort(f->e, r.x[0]);
		} else {
			commit_ok(f->e, r.x[0]);
			for (int i = 0; i < 2; i++)
				m_copy(&committed[i], &r.m[0][i]);
		}
		for (int i = 0; i < 2; i++)
			m_free(&r.m[0][i]);
		rx = NULL;
		assert_int_equal(ENG->read_begin(f->e, &rx), 0);
		for (int i = 0; i < 2; i++)
			walk_is(f->e, rx, run_db[i], &committed[i]);
		ENG->read_free(f->e, rx);
	}
	for (int i = 0; i < 2; i++)
		m_free(&committed[i]);
	free(r.vbuf);
}

/* ---------------------------------------------------- puts and reads -- */

/* NOOVERWRITE and RESERVE; empty and 64 KiB values; a reserved value
 * written by the caller after put reaches the store before the next call
 * (contract 7), whichever call that is. */
/* A NOOVERWRITE put of k, then another: KV_EKEYEXIST, the first value in v. */
static void put_new_twice(kv_env *e, kv_etxn *x, enum kv_db db, kv_val k, const char *first)
{
	kv_val v = {strlen(first), (void *)first};

	assert_int_equal(ENG->put(e, x, db, &k, &v, KV_PUT_NOOVERWRITE), 0);
	v = K("second");
	assert_int_equal(ENG->put(e, x, db, &k, &v, KV_PUT_NOOVERWRITE), KV_EKEYEXIST);
	assert_int_equal(v.size, strlen(first));
	assert_memory_equal(v.data, first, v.size);
}

/* Prefetches (engine.h) among changes: whatever comes between a prefetch
 * and the get of its key (a put, a del, a reserve, a child that ends), the
 * get answers as it would without it. */
static void prefetch_writes(void **state)
{
	struct fix *f = *state;
	kv_env *e = f->e;
	kv_etxn *x, *child, *rx = NULL;
	kv_val k, v;

	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_INODE, K("a"), K("one"));
	put_ok(e, x, KV_DB_INODE, K("b"), K("one"));
	put_ok(e, x, KV_DB_INODE, K("c"), K("one"));
	commit_ok(e, x);
	x = wbegin(e, NULL);
	ENG->prefetch(e, x, KV_DB_INODE, &K("a"));
	ENG->prefetch(e, x, KV_DB_INODE, &K("a")); /* twice: one get */
	put_ok(e, x, KV_DB_INODE, K("a"), K("two"));
	get_is(e, x, KV_DB_INODE, K("z"), NULL); /* waits: the prefetch's result comes */
	get_is(e, x, KV_DB_INODE, K("a"), "two");
	ENG->prefetch(e, x, KV_DB_INODE, &K("b"));
	assert_int_equal(ENG->del(e, x, KV_DB_INODE, &K("b")), 0);
	get_is(e, x, KV_DB_INODE, K("b"), NULL);
	assert_int_equal(ENG->del(e, x, KV_DB_INODE, &K("b")), KV_ENOTFOUND);
	ENG->prefetch(e, x, KV_DB_INODE, &K("c"));
	k = K("c");
	v = (kv_val){3, NULL};
	assert_int_equal(ENG->put(e, x, KV_DB_INODE, &k, &v, KV_PUT_RESERVE), 0);
	memcpy(v.data, "res", 3);
	get_is(e, x, KV_DB_INODE, K("c"), "res");
	ENG->prefetch(e, x, KV_DB_INODE, &K("d"));
	put_new_twice(e, x, KV_DB_INODE, K("d"), "dee");
	/* a child's prefetch and changes, then its abort: the parent's own */
	child = wbegin(e, x);
	ENG->prefetch(e, child, KV_DB_INODE, &K("a"));
	ENG->prefetch(e, child, KV_DB_INODE, &K("e"));
	put_ok(e, child, KV_DB_INODE, K("a"), K("three"));
	put_ok(e, child, KV_DB_INODE, K("e"), K("child"));
	get_is(e, child, KV_DB_INODE, K("e"), "child");
	assert_int_equal(ENG->del(e, child, KV_DB_INODE, &K("d")), 0);
	wabort(e, child);
	get_is(e, x, KV_DB_INODE, K("a"), "two");
	get_is(e, x, KV_DB_INODE, K("e"), NULL);
	get_is(e, x, KV_DB_INODE, K("d"), "dee");
	/* a child that prefetched commits before the result is read */
	child = wbegin(e, x);
	ENG->prefetch(e, child, KV_DB_INODE, &K("f"));
	put_ok(e, child, KV_DB_INODE, K("g"), K("gee"));
	commit_ok(e, child);
	get_is(e, x, KV_DB_INODE, K("f"), NULL);
	get_is(e, x, KV_DB_INODE, K("g"), "gee");
	/* a prefetch the top level never reads: gone with it */
	ENG->prefetch(e, x, KV_DB_INODE, &K("h"));
	commit_ok(e, x);
	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_INODE, K("h"), K("aitch"));
	ENG->prefetch(e, x, KV_DB_INODE, &K("i"));
	wabort(e, x);
	assert_int_equal(ENG->read_begin(e, &rx), 0);
	ENG->prefetch(e, rx, KV_DB_INODE, &K("c"));
	get_is(e, rx, KV_DB_INODE, K("a"), "two");
	get_is(e, rx, KV_DB_INODE, K("b"), NULL);
	get_is(e, rx, KV_DB_INODE, K("c"), "res");
	get_is(e, rx, KV_DB_INODE, K("d"), "dee");
	get_is(e, rx, KV_DB_INODE, K("g"), "gee");
	get_is(e, rx, KV_DB_INODE, K("h"), NULL);
	ENG->read_free(e, rx);
}

static void put_flags(void **state)
{
	struct fix *f = *state;
	kv_env *e = f->e;
	unsigned char *big = malloc(65536);
	kv_val k, v;
	kv_etxn *x, *child;

	assert_non_null(big);
	for (int i = 0; i < 65536; i++)
		big[i] = (unsigned char)(i * 31 + 7);
	x = wbegin(e, NULL);
	k = K("a");
	put_new_twice(e, x, KV_DB_XATTR, k, "first");
	get_is(e, x, KV_DB_XATTR, k, "first");
	put_ok(e, x, KV_DB_XATTR, K("empty"), (kv_val){0, NULL});
	get_is(e, x, KV_DB_XATTR, K("empty"), "");

	/* reserve, then get */
	k = K("r1");
	v = (kv_val){65536, NULL};
	assert_int_equal(ENG->put(e, x, KV_DB_DATA, &k, &v, KV_PUT_RESERVE), 0);
	memcpy(v.data, big, 65536);
	assert_int_equal(ENG->get(e, x, KV_DB_DATA, &k, &v), 0);
	assert_int_equal(v.size, 65536);
	assert_memory_equal(v.data, big, 65536);
	/* reserve, then a child begins (the parent's put) and aborts */
	k = K("r2");
	v = (kv_val){3, NULL};
	assert_int_equal(ENG->put(e, x, KV_DB_DATA, &k, &v, KV_PUT_RESERVE), 0);
	memcpy(v.data, "two", 3);
	child = wbegin(e, x);
	k = K("r3");
	v = (kv_val){5, NULL};
	assert_int_equal(ENG->put(e, child, KV_DB_DATA, &k, &v, KV_PUT_RESERVE), 0);
	memcpy(v.data, "three", 5);
	wabort(e, child);
	get_is(e, x, KV_DB_DATA, K("r3"), NULL);
	/* reserve of nothing; reserve, then commit */
	k = K("r4");
	v = (kv_val){0, NULL};
	assert_int_equal(ENG->put(e, x, KV_DB_DATA, &k, &v, KV_PUT_RESERVE), 0);
	k = K("r5");
	v = (kv_val){4, NULL};
	assert_int_equal(ENG->put(e, x, KV_DB_DATA, &k, &v, KV_PUT_RESERVE), 0);
	memcpy(v.data, "five", 4);
	commit_ok(e, x);

	x = NULL;
	assert_int_equal(ENG->read_begin(e, &x), 0);
	get_is(e, x, KV_DB_DATA, K("r2"), "two");
	get_is(e, x, KV_DB_DATA, K("r3"), NULL);
	get_is(e, x, KV_DB_DATA, K("r4"), "");
	get_is(e, x, KV_DB_DATA, K("r5"), "five");
	get_is(e, x, KV_DB_XATTR, K("a"), "first");
	get_is(e, x, KV_DB_INODE, K("a"), NULL); /* maps are apart */
	k = K("r1");
	assert_int_equal(ENG->get(e, x, KV_DB_DATA, &k, &v), 0);
	assert_int_equal(v.size, 65536);
	assert_memory_equal(v.data, big, 65536);
	ENG->read_free(e, x);
	free(big);
}

/* A read transaction sees the state as of one commit from its first read
 * to its end (contract 3); read-only txn_begin too. */
static void read_snapshots(void **state)
{
	struct fix *f = *state;
	kv_env *e = f->e;
	kv_etxn *rx = NULL, *ro, *x;

	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_INODE, K("k"), K("one"));
	commit_ok(e, x);
	assert_int_equal(ENG->read_begin(e, &rx), 0);
	assert_int_equal(ENG->txn_begin(e, NULL, KV_TXN_RDONLY, &ro), 0);
	get_is(e, rx, KV_DB_INODE, K("k"), "one");
	get_is(e, ro, KV_DB_INODE, K("k"), "one");
	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_INODE, K("k"), K("two"));
	put_ok(e, x, KV_DB_INODE, K("k2"), K("two"));
	ENG->prefetch(e, rx, KV_DB_INODE, &K("k2")); /* its result read after the commit */
	get_is(e, rx, KV_DB_INODE, K("k"), "one"); /* not committed */
	commit_ok(e, x);
	get_is(e, rx, KV_DB_INODE, K("k"), "one"); /* committed after it began */
	get_is(e, rx, KV_DB_INODE, K("k2"), NULL);
	get_is(e, ro, KV_DB_INODE, K("k2"), NULL);
	ENG->read_end(e, rx);
	ENG->txn_abort(e, ro);
	assert_int_equal(ENG->read_begin(e, &rx), 0);
	get_is(e, rx, KV_DB_INODE, K("k"), "two");
	get_is(e, rx, KV_DB_INODE, K("k2"), "two");
	ENG->read_end(e, rx);
	/* a transaction aborted leaves nothing */
	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_INODE, K("k3"), K("three"));
	wabort(e, x);
	assert_int_equal(ENG->read_begin(e, &rx), 0);
	get_is(e, rx, KV_DB_INODE, K("k3"), NULL);
	ENG->read_free(e, rx);
}

/* Readers on threads of their own while the writer commits: a snapshot
 * never shows one commit's two keys apart. */
struct reader_arg {
	kv_env *e;
	int stop, reads;
};

static void *reader(void *p)
{
	struct reader_arg *a = p;
	kv_etxn *rx = NULL;

	while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
		kv_val k1 = K("a"), k2 = K("b"), v1, v2;

		if (ENG->read_begin(a->e, &rx))
			break;
		if (a->reads & 1) { /* the snapshot then taken with the prefetch */
			ENG->prefetch(a->e, rx, KV_DB_INODE, &k2);
			ENG->prefetch(a->e, rx, KV_DB_INODE, &k1);
		}
		if (ENG->get(a->e, rx, KV_DB_INODE, &k1, &v1) ||
		    ENG->get(a->e, rx, KV_DB_INODE, &k2, &v2) || v1.size != v2.size ||
		    memcmp(v1.data, v2.data, v1.size))
			break;
		ENG->read_end(a->e, rx);
		a->reads++;
	}
	ENG->read_free(a->e, rx);
	return NULL;
}

static void read_threads(void **state)
{
	struct fix *f = *state;
	kv_env *e = f->e;
	struct reader_arg a[3];
	pthread_t t[3];
	kv_etxn *x;

	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_INODE, K("a"), K("0"));
	put_ok(e, x, KV_DB_INODE, K("b"), K("0"));
	commit_ok(e, x);
	for (int i = 0; i < 3; i++) {
		a[i] = (struct reader_arg){.e = e};
		assert_int_equal(pthread_create(&t[i], NULL, reader, &a[i]), 0);
	}
	for (int n = 1; n <= 200; n++) {
		char v[16];
		kv_val val = {(size_t)snprintf(v, sizeof(v), "%d", n), v};

		x = wbegin(e, NULL);
		put_ok(e, x, KV_DB_INODE, K("a"), val);
		put_ok(e, x, KV_DB_INODE, K("b"), val);
		commit_ok(e, x);
	}
	for (int i = 0; i < 3; i++) {
		__atomic_store_n(&a[i].stop, 1, __ATOMIC_RELEASE);
		assert_int_equal(pthread_join(t[i], NULL), 0);
	}
	for (int i = 0; i < 3; i++) /* each ran until stopped, never saw a torn pair */
		assert_true(a[i].reads > 0 && a[i].stop == 1);
	for (int i = 0; i < 3; i++)
		print_message("reader %d: %d snapshots\n", i, a[i].reads);
}

/* ------------------------------------------------------- env and errors -- */

/* create's init: a record, then success or a failure. */
static int init_record(kv_env *e, kv_etxn *x, void *arg)
{
	kv_val k = K("init"), v = K("I");
	int rc = ENG->put(e, x, KV_DB_META, &k, &v, 0);

	if (rc)
		return -EIO;
	return arg ? -ENOSPC : 0;
}

/* create refuses a store that is there, makes one with init's records or
 * nothing; open refuses a place that holds none; a store reopened holds
 * what was committed; read-only opens take no write transaction. */
static void create_open(void **state)
{
	struct fix *f = *state;
	kv_env *e = f->e, *e2;
	char err[512] = "", empty[512];
	kv_etxn *x;

	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_META, K("super"), K("S"));
	commit_ok(e, x);
	e2 = env_new(f->where, 0, KV_DURABLE_NORMAL);
	assert_int_equal(ENG->create(e2, 0, no_init, NULL, err, sizeof(err)), -EEXIST);
	if (ENG == &kv_engine_pg)
		assert_non_null(strstr(err, "already holds"));
	assert_null(e2->eng_priv);
	env_free(e2);

	ENG->close(e);
	e->eng_priv = NULL;
	e->readonly = 1;
	assert_int_equal(ENG->open(e, err, sizeof(err)), 0);
	assert_true(e->page_size >= 512);
	assert_int_equal(ENG->txn_begin(e, NULL, 0, &x), EACCES);
	assert_int_equal(ENG->txn_begin(e, NULL, KV_TXN_RDONLY, &x), 0);
	get_is(e, x, KV_DB_META, K("super"), "S");
	wabort(e, x);

	assert_int_equal(the->where("empty_place", empty, sizeof(empty)), 0);
	e2 = env_new(empty, 0, KV_DURABLE_NORMAL);
	err[0] = 0;
	if (ENG == &kv_engine_pg) {
		assert_int_equal(ENG->open(e2, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "holds no kvfs filesystem"));
	} else {
		assert_true(ENG->open(e2, err, sizeof(err)) < 0);
	}
	assert_null(e2->eng_priv);
	/* an init that fails makes nothing: no store, or the one there stays */
	assert_true(ENG->create(e2, 0, init_record, "fail", err, sizeof(err)) < 0);
	assert_true(ENG->open(e2, err, sizeof(err)) < 0);
	env_free(e2);
	/* with force, what was there may be gone (LMDB removes it first), but
	 * nothing of the failed store is made */
	e2 = env_new(f->where, 0, KV_DURABLE_NORMAL);
	assert_true(ENG->create(e2, 1, init_record, "fail", err, sizeof(err)) < 0);
	if (ENG->open(e2, err, sizeof(err)) == 0) {
		x = NULL;
		assert_int_equal(ENG->read_begin(e2, &x), 0);
		get_is(e2, x, KV_DB_META, K("super"), "S");
		get_is(e2, x, KV_DB_META, K("init"), NULL);
		ENG->read_free(e2, x);
		ENG->close(e2);
	}
	/* force replaces a store: init's records, nothing of the old */
	e2->eng_priv = NULL;
	e2->readonly = 0;
	assert_int_equal(ENG->create(e2, 1, init_record, NULL, err, sizeof(err)), 0);
	assert_null(e2->eng_priv); /* created closed */
	assert_int_equal(ENG->open(e2, err, sizeof(err)), 0);
	x = NULL;
	assert_int_equal(ENG->read_begin(e2, &x), 0);
	get_is(e2, x, KV_DB_META, K("super"), NULL);
	get_is(e2, x, KV_DB_META, K("init"), "I");
	ENG->read_free(e2, x);
	env_free(e2);
}

/* usage, sync, backup, strerror. */
static void env_calls(void **state)
{
	struct fix *f = *state;
	kv_env *e = f->e;
	struct kv_usage u;
	char err[256] = "";
	kv_etxn *x = wbegin(e, NULL);
	/* contract 9: an image file's upkeep whole, or none of it */
	int hooks = !!ENG->room_update + !!ENG->room_check + !!ENG->room_over +
		    !!ENG->room_avail + !!ENG->room_promise + !!ENG->room_window +
		    !!ENG->map_grow + !!ENG->flusher_start + !!ENG->flusher_kick +
		    !!ENG->flusher_stop + !!ENG->room_close;
	int rc;

	assert_true(hooks == 0 || hooks == 11);
	put_ok(e, x, KV_DB_DATA, K("k"), K("v"));
	commit_ok(e, x);
	memset(&u, 0xff, sizeof(u));
	assert_int_equal(ENG->usage(e, &u), 0);
	assert_true(u.used_bytes > 0 && u.used_bytes < (1ULL << 40));
	assert_int_equal(u.page_size, e->page_size);
	assert_int_equal(ENG->sync(e), 0);
	rc = ENG->backup(e, "/nonexistent/copy", err, sizeof(err));
	if (!ENG->room_update) { /* a database's own tools make its copies */
		assert_int_equal(rc, -EOPNOTSUPP);
		assert_non_null(strstr(err, "pg_dump"));
	}
	/* its codes' words: one table's, whatever the engine (err.c) */
	assert_string_equal(kv_strerror(EIO), strerror(EIO));
	assert_string_equal(kv_strerror(KV_ENOTFOUND), "no such key");
	assert_true(strcmp(kv_strerror(KV_EKEYEXIST), kv_strerror(KV_ENOTFOUND)));
	/* a code of the engine's own: its words (LMDB's MDB_CORRUPTED) */
	assert_true(!ENG->strerror || strstr(ENG->strerror(-30796), "MDB_CORRUPTED"));
}

/* With durability none, commits are durable after sync. */
static void durability_none(void **state)
{
	struct fix *f = *state;
	kv_env *e;
	char err[256];
	kv_etxn *x;

	ENG->close(f->e); /* one read-write open at a time */
	f->e->eng_priv = NULL;
	e = env_new(f->where, 0, KV_DURABLE_NONE);
	assert_int_equal(ENG->open(e, err, sizeof(err)), 0);
	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_INODE, K("k"), K("v"));
	commit_ok(e, x);
	assert_int_equal(ENG->sync(e), 0);
	env_free(e);
}

/* ---------------------------------------------------------------- main -- */

int main(int argc, char **argv)
{
	const struct CMUnitTest all[] = {
		cmocka_unit_test_setup_teardown(random_sequences, setup, teardown),
		cmocka_unit_test_setup_teardown(cursor_moves, setup, teardown),
		cmocka_unit_test_setup_teardown(cursor_sees_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(cursor_del, setup, teardown),
		cmocka_unit_test_setup_teardown(cursor_seeks, setup, teardown),
		cmocka_unit_test_setup_teardown(cursor_long_walk, setup, teardown),
		cmocka_unit_test_setup_teardown(cursor_renew, setup, teardown),
		cmocka_unit_test_setup_teardown(put_flags, setup, teardown),
		cmocka_unit_test_setup_teardown(prefetch_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(read_snapshots, setup, teardown),
		cmocka_unit_test_setup_teardown(read_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(create_open, setup, teardown),
		cmocka_unit_test_setup_teardown(env_calls, setup, teardown),
		cmocka_unit_test_setup_teardown(durability_none, setup, teardown),
	};
	const struct CMUnitTest pg_only[] = {
		cmocka_unit_test_setup_teardown(pg_lost_connection, setup, teardown),
		cmocka_unit_test_setup_teardown(pg_fatal_alone, setup, teardown),
		cmocka_unit_test_setup_teardown(pg_fatal_in_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(pg_child_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(pg_guesses, setup, teardown),
		cmocka_unit_test_setup_teardown(pg_stopped_server, setup, teardown),
		cmocka_unit_test(pg_messages),
	};
	int failed = 0, ran = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char probe[512];

		if (argc > 1 && strcmp(argv[1], cases[i].name))
			continue;
		the = &cases[i];
		if (the->where("probe", probe, sizeof(probe))) {
			print_message("%s: skipped (no store to test on)\n", the->name);
			continue;
		}
		ran++;
		failed += _cmocka_run_group_tests(the->name, all, sizeof(all) / sizeof(all[0]),
						  NULL, NULL);
		if (the->eng == &kv_engine_pg)
			failed += _cmocka_run_group_tests("postgresql_only", pg_only,
							  sizeof(pg_only) / sizeof(pg_only[0]),
							  NULL, NULL);
	}
	lmdb_cleanup();
	return ran ? failed != 0 : 77;
}
