/*
 * test_change.c - kv/change.c and the record layer's part in many mounts of
 * one store: a commit tells the other mounts which inodes and names it
 * changed (in messages no larger than a NOTIFY carries), a mount skips its
 * own, and a writer reads the inode counter another mount moved before it
 * allocates; and a window whose commit a shared store lost (its server
 * went away) after its changes were told: the mount goes on, and reports
 * the loss to the fsyncs that would claim it; and a batch tried on guessed
 * reads that the store finds wrong runs again reading. The store here is
 * LMDB's engine marked shared, its messages caught instead of sent.
 */
#include <errno.h>
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

#include "kv_int.h"
#include "testutil.h"

#define MAX_MSGS 64

static struct kv_engine shared_lmdb;
static char msgs[MAX_MSGS][KV_CHANGE_MSG_MAX + 1];
static size_t nmsgs;

static int catch_msg(kv_env *e, kv_etxn *x, const char *msg, size_t len)
{
	(void)e;
	(void)x;
	assert_true(len <= KV_CHANGE_MSG_MAX);
	assert_int_equal(strlen(msg), len);
	assert_true(nmsgs < MAX_MSGS);
	memcpy(msgs[nmsgs++], msg, len + 1);
	return 0;
}

static int lock_nothing(kv_env *e, kv_etxn *x)
{
	(void)e;
	(void)x;
	return 0;
}

static int listen_nothing(kv_env *e, int on)
{
	(void)e;
	(void)on;
	return 0;
}

/* e's store, as if other mounts wrote it too (before any op runs). */
static void make_shared(kv_env *e)
{
	shared_lmdb = kv_engine_lmdb;
	shared_lmdb.shared = 1;
	shared_lmdb.publish = catch_msg;
	shared_lmdb.listen = listen_nothing;
	shared_lmdb.lock = lock_nothing;
	e->eng = &shared_lmdb;
}

struct seen {
	uint64_t ino[1024];
	char name[1024][KV_NAME_MAX + 1];
	size_t n;
};

static void collect(void *arg, uint64_t ino, const char *name, size_t len)
{
	struct seen *s = arg;

	assert_true(s->n < 1024);
	s->ino[s->n] = ino;
	memcpy(s->name[s->n], name ? name : "", len);
	s->name[s->n][len] = '\0';
	s->n++;
}

static int has(const struct seen *s, uint64_t ino, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->ino[i] == ino && strcmp(s->name[i], name) == 0)
			return 1;
	return 0;
}

/* A new image opened with o (NULL: the defaults), its store made shared. */
static void open_shared(struct tu_image *im, const struct kv_open_opts *o)
{
	assert_int_equal(tu_image_new(im, NULL), 0);
	assert_int_equal(tu_image_open(im, o), 0);
	make_shared(im->env);
}

static void open_two(struct tu_image *a, struct tu_image *b)
{
	open_shared(a, NULL);
	open_shared(b, NULL);
	nmsgs = 0;
}

/* A create tells the name and both inodes; the other mount hears them, the
 * writing one does not hear itself. */
static void create_is_told(void **state)
{
	struct tu_image a, b;
	static struct seen other, self;
	uint64_t ino;

	(void)state;
	open_two(&a, &b);
	memset(&other, 0, sizeof(other));
	memset(&self, 0, sizeof(self));
	assert_int_equal(kv_watch(b.env, collect, &other), 0);
	assert_int_equal(kv_watch(a.env, collect, &self), 0);
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "alpha", 0100644, &ino), 0);
	assert_true(nmsgs >= 1);
	for (size_t i = 0; i < nmsgs; i++) {
		assert_int_equal(kv_change_deliver(b.env, msgs[i], strlen(msgs[i])), 0);
		assert_int_equal(kv_change_deliver(a.env, msgs[i], strlen(msgs[i])), 0);
	}
	assert_true(has(&other, KV_ROOT_INO, "alpha"));
	assert_true(has(&other, ino, ""));
	assert_true(has(&other, KV_ROOT_INO, ""));
	assert_int_equal(self.n, 0);
	tu_image_free(&a);
	tu_image_free(&b);
}

