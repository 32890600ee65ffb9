/*
 * test_window.c - kv/window.c: a change is told once applied in the open
 * window and committed by window. Told changes are read back at once, on
 * the writing thread and on another, though a plain snapshot shows they are
 * not committed yet; a snapshot begun before a commit knows it is stale; a
 * sync commits them; a process that dies with a window open loses that
 * window whole and nothing a sync covered; near full no window opens and
 * every change is committed before it is told.
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "kv_int.h"
#include "testutil.h"

static struct tu_image *image_of(void **state)
{
	return *state;
}

/* A window of a minute: nothing commits by time during a test. */
static int open_window(struct tu_image *im, uint64_t max_size)
{
	struct kv_open_opts o = {.durability = KV_DURABLE_NORMAL, .window_ms = 60000,
				 .max_size = max_size};

	return tu_image_open(im, &o);
}

/* The size of ino as a read of it sees it (kv_read_begin_ino), or as a
 * plain snapshot does. */
static uint64_t size_seen(kv_env *e, uint64_t ino, int plain)
{
	struct kv_inode in;
	kv_txn *t;

	assert_int_equal(plain ? kv_read_begin(e, &t) : kv_read_begin_ino(e, ino, &t), 0);
	assert_int_equal(kv_inode_get(t, ino, &in), 0);
	kv_read_end(t);
	return in.size;
}

/* A name in the root, as a read of the root sees it: its inode or 0. */
static uint64_t name_seen(kv_env *e, const char *name)
{
	struct kv_dirent de;
	kv_txn *t;
	int rc;

	assert_int_equal(kv_read_begin_ino(e, KV_ROOT_INO, &t), 0);
	rc = kv_dirent_lookup(t, KV_ROOT_INO, name, strlen(name), &de);
	kv_read_end(t);
	assert_true(rc == 0 || rc == -ENOENT);
	return rc ? 0 : de.ino;
}

struct other {
	kv_env *env;
	uint64_t ino, size;
};

static void *read_other(void *p)
{
	struct other *o = p;

	o->size = size_seen(o->env, o->ino, 0);
	return NULL;
}

/* Told at once, read back at once on any thread; committed only by a sync
 * (a plain snapshot is the committed image, as another process sees it). */
static void told_before_committed(void **state)
{
	struct tu_image *im = image_of(state);
	struct kv_inode in;
	struct other o;
	pthread_t th;
	uint64_t ino;

	assert_int_equal(open_window(im, 0), 0);
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "f", 0100644, &ino), 0);
	assert_true(name_seen(im->env, "f") == ino);
	assert_int_equal(tu_pwrite(im->env, ino, 0, "hello", 5), 0);
	assert_true(size_seen(im->env, ino, 0) == 5);
	o = (struct other){.env = im->env, .ino = ino};
	assert_int_equal(pthread_create(&th, NULL, read_other, &o), 0);
	pthread_join(th, NULL);
	assert_true(o.size == 5);
	/* not committed: the plain snapshot has no such inode yet */
	assert_int_equal(tu_getattr(im->env, ino, &in), -ENOENT);
	assert_int_equal(kv_sync(im->env), 0);
	assert_true(size_seen(im->env, ino, 1) == 5);
}

/* A snapshot begun before a commit knows it may miss what the commit
 * brought, even once the commit cleared the marks. */
struct writer_arg {
	kv_env *env;
	uint64_t ino;
	int rc;
};

static void *write_and_sync(void *p)
{
	struct writer_arg *w = p;

	w->rc = tu_pwrite(w->env, w->ino, 0, "x", 1);
	if (!w->rc)
		w->rc = kv_sync(w->env);
	return NULL;
}

static void snapshot_before_commit_is_stale(void **state)
{
	struct tu_image *im = image_of(state);
	struct writer_arg w;
	pthread_t th;
	uint64_t ino;
	kv_txn *t;

	assert_int_equal(open_window(im, 0), 0);
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "f", 0100644, &ino), 0);
	/* the commit, and the map grown for the next window: a read held
	 * across a commit must not also be held across a map growth, which
	 * waits for every reader (kv.h) */
	assert_int_equal(kv_sync(im->env), 0);
	assert_int_equal(kv_read_begin(im->env, &t), 0);
	assert_int_equal(kv_read_changed(t, ino), 0); /* committed, unmarked */
	w = (struct writer_arg){.env = im->env, .ino = ino};
	assert_int_equal(pthread_create(&th, NULL, write_and_sync, &w), 0);
	pthread_join(th, NULL);
	assert_int_equal(w.rc, 0);
	assert_int_equal(kv_read_changed(t, ino), 1);
	kv_read_end(t);
	assert_true(size_seen(im->env, ino, 0) == 1);
}

/* A process that dies with a window open loses that window whole, and
 * nothing a sync covered. */
static void death_loses_the_window_only(void **state)
{
	struct tu_image *im = image_of(state);
	uint64_t a, b;
	pid_t pid;
	int status;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (open_window(im, 0) || tu_mkfile(im->env, KV_ROOT_INO, "synced", 0100644, &a) ||
		    tu_pwrite(im->env, a, 0, "kept", 4) || kv_sync(im->env) ||
		    tu_mkfile(im->env, KV_ROOT_INO, "told", 0100644, &b) ||
		    tu_pwrite(im->env, b, 0, "lost", 4))
			_exit(2);
		_exit(0); /* as kill -9: no close, the window open */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(open_window(im, 0), 0);
	a = name_seen(im->env, "synced");
	assert_true(a != 0);
	assert_true(size_seen(im->env, a, 0) == 4);
	assert_true(name_seen(im->env, "told") == 0);
}

/* Near full (a map of a few MiB) no window opens: a change is committed
 * before it is told, so nothing told can be lost to a commit short of
 * room. */
static void near_full_commits_before_telling(void **state)
{
	struct tu_image *im = image_of(state);
	uint64_t ino;

	assert_int_equal(open_window(im, 4 << 20), 0);
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "f", 0100644, &ino), 0);
	assert_int_equal(tu_pwrite(im->env, ino, 0, "abc", 3), 0);
	assert_true(size_seen(im->env, ino, 1) == 3); /* in the committed image */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(told_before_committed, tu_setup_closed, tu_teardown),
		cmocka_unit_test_setup_teardown(snapshot_before_commit_is_stale, tu_setup_closed,
						tu_teardown),
		cmocka_unit_test_setup_teardown(death_loses_the_window_only, tu_setup_closed,
						tu_teardown),
		cmocka_unit_test_setup_teardown(near_full_commits_before_telling, tu_setup_closed,
						tu_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
