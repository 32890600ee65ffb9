/*
 * test_engine_pg.c - what the PostgreSQL engine does beyond the contract
 * (kv/pg/pg.c), run by test_engine.c after the contract's tests on it: a
 * server that ends every connection, a child whose statement fails on the
 * server, reads guessed and checked (kv/pg/pg_guess.c), a stopped server, and
 * its messages.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "engine_test.h"

/* ------------------------------------------------------ PostgreSQL only -- */

/* The server ends every connection (as a restart does): calls in flight
 * fail with EIO, the next begin connects again and all works. */
void pg_lost_connection(void **state)
{
	struct fix *f = *state;
	kv_env *e = f->e;
	kv_etxn *rx = NULL, *x;
	kv_val k = K("k"), v;

	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_INODE, k, K("v"));
	commit_ok(e, x);
	assert_int_equal(ENG->read_begin(e, &rx), 0);
	get_is(e, rx, KV_DB_INODE, k, "v");
	x = wbegin(e, NULL);
	get_is(e, x, KV_DB_INODE, k, "v");
	the->kill();
	/* a key neither has read: the server is asked (one read before may be
	 * answered from what the transaction knows, pg_cache.c) */
	assert_int_equal(ENG->get(e, rx, KV_DB_INODE, &K("other"), &v), EIO);
	assert_int_equal(ENG->get(e, x, KV_DB_INODE, &K("other"), &v), EIO);
	assert_int_equal(wcommit(e, x), EIO);
	ENG->read_end(e, rx);
	/* the next begin resets: first the lost one, then one idle meanwhile */
	assert_int_equal(ENG->read_begin(e, &rx), 0);
	get_is(e, rx, KV_DB_INODE, k, "v");
	ENG->read_end(e, rx);
	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_INODE, k, K("w"));
	commit_ok(e, x);
	the->kill();
	assert_int_equal(ENG->read_begin(e, &rx), 0);
	get_is(e, rx, KV_DB_INODE, k, "w");
	ENG->read_free(e, rx);
	x = wbegin(e, NULL);
	get_is(e, x, KV_DB_INODE, k, "w");
	commit_ok(e, x);
}

/* A failed statement fails its level only: a child's is dropped with the
 * child, the parent carries on. */
void pg_child_failure(void **state)
{
	struct fix *f = *state;
	kv_env *e = f->e;
	kv_etxn *x, *child;
	kv_val k, v, big;
	uint64_t n;

	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_INODE, K("parent"), K("p"));
	child = wbegin(e, x);
	/* a key past the index's limit fails on the server (sent without
	 * waiting: its commit reads the result) */
	big.size = 8000;
	big.data = malloc(big.size);
	rng_state = 0x5eed;
	for (size_t i = 0; i < big.size; i++) /* not to be compressed below the limit */
		((unsigned char *)big.data)[i] = (unsigned char)rnd();
	k = big;
	assert_int_equal(ENG->put(e, child, KV_DB_INODE, &k, &K("v"), 0), 0);
	assert_int_equal(wcommit(e, child), EIO);
	get_is(e, x, KV_DB_INODE, K("parent"), "p");
	child = wbegin(e, x);
	k = big;
	assert_int_equal(ENG->put(e, child, KV_DB_INODE, &k, &K("v"), 0), 0);
	k = K("after");
	assert_int_equal(ENG->get(e, child, KV_DB_INODE, &k, &v), EIO);
	assert_int_equal(ENG->get(e, child, KV_DB_INODE, &k, &v), EIO); /* it takes abort only */
	wabort(e, child);
	/* a statement first prepared after a failure in the same pipeline
	 * segment is skipped with it: prepared again at its next use */
	child = wbegin(e, x);
	k = big;
	assert_int_equal(ENG->put(e, child, KV_DB_INODE, &k, &K("v"), 0), 0);
	assert_int_equal(ENG->count(e, child, KV_DB_INODE, &n), EIO);
	wabort(e, child);
	assert_int_equal(ENG->count(e, x, KV_DB_INODE, &n), 0);
	assert_int_equal(n, 1);
	put_ok(e, x, KV_DB_INODE, K("parent2"), K("q"));
	commit_ok(e, x);
	x = NULL;
	assert_int_equal(ENG->read_begin(e, &x), 0);
	get_is(e, x, KV_DB_INODE, K("parent"), "p");
	get_is(e, x, KV_DB_INODE, K("parent2"), "q");
	ENG->read_free(e, x);
	free(big.data);
}

