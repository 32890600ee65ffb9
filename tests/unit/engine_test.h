/*
 * engine_test.h - shared by the engine contract's tests (test_engine.c and
 * the files it runs: test_engine_cursor.c, test_engine_pg.c), defined in
 * engine_test.c. Include after cmocka.h.
 */
#ifndef KVFS_ENGINE_TEST_H
#define KVFS_ENGINE_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "kv_int.h"

/* ------------------------------------------------------------- engines -- */

struct eng_case {
	const char *name;
	const struct kv_engine *eng;
	/* Where a new, empty store named tag goes: 0, or -1 (engine skipped). */
	int (*where)(const char *tag, char *buf, size_t n);
	/* End every server connection to the test's stores, as a restart
	 * would (NULL: the engine has none). */
	void (*kill)(void);
	/* A cursor that went past an end is unpositioned, as contract 6
	 * says. LMDB's stays on the end key (NEXT again: KV_ENOTFOUND; PREV:
	 * the key before): 0, and those moves are not checked. */
	int ends_unposition;
	/* A write transaction's values stay as they were when other keys
	 * are written (contract 5's words). LMDB moves the values of a page
	 * at any write to it: 0, and they are checked up to the next write. */
	int values_stay;
};

extern const struct eng_case cases[2]; /* LMDB, PostgreSQL */
extern const struct eng_case *the;     /* the engine under test */
#define ENG (the->eng)

/* KVFS_TEST_PG_URL, or NULL. */
const char *pg_url(void);
/* A SQL statement on a connection of the test's own: the first column of
 * its first row as a number (0 without). */
long pg_admin(const char *sql);
/* The image files' directory removed (at exit). */
void lmdb_cleanup(void);

/* ------------------------------------------------------------- helpers -- */

#define K(s) ((kv_val){sizeof(s) - 1, (void *)(s)})

struct fix {
	char where[512];
	kv_env *e;
};

/* The top-level write transaction open, if any: a test that fails leaves
 * it to teardown, which aborts it before the store closes (LMDB's writer
 * mutex lives in the lock file's map). */
struct open_top {
	kv_env *e;
	kv_etxn *x;
};
extern struct open_top open_top;

kv_env *env_new(const char *where, int readonly, enum kv_durability d);
void env_free(kv_env *e);
/* create's first records: none (the tests write their own). */
int no_init(kv_env *e, kv_etxn *x, void *arg);
/* A store made at e->path, opened in e: 0 or create's or open's code. */
int make(kv_env *e, int force, char *err, size_t errlen);
/* cmocka's: an open store of the test's own, made new (struct fix). */
int setup(void **state);
int teardown(void **state);

void put_ok(kv_env *e, kv_etxn *x, enum kv_db db, kv_val k, kv_val v);
/* Key k of db holds want (NULL: KV_ENOTFOUND). */
void get_is(kv_env *e, kv_etxn *x, enum kv_db db, kv_val k, const char *want);
/* A write transaction begun (a top level's kept in open_top). */
kv_etxn *wbegin(kv_env *e, kv_etxn *parent);
/* x's end: not to be aborted again. */
void ended(kv_etxn *x);
int wcommit(kv_env *e, kv_etxn *x);
void wabort(kv_env *e, kv_etxn *x);
void commit_ok(kv_env *e, kv_etxn *x);
/* The cursor's key after op is want (NULL: KV_ENOTFOUND). */
void cur_is(kv_env *e, kv_ecur *c, enum kv_cop op, kv_val *seek, const kv_val *want);

/* --------------------------------------------------------------- model -- */

/* A sorted map of short keys, what a store must hold. */
struct ment {
	unsigned char k[8];
	size_t kn;
	unsigned char *v;
	size_t vn;
};

struct model {
	struct ment *a;
	size_t n, cap;
};

int kcmp(const void *a, size_t an, const void *b, size_t bn);
size_t m_seek(const struct model *m, const void *k, size_t kn, int *exact);
void m_put(struct model *m, const void *k, size_t kn, const void *v, size_t vn);
int m_del(struct model *m, const void *k, size_t kn);
void m_free(struct model *m);
void m_copy(struct model *dst, const struct model *src);
void ent_is(const struct ment *m, const kv_val *k, const kv_val *v);
/* A walk of db in x finds what m holds, in order. */
void walk_is(kv_env *e, kv_etxn *x, enum kv_db db, const struct model *m);

/* -------------------------------------------------------------- random -- */

extern uint64_t rng_state;
uint64_t rnd(void);
unsigned rndn(unsigned n);

/* ----------------------------------------------------------- the tests -- */

/* test_engine_cursor.c */
void cursor_moves(void **state);
void cursor_sees_writes(void **state);
void cursor_seeks(void **state);
void cursor_del(void **state);
void cursor_long_walk(void **state);
void cursor_renew(void **state);

/* test_engine_pg.c */
void pg_lost_connection(void **state);
void pg_fatal_alone(void **state);
void pg_fatal_in_flight(void **state);
void pg_child_failure(void **state);
void pg_guesses(void **state);
void pg_stopped_server(void **state);
void pg_messages(void **state);

#endif