struct many {
	int n;
};

static int add_many(kv_txn *t, void *arg)
{
	const struct many *m = arg;
	char name[KV_NAME_MAX + 1];
	int rc;

	for (int i = 0; i < m->n; i++) {
		memset(name, 'a' + i % 26, KV_NAME_MAX);
		snprintf(name, sizeof(name), "%05d", i);
		name[5] = 'x'; /* the rest stays: 255 bytes */
		rc = kv_dirent_add(t, KV_ROOT_INO, name, KV_NAME_MAX, KV_ROOT_INO + 1000 + i, 1);
		if (rc)
			return rc;
	}
	return 0;
}

/* One commit of 300 long names: several messages, each small enough for a
 * NOTIFY, that together tell every name, in order. */
static void long_lists_split(void **state)
{
	struct tu_image a, b;
	static struct seen other;
	struct many m = {300};

	(void)state;
	open_two(&a, &b);
	memset(&other, 0, sizeof(other));
	assert_int_equal(kv_watch(b.env, collect, &other), 0);
	assert_int_equal(kv_write(a.env, add_many, &m, 0), 0);
	assert_true(nmsgs > 1);
	for (size_t i = 0; i < nmsgs; i++)
		assert_int_equal(kv_change_deliver(b.env, msgs[i], strlen(msgs[i])), 0);
	assert_int_equal(other.n, 301); /* the names, and the root once */
	for (int i = 0, k = 0; i < m.n; i++, k++) {
		if (other.name[k][0] == '\0')
			k++; /* the root's own record */
		assert_int_equal(other.ino[k], KV_ROOT_INO);
		assert_int_equal(strlen(other.name[k]), KV_NAME_MAX);
		assert_int_equal(atoi(other.name[k]), i);
	}
	tu_image_free(&a);
	tu_image_free(&b);
}

/* What is not a message is refused whole, and tells nothing. */
static void bad_messages(void **state)
{
	static const char *const bad[] = {
		"", "kvfs1", "kvfs2 0000000000000001 i1", "kvfs1 01 i1",
		"kvfs1 0000000000000001 x1", "kvfs1 0000000000000001 i", "kvfs1 0000000000000001 n1",
		"kvfs1 0000000000000001 n1/", "kvfs1 0000000000000001 n1/6", "kvfs1 0000000000000001 n1/zz",
		"kvfs1 0000000000000001  i1",
	};
	struct tu_image a, b;
	static struct seen other;

	(void)state;
	open_two(&a, &b);
	memset(&other, 0, sizeof(other));
	assert_int_equal(kv_watch(b.env, collect, &other), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (kv_change_deliver(b.env, bad[i], strlen(bad[i])) != -EINVAL)
			fail_msg("accepted '%s'", bad[i]);
	assert_int_equal(other.n, 0);
	assert_int_equal(kv_change_deliver(b.env, "kvfs1 0000000000000001 i1f n2/6869", 34), 0);
	assert_true(has(&other, 0x1f, "") && has(&other, 2, "hi"));
	tu_image_free(&a);
	tu_image_free(&b);
}

static int raise_counter(kv_txn *t, void *arg)
{
	kv_val k = {strlen(KV_SUPER_KEY), KV_SUPER_KEY}, v;
	struct kv_super s;
	int rc = kv_err(t, kv_eget(t, KV_DB_META, &k, &v), "get superblock");

	if (rc == 0)
		rc = kv_super_decode(v.data, v.size, &s);
	if (rc)
		return rc;
	s.next_ino += *(uint64_t *)arg;
	return kv_super_store(t, &s); /* as another mount's commit would */
}

/* Inode numbers never collide: a writer of a shared store takes the
 * counter as the store holds it, not as it last left it. */
static void counter_reloaded(void **state)
{
	struct tu_image a, b;
	uint64_t first, second, more = 1000;

	(void)state;
	open_two(&a, &b);
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "one", 0100644, &first), 0);
	assert_int_equal(kv_write(a.env, raise_counter, &more, 0), 0);
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "two", 0100644, &second), 0);
	assert_true(second >= first + 1 + more);
	/* and an image only one mount writes keeps its own count */
	b.env->eng = &kv_engine_lmdb;
	assert_int_equal(tu_mkfile(b.env, KV_ROOT_INO, "one", 0100644, &first), 0);
	assert_int_equal(kv_write(b.env, raise_counter, &more, 0), 0);
	assert_int_equal(tu_mkfile(b.env, KV_ROOT_INO, "two", 0100644, &second), 0);
	assert_int_equal(second, first + 1);
	tu_image_free(&a);
	tu_image_free(&b);
}