/* A write transaction that may guess (KV_TXN_GUESS). */
static kv_etxn *gbegin(kv_env *e)
{
	kv_etxn *x;

	assert_int_equal(ENG->txn_begin(e, NULL, KV_TXN_GUESS, &x), 0);
	open_top.e = e;
	open_top.x = x;
	return x;
}

/* Another writer's change of the test's store, behind the env's back. */
static void behind(const struct fix *f, const char *fmt, const char *a, const char *b)
{
	const char *schema = strstr(f->where, "%3D") + 3;
	char sql[512], stmt[256];

	snprintf(stmt, sizeof(stmt), fmt, a, b);
	snprintf(sql, sizeof(sql), "SET search_path = %s; %s", schema, stmt);
	pg_admin(sql);
}

/* kv/pg/pg_guess.c: a transaction that may guess answers reads from what the
 * env's last commits and its readers found, without the server; a guess
 * another writer made wrong fails the commit (KV_EGUESS), with nothing of
 * the transaction done, whichever way it was relied on (a read alone, a
 * put over it, a put where it said nothing was, a del); the next try reads
 * the server. */
void pg_guesses(void **state)
{
	struct fix *f = *state;
	kv_env *e = f->e;
	kv_etxn *x, *r = NULL;
	kv_val k, v;

	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_INODE, K("g1"), K("one"));
	put_ok(e, x, KV_DB_INODE, K("g2"), K("two"));
	put_ok(e, x, KV_DB_DIRENT, K("d1"), K("dee"));
	commit_ok(e, x);
	/* right guesses: a put over one, and a read */
	x = gbegin(e);
	get_is(e, x, KV_DB_INODE, K("g1"), "one");
	put_ok(e, x, KV_DB_INODE, K("g1"), K("uno"));
	get_is(e, x, KV_DB_INODE, K("g2"), "two");
	commit_ok(e, x);
	/* a read alone, wrong: the change made on it does not stay */
	behind(f, "UPDATE kvfs_inode SET v = '%s' WHERE k = '%s'", "zwei", "g2");
	x = gbegin(e);
	get_is(e, x, KV_DB_INODE, K("g2"), "two"); /* the guess: no server asked */
	put_ok(e, x, KV_DB_INODE, K("g3"), K("three"));
	assert_int_equal(wcommit(e, x), KV_EGUESS);
	x = gbegin(e); /* a failure forgets every guess: these are read */
	get_is(e, x, KV_DB_INODE, K("g2"), "zwei");
	k = K("g3");
	assert_int_equal(ENG->get(e, x, KV_DB_INODE, &k, &v), KV_ENOTFOUND);
	get_is(e, x, KV_DB_INODE, K("g1"), "uno");
	commit_ok(e, x);
	/* a put over a wrong guess (S_SWAP) */
	behind(f, "UPDATE kvfs_inode SET v = '%s' WHERE k = '%s'", "eins", "g1");
	x = gbegin(e);
	get_is(e, x, KV_DB_INODE, K("g1"), "uno");
	put_ok(e, x, KV_DB_INODE, K("g1"), K("mine"));
	assert_int_equal(wcommit(e, x), KV_EGUESS);
	x = wbegin(e, NULL);
	get_is(e, x, KV_DB_INODE, K("g1"), "eins");
	commit_ok(e, x);
	/* a reader found no record; another writer made one: a put where the
	 * guess said nothing was (S_INSERT) */
	assert_int_equal(ENG->read_begin(e, &r), 0);
	k = K("g4");
	assert_int_equal(ENG->get(e, r, KV_DB_INODE, &k, &v), KV_ENOTFOUND);
	ENG->read_end(e, r);
	behind(f, "INSERT INTO kvfs_inode VALUES ('%s', '%s')", "g4", "vier");
	x = gbegin(e);
	k = K("g4");
	assert_int_equal(ENG->get(e, x, KV_DB_INODE, &k, &v), KV_ENOTFOUND);
	put_ok(e, x, KV_DB_INODE, K("g4"), K("mine"));
	assert_int_equal(wcommit(e, x), KV_EGUESS);
	x = wbegin(e, NULL);
	get_is(e, x, KV_DB_INODE, K("g4"), "vier");
	get_is(e, x, KV_DB_DIRENT, K("d1"), "dee");
	commit_ok(e, x);
	/* a del of a wrong guess (S_DELSAME) */
	behind(f, "UPDATE kvfs_dirent SET v = '%s' WHERE k = '%s'", "dah", "d1");
	x = gbegin(e);
	k = K("d1");
	assert_int_equal(ENG->del(e, x, KV_DB_DIRENT, &k), 0);
	assert_int_equal(wcommit(e, x), KV_EGUESS);
	/* without the flag nothing is guessed */
	behind(f, "UPDATE kvfs_dirent SET v = '%s' WHERE k = '%s'", "doh", "d1");
	x = wbegin(e, NULL);
	get_is(e, x, KV_DB_DIRENT, K("d1"), "doh");
	get_is(e, x, KV_DB_INODE, K("g4"), "vier");
	commit_ok(e, x);
	/* right guesses of every kind commit, and hold what they wrote */
	x = gbegin(e);
	get_is(e, x, KV_DB_DIRENT, K("d1"), "doh");
	k = K("d1");
	assert_int_equal(ENG->del(e, x, KV_DB_DIRENT, &k), 0);
	get_is(e, x, KV_DB_INODE, K("g4"), "vier");
	put_ok(e, x, KV_DB_INODE, K("g4"), K("four"));
	commit_ok(e, x);
	assert_int_equal(ENG->read_begin(e, &r), 0);
	get_is(e, r, KV_DB_INODE, K("g4"), "four");
	k = K("d1");
	assert_int_equal(ENG->get(e, r, KV_DB_DIRENT, &k, &v), KV_ENOTFOUND);
	ENG->read_free(e, r);
}

