/*
 * test_engine_pg.c - what the PostgreSQL engine does beyond the contract
 * (kv/pg/pg.c), run by test_engine.c after the contract's tests on it: a
 * server that ends every connection (its end of the stream late, or as a
 * statement goes), a child whose statement fails on the server, reads
 * guessed and checked (kv/pg/pg_guess.c), a stopped server, and its
 * messages.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
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

/* A proxy between kvfs and the server on a Unix socket of its own, which
 * keeps a client's side open after the server closed its own: the FATAL
 * reaches the client, the end of the stream never does (as when a backend
 * lingers after pg_stat_activity dropped it). One thread; at most
 * PX_MAX connections. */
#define PX_MAX 16

struct proxy {
	char dir[32];
	int lfd, stop[2];
	int cfd[PX_MAX], sfd[PX_MAX]; /* sfd -1: the server closed it */
	pthread_t thread;
};

static int px_server(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s/.s.PGSQL.5432", getenv("KVFS_TEST_PG_DIR"));
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Bytes from fd to to; 0 at the end of fd's stream, or of to's (no
 * SIGPIPE: the test would die of it). */
static int px_copy(int fd, int to)
{
	char buf[8192];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n > 0 && send(to, buf, (size_t)n, MSG_NOSIGNAL) != n)
		n = -1;
	return n > 0;
}

static void px_accept(struct proxy *p)
{
	int c = accept(p->lfd, NULL, NULL), i;

	for (i = 0; c >= 0 && i < PX_MAX && p->cfd[i] >= 0; i++)
		;
	if (c < 0 || i == PX_MAX || (p->sfd[i] = px_server()) < 0) {
		if (c >= 0)
			close(c);
		return;
	}
	p->cfd[i] = c;
}

static void *px_run(void *arg)
{
	struct proxy *p = arg;

	for (;;) {
		struct pollfd f[2 + 2 * PX_MAX] = {{.fd = p->stop[0], .events = POLLIN},
						   {.fd = p->lfd, .events = POLLIN}};

		for (int i = 0; i < PX_MAX; i++) {
			f[2 + 2 * i] = (struct pollfd){.fd = p->cfd[i], .events = POLLIN};
			f[3 + 2 * i] = (struct pollfd){.fd = p->sfd[i], .events = POLLIN};
		}
		if (poll(f, 2 + 2 * PX_MAX, -1) < 0 || f[0].revents)
			return NULL;
		if (f[1].revents)
			px_accept(p);
		for (int i = 0; i < PX_MAX; i++) {
			if (f[3 + 2 * i].revents && !px_copy(p->sfd[i], p->cfd[i])) {
				close(p->sfd[i]); /* the client's side stays open */
				p->sfd[i] = -1;
			}
			if (f[2 + 2 * i].revents && p->sfd[i] >= 0 &&
			    !px_copy(p->cfd[i], p->sfd[i])) {
				close(p->sfd[i]);
				p->sfd[i] = -1;
			}
			if (f[2 + 2 * i].revents && p->sfd[i] < 0) { /* the client ends it */
				close(p->cfd[i]);
				p->cfd[i] = -1;
			}
		}
	}
}

static void px_start(struct proxy *p)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};

	assert_non_null(mkdtemp(strcpy(p->dir, "/tmp/kvfs-px.XXXXXX")));
	snprintf(a.sun_path, sizeof(a.sun_path), "%s/.s.PGSQL.5432", p->dir);
	p->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(p->lfd >= 0);
	assert_int_equal(bind(p->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(p->lfd, 8), 0);
	assert_int_equal(pipe(p->stop), 0);
	for (int i = 0; i < PX_MAX; i++)
		p->cfd[i] = p->sfd[i] = -1;
	assert_int_equal(pthread_create(&p->thread, NULL, px_run, p), 0);
}

static void px_stop(struct proxy *p)
{
	char path[64];

	assert_int_equal(write(p->stop[1], "x", 1), 1);
	pthread_join(p->thread, NULL);
	for (int i = 0; i < PX_MAX; i++) {
		if (p->cfd[i] >= 0)
			close(p->cfd[i]);
		if (p->sfd[i] >= 0)
			close(p->sfd[i]);
	}
	close(p->lfd);
	close(p->stop[0]);
	close(p->stop[1]);
	snprintf(path, sizeof(path), "%s/.s.PGSQL.5432", p->dir);
	unlink(path);
	rmdir(p->dir);
}

