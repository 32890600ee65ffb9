/*
 * engine_test.c - what the engine contract's tests (test_engine.c,
 * test_engine_cursor.c, test_engine_pg.c) share: the engines under test
 * and where their stores go, a store of each test's own, the calls that
 * assert as they go, the sorted map the stores are checked against, and
 * the random numbers. engine_test.h says what each is.
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
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "engine_test.h"

/* ------------------------------------------------------------- engines -- */

const char *pg_url(void)
{
	const char *u = getenv("KVFS_TEST_PG_URL");

	return u && *u ? u : NULL;
}

static void quiet(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

/* A SQL statement on a connection of the test's own: the first column of
 * its first row as a number (0 without). */
long pg_admin(const char *sql)
{
	PGconn *c = PQconnectdb(pg_url());
	PGresult *r;
	long n = 0;

	if (PQstatus(c) != CONNECTION_OK)
		fail_msg("admin connection: %s", PQerrorMessage(c));
	PQsetNoticeProcessor(c, quiet, NULL);
	r = PQexec(c, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
		fail_msg("%s: %s", sql, PQresultErrorMessage(r));
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r))
		n = strtol(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	PQfinish(c);
	return n;
}

/* A schema of its own, empty: the URL names it in search_path. */
int pg_where(const char *tag, char *buf, size_t n)
{
	char sql[256];

	if (!pg_url())
		return -1;
	snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS t_%s CASCADE; CREATE SCHEMA t_%s", tag,
		 tag);
	pg_admin(sql);
	snprintf(buf, n, "%s%coptions=-csearch_path%%3Dt_%s", pg_url(),
		 strchr(pg_url(), '?') ? '&' : '?', tag);
	return 0;
}

/* pg_terminate_backend only signals: wait until pg_stat_activity lists them
 * no more. Each has sent its FATAL by then, but a backend leaves that list
 * before its process exits and its socket closes: the end of the stream
 * may come later (pg_fatal_alone makes it never come). */
void pg_kill(void)
{
	pg_admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
		 "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' "
		 "AND application_name = 'kvfs'");
	for (int i = 0; i < 500; i++) {
		if (!pg_admin("SELECT count(*) FROM pg_stat_activity "
			      "WHERE backend_type = 'client backend' AND application_name = 'kvfs'"))
			return;
		usleep(10000);
	}
	fail_msg("the server's backends did not end");
}

/* An image file in a directory of the run's own (removed at exit). */
static char lmdb_dir[32];