static int fail_window; /* the window's next commit fails, as a lost server's */

static int commit_or_lose(kv_env *e, kv_etxn *x)
{
	if (fail_window && x == e->win.txn) {
		fail_window = 0;
		kv_engine_lmdb.txn_abort(e, x);
		return EIO;
	}
	return kv_engine_lmdb.txn_commit(e, x);
}

/* A window of told changes lost: on a shared store the mount goes on (the
 * numbers the window gave out never again), an fsync of a file open across
 * the loss, or the first of an inode it changed, fails; on a store of its
 * own (LMDB) the store takes no more changes. */
static void lost_window(void **state)
{
	struct kv_open_opts win = {.durability = KV_DURABLE_NORMAL, .window_ms = 60000};
	struct tu_image a;
	struct kv_inode in;
	uint64_t one, two, three, before, after;

	(void)state;
	open_shared(&a, &win);
	shared_lmdb.txn_commit = commit_or_lose;
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "one", 0100644, &one), 0);
	assert_int_equal(kv_settle(a.env), 0);
	before = kv_lost_sample(a.env, 1);
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "two", 0100644, &two), 0); /* told */
	fail_window = 1;
	assert_int_equal(kv_settle(a.env), -EIO);
	assert_int_equal(tu_getattr(a.env, two, &in), -ENOENT);
	assert_int_equal(tu_getattr(a.env, one, &in), 0);
	/* the mount goes on, past the lost numbers */
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "three", 0100644, &three), 0);
	assert_true(three > two);
	assert_int_equal(kv_settle(a.env), 0);
	/* a file open across the loss: its close (open for writing) and each
	 * fsync; one opened after: neither */
	after = kv_lost_sample(a.env, 1);
	assert_int_equal(kv_lost_check(a.env, before, 0), -EIO);
	assert_int_equal(kv_lost_check(a.env, before & ~1ULL, 0), 0); /* read-only */
	assert_int_equal(kv_lost_check(a.env, after, 0), 0);
	assert_int_equal(kv_lost_check(a.env, after, one), 0);
	/* the root the loss changed: its first fsync, whenever it was opened */
	assert_int_equal(kv_lost_check(a.env, after, KV_ROOT_INO), -EIO);
	assert_int_equal(kv_lost_check(a.env, after, KV_ROOT_INO), 0);
	assert_int_equal(kv_lost_check(a.env, before, KV_ROOT_INO), -EIO);
	tu_image_free(&a);

	/* a store of its own: no more changes */
	assert_int_equal(tu_image_new(&a, NULL), 0);
	assert_int_equal(tu_image_open(&a, &win), 0);
	shared_lmdb = kv_engine_lmdb;
	shared_lmdb.txn_commit = commit_or_lose;
	a.env->eng = &shared_lmdb;
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "one", 0100644, &one), 0);
	fail_window = 1;
	assert_int_equal(kv_settle(a.env), -EIO);
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "two", 0100644, &two), -EROFS);
	assert_int_equal(kv_lost_check(a.env, 0, KV_ROOT_INO), 0);
	tu_image_free(&a);
}