/* The server ended every session, and its FATAL is all the client got (the
 * end of the stream stays away): the next begin still connects again, a
 * reader's with a Sync's result still owed before the FATAL, and a writer
 * whose first statement goes without waiting (its commit would fail). */
void pg_fatal_alone(void **state)
{
	static struct proxy p; /* its thread outlives a failed assert */
	struct fix *f = *state;
	char url[600], err[256];
	const char *host = strstr(f->where, "host="), *end;
	kv_etxn *rx = NULL, *x;
	kv_env *e;

	assert_non_null(host);
	end = host + strcspn(host, "&");
	px_start(&p);
	snprintf(url, sizeof(url), "%.*shost=%s%s", (int)(host - f->where), f->where, p.dir, end);
	env_free(f->e); /* one read-write open at a time */
	f->e = NULL;
	e = env_new(url, 0, KV_DURABLE_NORMAL);
	assert_int_equal(ENG->open(e, err, sizeof(err)), 0);
	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_INODE, K("k"), K("v"));
	commit_ok(e, x);
	assert_int_equal(ENG->read_begin(e, &rx), 0);
	get_is(e, rx, KV_DB_INODE, K("k"), "v");
	ENG->read_end(e, rx); /* its Sync's result is read with the next get */
	the->kill();
	assert_int_equal(ENG->read_begin(e, &rx), 0);
	get_is(e, rx, KV_DB_INODE, K("k"), "v");
	ENG->read_free(e, rx);
	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_INODE, K("k"), K("w"));
	commit_ok(e, x);
	env_free(e);
	px_stop(&p);
}

/* The backends of kvfs's connections, stopped: their pids in pids[]. */
static int pg_stop_all(pid_t *pids, int max)
{
	PGconn *c = PQconnectdb(pg_url());
	PGresult *r = PQexec(c, "SELECT pid FROM pg_stat_activity WHERE application_name = 'kvfs'");
	int n = PQntuples(r) < max ? PQntuples(r) : max;

	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	for (int i = 0; i < n; i++) {
		pids[i] = (pid_t)atoi(PQgetvalue(r, i, 0));
		assert_int_equal(kill(pids[i], SIGSTOP), 0);
	}
	PQclear(r);
	PQfinish(c);
	return n;
}

struct resume {
	pid_t pids[16];
	int n;
};

static void *resume_later(void *arg)
{
	struct resume *r = arg;

	usleep(300000); /* the statement is on its way meanwhile */
	for (int i = 0; i < r->n; i++)
		kill(r->pids[i], SIGCONT);
	return NULL;
}

/* The server ends the sessions as the first statement of a transaction
 * goes (after its begin found the connection alive): the statement fails
 * with the server's FATAL and goes again on a new connection, unseen by
 * the caller. A statement after the first gets EIO (what went before it
 * is gone). */
static void end_as_it_goes(struct resume *r, pthread_t *t)
{
	r->n = pg_stop_all(r->pids, 16);
	assert_true(r->n > 0);
	pg_admin("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
		 "WHERE application_name = 'kvfs'"); /* handled once they run */
	assert_int_equal(pthread_create(t, NULL, resume_later, r), 0);
}

void pg_fatal_in_flight(void **state)
{
	struct fix *f = *state;
	kv_env *e = f->e;
	static struct resume r; /* its thread outlives a failed assert */
	kv_etxn *rx = NULL, *x;
	pthread_t t;
	kv_val k = K("other"), v;

	x = wbegin(e, NULL);
	put_ok(e, x, KV_DB_INODE, K("k"), K("v"));
	commit_ok(e, x);
	assert_int_equal(ENG->read_begin(e, &rx), 0);
	end_as_it_goes(&r, &t);
	get_is(e, rx, KV_DB_INODE, K("k"), "v");
	pthread_join(t, NULL);
	ENG->read_end(e, rx);
	x = wbegin(e, NULL);
	end_as_it_goes(&r, &t);
	get_is(e, x, KV_DB_INODE, K("k"), "v");
	pthread_join(t, NULL);
	commit_ok(e, x);
	x = wbegin(e, NULL);
	get_is(e, x, KV_DB_INODE, K("k"), "v");
	end_as_it_goes(&r, &t);
	assert_int_equal(ENG->get(e, x, KV_DB_INODE, &k, &v), EIO);
	pthread_join(t, NULL);
	wabort(e, x);
	assert_int_equal(ENG->read_begin(e, &rx), 0);
	get_is(e, rx, KV_DB_INODE, K("k"), "v");
	ENG->read_free(e, rx);
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