/* Signal the server processes of kvfs's connections. */
static void pg_signal(int sig)
{
	PGconn *c = PQconnectdb(pg_url());
	PGresult *r = PQexec(c, "SELECT pid FROM pg_stat_activity WHERE application_name = 'kvfs'");

	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_true(PQntuples(r) > 0);
	for (int i = 0; i < PQntuples(r); i++)
		assert_int_equal(kill((pid_t)atoi(PQgetvalue(r, i, 0)), sig), 0);
	PQclear(r);
	PQfinish(c);
}

static double seconds(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A server that stops answering: a call fails with EIO after the
 * statement timeout (here the URL's, 1 s) and 5 s more, never hangs; once
 * it answers again, the next begin connects again. */
void pg_stopped_server(void **state)
{
	struct fix *f = *state;
	char url[600], err[256];
	kv_etxn *rx = NULL, *x;
	kv_val k = K("k"), v;
	kv_env *e;
	double t;

	snprintf(url, sizeof(url), "%s%%20-cstatement_timeout%%3D1000", f->where);
	e = env_new(url, 0, KV_DURABLE_NORMAL);
	assert_int_equal(ENG->open(e, err, sizeof(err)), 0);
	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_INODE, k, K("v"));
	commit_ok(e, x);
	assert_int_equal(ENG->read_begin(e, &rx), 0);
	get_is(e, rx, KV_DB_INODE, k, "v");
	ENG->read_end(e, rx);
	pg_signal(SIGSTOP);
	t = seconds();
	assert_int_equal(ENG->read_begin(e, &rx), 0);
	assert_int_equal(ENG->get(e, rx, KV_DB_INODE, &k, &v), EIO);
	t = seconds() - t;
	pg_signal(SIGCONT);
	print_message("failed after %.1f s\n", t);
	assert_true(t > 5.5 && t < 8);
	ENG->read_end(e, rx);
	assert_int_equal(ENG->read_begin(e, &rx), 0);
	get_is(e, rx, KV_DB_INODE, k, "v");
	ENG->read_free(e, rx);
	env_free(e);
}

/* A server not there: a message with the URL, its password left out. */
void pg_messages(void **state)
{
	char err[512] = "";
	kv_env *e;

	(void)state;
	e = env_new("postgresql://kvfs:secret@/postgres?host=/nonexistent&connect_timeout=1", 0,
		    KV_DURABLE_NORMAL);
	assert_int_equal(ENG->open(e, err, sizeof(err)), -EIO);
	print_message("%s\n", err);
	assert_non_null(strstr(err, "'postgresql://kvfs@/postgres?host=/nonexistent"));
	assert_null(strstr(err, "secret"));
	assert_null(strchr(err, '\n'));
	env_free(e);
	assert_ptr_equal(kv_engine_for("postgresql://h/db"), &kv_engine_pg);
	assert_ptr_equal(kv_engine_for("postgres:///db?host=/tmp"), &kv_engine_pg);
	assert_ptr_equal(kv_engine_for("/var/lib/kvfs/img"), &kv_engine_lmdb);
}