static int fail_lock; /* the writers' lock fails so many times, as a lost server's */

static int lock_or_fail(kv_env *e, kv_etxn *x)
{
	(void)e;
	(void)x;
	if (fail_lock > 0) {
		fail_lock--;
		return EIO;
	}
	return 0;
}

/* Wait until the writer thread has W open (5 s at most). */
static void win_is_open(kv_env *e)
{
	for (int i = 0; i < 500; i++) {
		int open;

		pthread_mutex_lock(&e->w.q_lock);
		open = e->win.txn != NULL && !e->w.busy;
		pthread_mutex_unlock(&e->w.q_lock);
		if (open)
			return;
		usleep(10 * 1000);
	}
	fail_msg("no window opened in 5 s");
}

/* A window's first op cannot take the writers' lock (the server went away
 * between two windows): the op fails with EIO, nothing else, and the next
 * one opens a window again and succeeds. */
static void window_lock_lost(void **state)
{
	struct kv_open_opts win = {.durability = KV_DURABLE_NORMAL, .window_ms = 60000};
	struct tu_image a;
	struct kv_inode in;
	uint64_t one, two, ino;

	(void)state;
	open_shared(&a, &win);
	shared_lmdb.lock = lock_or_fail;
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "one", 0100644, &one), 0);
	assert_int_equal(kv_settle(a.env), 0);
	/* the first op of the next window: on a guess (the lock alone), then
	 * reading the superblock again (lock and read); each time on a W the
	 * writer thread opened (again, after the drop: WIN_RETRY_MS) */
	for (int guess = 1; guess >= 0; guess--) {
		win_is_open(a.env);
		a.env->win.super_guess = guess;
		fail_lock = 1;
		assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "lost", 0100644, &ino), -EIO);
		assert_int_equal(fail_lock, 0);
	}
	win_is_open(a.env);
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "two", 0100644, &two), 0);
	assert_true(two > one);
	assert_int_equal(kv_settle(a.env), 0);
	assert_int_equal(tu_getattr(a.env, one, &in), 0);
	assert_int_equal(tu_getattr(a.env, two, &in), 0);
	tu_image_free(&a);
}

/* icache.c: an op that puts a record and then fails */
static int put_then_fail(kv_txn *t, void *arg)
{
	struct kv_inode in;
	int rc = kv_inode_get(t, KV_ROOT_INO, &in);

	(void)arg;
	if (rc)
		return rc;
	in.mode = 040700;
	rc = kv_inode_put(t, &in);
	return rc ? rc : -EIO;
}

static int chmod_root(kv_txn *t, void *arg)
{
	struct kv_inode in;
	int rc = kv_inode_get(t, KV_ROOT_INO, &in);

	if (rc)
		return rc;
	in.mode = 040000 | *(const uint32_t *)arg;
	return kv_inode_put(t, &in);
}

static int unlink_it(kv_txn *t, void *arg)
{
	return kv_inode_purge(t, *(const uint64_t *)arg);
}

/* A shared store keeps the inode records its own commits left (a getattr
 * then costs no read): only what committed, never past a change of its
 * own, another mount's note or the age asked; none on a store of its own. */