int lmdb_where(const char *tag, char *buf, size_t n)
{
	if (!lmdb_dir[0] && !mkdtemp(strcpy(lmdb_dir, "/tmp/kvfs-engine.XXXXXX")))
		return -1;
	snprintf(buf, n, "%s/%s", lmdb_dir, tag);
	unlink(buf);
	return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void lmdb_cleanup(void)
{
	if (lmdb_dir[0])
		nftw(lmdb_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

const struct eng_case cases[] = {
	{"lmdb", &kv_engine_lmdb, lmdb_where, NULL, 0, 0},
	{"postgresql", &kv_engine_pg, pg_where, pg_kill, 1, 1},
};

const struct eng_case *the;

/* ------------------------------------------------------------- helpers -- */

struct open_top open_top;

kv_env *env_new(const char *where, int readonly, enum kv_durability d)
{
	kv_env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	e->eng = ENG;
	e->path = strdup(where);
	e->readonly = readonly;
	e->durability = d;
	e->mount = 1; /* PostgreSQL: several read-write opens at once, as mounts */
	e->lock_fd = -1;
	/* what LMDB's engine takes from the record layer's kv_open */
	pthread_rwlock_init(&e->map_lock, NULL);
	assert_int_equal(pthread_key_create(&e->readers.key, NULL), 0);
	return e;
}

void env_free(kv_env *e)
{
	if (!e)
		return;
	if (e->eng_priv)
		ENG->close(e);
	pthread_key_delete(e->readers.key);
	pthread_rwlock_destroy(&e->map_lock);
	free(e->path);
	free(e);
}

/* create's first records: none (the tests write their own). */
int no_init(kv_env *e, kv_etxn *x, void *arg)
{
	(void)e;
	(void)x;
	(void)arg;
	return 0;
}

/* A store made at e->path, opened in e: 0 or create's or open's code. */
int make(kv_env *e, int force, char *err, size_t errlen)
{
	int rc = ENG->create(e, force, no_init, NULL, err, errlen);

	return rc ? rc : ENG->open(e, err, errlen);
}

/* An open store of the test's own, made new. */
int setup(void **state)
{
	const char *test = getenv("KVFS_TEST_TAG");
	static unsigned n;
	struct fix *f = calloc(1, sizeof(*f));
	char tag[64], err[512] = "";

	snprintf(tag, sizeof(tag), "%s_%u", test ? test : "t", n++);
	if (!f || the->where(tag, f->where, sizeof(f->where)))
		return -1;
	f->e = env_new(f->where, 0, KV_DURABLE_NORMAL);
	if (make(f->e, 0, err, sizeof(err))) {
		print_error("create: %s\n", err);
		return -1;
	}
	*state = f;
	return 0;
}

int teardown(void **state)
{
	struct fix *f = *state;

	if (open_top.x)
		ENG->txn_abort(open_top.e, open_top.x);
	open_top.x = NULL;
	env_free(f->e);
	free(f);
	return 0;
}

void put_ok(kv_env *e, kv_etxn *x, enum kv_db db, kv_val k, kv_val v)
{
	assert_int_equal(ENG->put(e, x, db, &k, &v, 0), 0);
}

void get_is(kv_env *e, kv_etxn *x, enum kv_db db, kv_val k, const char *want)
{
	kv_val v;
	int rc = ENG->get(e, x, db, &k, &v);

	if (!want) {
		assert_int_equal(rc, KV_ENOTFOUND);
		return;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(v.size, strlen(want));
	assert_memory_equal(v.data, want, v.size);
}

kv_etxn *wbegin(kv_env *e, kv_etxn *parent)
{
	kv_etxn *x;

	assert_int_equal(ENG->txn_begin(e, parent, 0, &x), 0);
	if (!parent) {
		open_top.e = e;
		open_top.x = x;
	}
	return x;
}

/* x's end: not to be aborted again. */
void ended(kv_etxn *x)
{
	if (x == open_top.x)
		open_top.x = NULL;
}

int wcommit(kv_env *e, kv_etxn *x)
{
	ended(x);
	return ENG->txn_commit(e, x);
}

void wabort(kv_env *e, kv_etxn *x)
{
	ended(x);
	ENG->txn_abort(e, x);
}

void commit_ok(kv_env *e, kv_etxn *x)
{
	assert_int_equal(wcommit(e, x), 0);
}

/* The cursor's key is want (NULL: KV_ENOTFOUND). */
void cur_is(kv_env *e, kv_ecur *c, enum kv_cop op, kv_val *seek, const kv_val *want)
{
	kv_val k = seek ? *seek : (kv_val){0, NULL}, v;
	int rc = ENG->cur_get(e, c, &k, &v, op);

	if (!want) {
		assert_int_equal(rc, KV_ENOTFOUND);
		return;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(k.size, want->size);
	assert_memory_equal(k.data, want->data, k.size);
}

/* --------------------------------------------------------------- model -- */

int kcmp(const void *a, size_t an, const void *b, size_t bn)
{
	size_t n = an < bn ? an : bn;
	int d = n ? memcmp(a, b, n) : 0;

	return d ? d : (an > bn) - (an < bn);
}

/* The first entry at or after k (exact: whether it is k). */
size_t m_seek(const struct model *m, const void *k, size_t kn, int *exact)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (kcmp(m->a[mid].k, m->a[mid].kn, k, kn) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*exact = lo < m->n && !kcmp(m->a[lo].k, m->a[lo].kn, k, kn);
	return lo;
}

void m_put(struct model *m, const void *k, size_t kn, const void *v, size_t vn)
{
	int exact;
	size_t i = m_seek(m, k, kn, &exact);

	if (!exact) {
		if (m->n == m->cap) {
			m->cap = m->cap ? 2 * m->cap : 64;
			m->a = realloc(m->a, m->cap * sizeof(*m->a));
			assert_non_null(m->a);
		}
		memmove(m->a + i + 1, m->a + i, (m->n - i) * sizeof(*m->a));
		m->n++;
		m->a[i] = (struct ment){.kn = kn};
		memcpy(m->a[i].k, k, kn);
	} else {
		free(m->a[i].v);
	}
	m->a[i].v = malloc(vn ? vn : 1);
	assert_non_null(m->a[i].v);
	if (vn)
		memcpy(m->a[i].v, v, vn);
	m->a[i].vn = vn;
}

int m_del(struct model *m, const void *k, size_t kn)
{
	int exact;
	size_t i = m_seek(m, k, kn, &exact);

	if (!exact)
		return 0;
	free(m->a[i].v);
	memmove(m->a + i, m->a + i + 1, (m->n - i - 1) * sizeof(*m->a));
	m->n--;
	return 1;
}

void m_free(struct model *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->a[i].v);
	free(m->a);
	*m = (struct model){0};
}

void m_copy(struct model *dst, const struct model *src)
{
	m_free(dst);
	for (size_t i = 0; i < src->n; i++)
		m_put(dst, src->a[i].k, src->a[i].kn, src->a[i].v, src->a[i].vn);
}

void ent_is(const struct ment *m, const kv_val *k, const kv_val *v)
{
	assert_int_equal(k->size, m->kn);
	assert_memory_equal(k->data, m->k, m->kn);
	assert_int_equal(v->size, m->vn);
	if (v->size)
		assert_memory_equal(v->data, m->v, v->size);
}

/* Walk db both ways in x: exactly m's entries, in order. */
void walk_is(kv_env *e, kv_etxn *x, enum kv_db db, const struct model *m)
{
	kv_ecur *c;
	kv_val k, v;
	size_t i;

	assert_int_equal(ENG->cur_open(e, x, db, &c), 0);
	for (i = 0; i < m->n; i++) {
		assert_int_equal(ENG->cur_get(e, c, &k, &v, i ? KV_NEXT : KV_FIRST), 0);
		ent_is(&m->a[i], &k, &v);
		if (i % 97 == 96)
			ENG->cur_forget(e, c); /* a whole-map walk's habit */
	}
	assert_int_equal(ENG->cur_get(e, c, &k, &v, m->n ? KV_NEXT : KV_FIRST), KV_ENOTFOUND);
	for (i = m->n; i-- > 0;) {
		assert_int_equal(ENG->cur_get(e, c, &k, &v, i == m->n - 1 ? KV_LAST : KV_PREV), 0);
		ent_is(&m->a[i], &k, &v);
	}
	assert_int_equal(ENG->cur_get(e, c, &k, &v, m->n ? KV_PREV : KV_LAST), KV_ENOTFOUND);
	ENG->cur_close(e, c);
}

/* -------------------------------------------------------------- random -- */

uint64_t rng_state;

uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

unsigned rndn(unsigned n)
{
	return (unsigned)(rnd() % n);
}