static void recent_inodes(void **state)
{
	struct kv_open_opts win = {.durability = KV_DURABLE_NORMAL, .window_ms = 60000};
	struct kv_open_opts full = {.durability = KV_DURABLE_FULL};
	const int64_t sec = 1000000000;
	static struct seen heard;
	struct tu_image a, b;
	struct kv_inode in, got;
	uint64_t ino, other;
	uint32_t mode = 0750;

	(void)state;
	/* batches, told after their commit (as durability=full, or a shared
	 * store's default window of 0) */
	open_shared(&a, &full);
	open_shared(&b, &full);
	assert_int_equal(kv_icache_init(a.env), 0);
	assert_int_equal(kv_inode_recent(a.env, KV_ROOT_INO, sec, &in), -ENOENT);
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "alpha", 0100644, &ino), 0);
	/* the new inode as the commit left it */
	assert_int_equal(kv_inode_recent(a.env, ino, sec, &in), 0);
	assert_int_equal(tu_getattr(a.env, ino, &got), 0);
	assert_int_equal(in.mode, got.mode);
	assert_int_equal(in.nlink, got.nlink);
	assert_int_equal(in.ctime_ns, got.ctime_ns);
	assert_int_equal(in.mode, 0100644);
	assert_int_equal(kv_inode_recent(a.env, ino, 0, &in), -ENOENT); /* too old */
	/* an op that put the root and failed: nothing of it is kept */
	assert_int_equal(kv_write(a.env, put_then_fail, NULL, 0), -EIO);
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "gamma", 0100644, &other), 0);
	assert_int_equal(kv_inode_recent(a.env, other, sec, &in), 0);
	assert_int_not_equal(kv_inode_recent(a.env, KV_ROOT_INO, sec, &in) == 0 &&
				     in.mode == 040700,
			     1);
	assert_int_equal(kv_write(a.env, chmod_root, &mode, 0), 0);
	assert_int_equal(kv_inode_recent(a.env, KV_ROOT_INO, sec, &in), 0);
	assert_int_equal(in.mode, 040750);
	/* a deleted inode goes */
	assert_int_equal(kv_write(a.env, unlink_it, &ino, 0), 0);
	assert_int_equal(kv_inode_recent(a.env, ino, sec, &in), -ENOENT);
	/* another mount's note of the root */
	nmsgs = 0;
	assert_int_equal(tu_mkfile(b.env, KV_ROOT_INO, "beta", 0100644, &ino), 0);
	assert_true(nmsgs >= 1);
	assert_int_equal(kv_watch(a.env, collect, &heard), 0);
	assert_int_equal(kv_inode_recent(a.env, KV_ROOT_INO, sec, &in), 0);
	assert_int_equal(kv_change_deliver(a.env, msgs[0], strlen(msgs[0])), 0);
	assert_int_equal(kv_inode_recent(a.env, KV_ROOT_INO, sec, &in), -ENOENT);
	tu_image_free(&a);
	tu_image_free(&b);

	/* with a window: a change told but not committed empties the slot;
	 * the window's commit fills it */
	open_shared(&a, &win);
	assert_int_equal(kv_icache_init(a.env), 0);
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "one", 0100644, &ino), 0);
	assert_int_equal(kv_settle(a.env), 0);
	assert_int_equal(kv_inode_recent(a.env, ino, sec, &in), 0);
	mode = 0711;
	assert_int_equal(kv_write(a.env, chmod_root, &mode, 0), 0); /* told */
	assert_int_equal(kv_inode_recent(a.env, KV_ROOT_INO, sec, &in), -ENOENT);
	assert_int_equal(kv_settle(a.env), 0);
	assert_int_equal(kv_inode_recent(a.env, KV_ROOT_INO, sec, &in), 0);
	assert_int_equal(in.mode, 040711);
	/* a failed op and a good one in one window: only the good one's */
	assert_int_equal(kv_write(a.env, put_then_fail, NULL, 0), -EIO);
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "gamma", 0100644, &other), 0);
	assert_int_equal(kv_settle(a.env), 0);
	assert_int_equal(kv_inode_recent(a.env, other, sec, &in), 0);
	assert_int_not_equal(kv_inode_recent(a.env, KV_ROOT_INO, sec, &in) == 0 &&
				     in.mode == 040700,
			     1);
	assert_int_equal(tu_getattr(a.env, KV_ROOT_INO, &got), 0);
	assert_int_equal(got.mode, 040711);
	tu_image_free(&a);

	/* a store of its own keeps none */
	assert_int_equal(tu_image_new(&a, NULL), 0);
	assert_int_equal(tu_image_open(&a, NULL), 0);
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "one", 0100644, &ino), 0);
	assert_int_equal(kv_inode_recent(a.env, KV_ROOT_INO, sec, &in), -ENOENT);
	tu_image_free(&a);
}

static kv_etxn *guessed_txn; /* the last top-level txn begun with KV_TXN_GUESS */
static unsigned begin_flags[8];
static int nbegins, guess_wrong;

static int begin_noting(kv_env *e, kv_etxn *parent, unsigned flags, kv_etxn **out)
{
	int rc = kv_engine_lmdb.txn_begin(e, parent, flags, out);

	if (!parent && !(flags & KV_TXN_RDONLY) && !rc) {
		if (nbegins < 8)
			begin_flags[nbegins++] = flags;
		guessed_txn = flags & KV_TXN_GUESS ? *out : NULL;
	}
	return rc;
}

/* As the server answers a guess another mount made wrong: nothing done. */
static int commit_guess_wrong(kv_env *e, kv_etxn *x)
{
	if (guess_wrong && x == guessed_txn) {
		guess_wrong = 0;
		kv_engine_lmdb.txn_abort(e, x);
		return KV_EGUESS;
	}
	return kv_engine_lmdb.txn_commit(e, x);
}

/* writer.c: a batch on a shared store tries on guesses (KV_TXN_GUESS);
 * when the commit says one was wrong, the batch runs again reading, told
 * only then, and the inode numbers the lost try took are given again; an
 * op that fails on a try on guesses (perhaps a wrong guess's doing) fails
 * only once a try that reads says so too. */
static void guess_replayed(void **state)
{
	struct kv_open_opts full = {.durability = KV_DURABLE_FULL};
	struct tu_image a;
	struct kv_inode in;
	struct kv_dirent de;
	uint64_t one, two, ino;
	kv_txn *t;

	(void)state;
	open_shared(&a, &full);
	shared_lmdb.txn_begin = begin_noting;
	shared_lmdb.txn_commit = commit_guess_wrong;
	nbegins = 0;
	guess_wrong = 1;
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "one", 0100644, &one), 0);
	assert_int_equal(guess_wrong, 0); /* the try on guesses was lost */
	assert_int_equal(nbegins, 2);
	assert_true(begin_flags[0] & KV_TXN_GUESS);
	assert_false(begin_flags[1] & KV_TXN_GUESS);
	assert_int_equal(kv_read_begin(a.env, &t), 0);
	assert_int_equal(kv_dirent_lookup(t, KV_ROOT_INO, "one", 3, &de), 0);
	assert_int_equal(de.ino, one);
	kv_read_end(t);
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "two", 0100644, &two), 0);
	assert_int_equal(two, one + 1); /* the lost try's number given again */
	assert_int_equal(begin_flags[2] & KV_TXN_GUESS, KV_TXN_GUESS); /* a new batch guesses */
	/* an op that fails on a try on guesses, tried again reading */
	nbegins = 0;
	assert_int_equal(tu_mkfile(a.env, KV_ROOT_INO, "one", 0100644, &ino), -EEXIST);
	assert_true(nbegins >= 2);
	assert_true(begin_flags[0] & KV_TXN_GUESS);
	assert_false(begin_flags[1] & KV_TXN_GUESS);
	assert_int_equal(kv_read_begin(a.env, &t), 0);
	assert_int_equal(kv_dirent_lookup(t, KV_ROOT_INO, "one", 3, &de), 0);
	assert_int_equal(de.ino, one); /* not replaced */
	assert_int_equal(kv_inode_get(t, one, &in), 0);
	kv_read_end(t);
	tu_image_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(create_is_told),
		cmocka_unit_test(long_lists_split),
		cmocka_unit_test(bad_messages),
		cmocka_unit_test(counter_reloaded),
		cmocka_unit_test(lost_window),
		cmocka_unit_test(window_lock_lost),
		cmocka_unit_test(recent_inodes),
		cmocka_unit_test(guess_replayed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
