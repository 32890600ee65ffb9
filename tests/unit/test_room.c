/*
 * test_room.c - kv/lmdb/room.c: a full image still deletes. Ordinary changes
 * stop short of the reserve; a change flagged KV_OP_RESERVE (unlink, purge,
 * truncate) may use it, so a delete on a full image succeeds and its space
 * is written again; at a max_size below the image's size nothing grows but
 * deletes still work; kv_usage_get says what is really usable.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "kv_int.h"
#include "testutil.h"

static struct tu_image *image_of(void **state)
{
	return *state;
}

static int open_capped(struct tu_image *im, uint64_t max_size)
{
	struct kv_open_opts o = {.durability = KV_DURABLE_NONE, .max_size = max_size};

	return tu_image_open(im, &o);
}

/* The bytes up to the image's last page (what the map holds). */
static uint64_t extent_of(kv_env *e)
{
	struct kv_usage u;

	assert_int_equal(kv_usage_get(e, &u), 0);
	return u.extent_bytes;
}

/* Append chunk-byte writes to ino until ENOSPC; returns the bytes written. */
static uint64_t fill(kv_env *e, uint64_t ino, uint64_t off, size_t chunk)
{
	unsigned char *buf = malloc(chunk);
	int rc;

	assert_non_null(buf);
	for (;;) {
		tu_fill(buf, chunk, off);
		rc = tu_pwrite(e, ino, off, buf, chunk);
		if (rc)
			break;
		off += chunk;
	}
	assert_int_equal(rc, -ENOSPC);
	free(buf);
	return off;
}

/* Fill until even one block does not fit: 64 KiB writes, then blocks. */
static uint64_t fill_up(kv_env *e, uint64_t ino)
{
	uint64_t end = fill(e, ino, 0, 64 << 10);

	return fill(e, ino, end, kv_block_size(e));
}

struct unlink_arg {
	uint64_t dir;
	const char *name;
};

/* Remove a name and free its inode (a file of one link). */
static int unlink_apply(kv_txn *t, void *p)
{
	struct unlink_arg *a = p;
	struct kv_dirent de;
	int rc;

	rc = kv_dirent_lookup(t, a->dir, a->name, strlen(a->name), &de);
	if (!rc)
		rc = kv_dirent_remove(t, a->dir, a->name, strlen(a->name));
	if (!rc)
		rc = kv_inode_purge(t, de.ino);
	return rc;
}

static int rm(kv_env *e, const char *name, unsigned flags)
{
	struct unlink_arg a = {.dir = KV_ROOT_INO, .name = name};

	return kv_write(e, unlink_apply, &a, flags);
}

/* Write len bytes of a new file name (seeded by seed); 0 or -errno. */
static int write_new(kv_env *e, const char *name, size_t len, uint64_t seed)
{
	unsigned char *buf = malloc(len);
	uint64_t ino;
	int rc;

	assert_non_null(buf);
	tu_fill(buf, len, seed);
	rc = tu_mkfile(e, KV_ROOT_INO, name, 0100644, &ino);
	if (!rc)
		rc = tu_pwrite(e, ino, 0, buf, len);
	free(buf);
	return rc;
}

static void expect_content(kv_env *e, const char *name, size_t len, uint64_t seed)
{
	unsigned char *want = malloc(len), *got = malloc(len);
	struct kv_dirent de;
	kv_txn *t;

	assert_non_null(want);
	assert_non_null(got);
	assert_int_equal(kv_read_begin(e, &t), 0);
	assert_int_equal(kv_dirent_lookup(t, KV_ROOT_INO, name, strlen(name), &de), 0);
	kv_read_end(t);
	tu_fill(want, len, seed);
	assert_int_equal(tu_pread(e, de.ino, 0, len, got), (ssize_t)len);
	assert_memory_equal(got, want, len);
	free(want);
	free(got);
}

/* ------------------------------------------------------------ tests -- */

/* Full at max_size: ordinary writes stop short of the reserve, the delete
 * of the file that filled it succeeds, and its space is written again, also
 * after a reopen with the same max_size. */
static void full_delete_write_again(void **state)
{
	struct tu_image *im = image_of(state);
	const uint64_t max = 16 << 20;
	struct kv_usage u;
	uint64_t ino, filled;

	assert_int_equal(open_capped(im, max), 0);
	assert_int_equal(write_new(im->env, "keep", 100000, 7), 0);
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "fill", 0100644, &ino), 0);
	filled = fill_up(im->env, ino);
	assert_true(filled > max / 2);
	assert_int_equal(kv_usage_get(im->env, &u), 0);
	assert_true(u.reserve_bytes > 0);
	assert_true(u.extent_bytes <= max - u.reserve_bytes);
	assert_true(u.avail_bytes < 64 << 10);
	/* an ordinary change gets no room the writes did not get */
	assert_int_equal(write_new(im->env, "more", 64 << 10, 8), -ENOSPC);

	assert_int_equal(rm(im->env, "fill", KV_OP_RESERVE), 0);
	assert_int_equal(kv_usage_get(im->env, &u), 0);
	assert_true(u.avail_bytes > filled / 2);
	assert_int_equal(write_new(im->env, "again", 4 << 20, 9), 0);
	expect_content(im->env, "keep", 100000, 7);
	expect_content(im->env, "again", 4 << 20, 9);

	/* the same after a reopen at the same max_size, with the image full */
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "fill2", 0100644, &ino), 0);
	fill_up(im->env, ino);
	tu_image_close(im);
	assert_int_equal(open_capped(im, max), 0);
	assert_int_equal(rm(im->env, "fill2", KV_OP_RESERVE), 0);
	assert_int_equal(write_new(im->env, "again2", 4 << 20, 10), 0);
	expect_content(im->env, "keep", 100000, 7);
	expect_content(im->env, "again", 4 << 20, 9);
	expect_content(im->env, "again2", 4 << 20, 10);
	assert_true(extent_of(im->env) <= max);
}

/* Deletes of many small files one by one on a full image: each is a
 * commit of its own in the reserve, and none fails. */
static void many_deletes_when_full(void **state)
{
	struct tu_image *im = image_of(state);
	char name[32];
	uint64_t ino;
	int n;

	assert_int_equal(open_capped(im, 8 << 20), 0);
	for (n = 0; n < 200; n++) {
		snprintf(name, sizeof(name), "small%d", n);
		assert_int_equal(write_new(im->env, name, 5000, (uint64_t)n), 0);
	}
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "fill", 0100644, &ino), 0);
	fill_up(im->env, ino);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "small%d", i);
		assert_int_equal(rm(im->env, name, KV_OP_RESERVE), 0);
	}
	assert_int_equal(rm(im->env, "fill", KV_OP_RESERVE), 0);
	assert_int_equal(write_new(im->env, "again", 1 << 20, 3), 0);
}

/* Fill and delete, again and again: the reserve stays whole. A delete on
 * a full image takes pages past what writes may use; once they are free
 * below the image's end, writes must not take them as room of their own. */
static void fill_delete_cycles(void **state)
{
	struct tu_image *im = image_of(state);
	const uint64_t max = 8 << 20;
	uint64_t ino, first = 0, filled;

	assert_int_equal(open_capped(im, max), 0);
	for (int cycle = 0; cycle < 40; cycle++) {
		assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "fill", 0100644, &ino), 0);
		filled = fill_up(im->env, ino);
		if (cycle == 0)
			first = filled;
		/* writes get the same room every time, no more */
		assert_true(filled <= first + (192 << 10));
		assert_true(filled + (256 << 10) >= first);
		assert_int_equal(rm(im->env, "fill", KV_OP_RESERVE), 0);
	}
	assert_true(extent_of(im->env) <= max);
}

/* Delete a small file, append until ENOSPC, again and again, with writes
 * flagged as the daemon flags them: appends never take the room a delete
 * freed from the reserve, so every delete works and the image stays
 * inside max_size; a write over stored blocks still works when full. */
static void small_deletes_and_appends(void **state)
{
	struct tu_image *im = image_of(state);
	const uint64_t max = 8 << 20;
	unsigned char blk[4072] = {0};
	uint64_t ino, app, end = 0, bs;
	char name[32];
	int n = 300;

	assert_int_equal(open_capped(im, max), 0);
	bs = kv_block_size(im->env);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "s%d", i);
		assert_int_equal(write_new(im->env, name, 5000, (uint64_t)i), 0);
	}
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "app", 0100644, &app), 0);
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "fill", 0100644, &ino), 0);
	fill_up(im->env, ino);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "s%d", i);
		assert_int_equal(rm(im->env, name, KV_OP_RESERVE), 0);
		while (tu_pwrite_daemon(im->env, app, end, blk, bs) == 0)
			end += bs;
	}
	assert_true(extent_of(im->env) <= max);
	/* over what is stored, full as it is */
	tu_fill(blk, bs, 5);
	assert_int_equal(tu_pwrite_daemon(im->env, app, 0, blk, bs), 0);
}

/* A max_size below the image's size: nothing grows, the free pages inside
 * are written (less the reserve), deletes work, and what they free is
 * written again. */
static void max_size_below_image(void **state)
{
	struct tu_image *im = image_of(state);
	uint64_t ino, before;

	assert_int_equal(open_capped(im, 0), 0);
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "big", 0100644, &ino), 0);
	for (uint64_t off = 0; off < (12 << 20); off += 1 << 20) {
		unsigned char *buf = malloc(1 << 20);
		assert_non_null(buf);
		tu_fill(buf, 1 << 20, off);
		assert_int_equal(tu_pwrite(im->env, ino, off, buf, 1 << 20), 0);
		free(buf);
	}
	assert_int_equal(write_new(im->env, "gone", 4 << 20, 3), 0);
	assert_int_equal(rm(im->env, "gone", 0), 0);
	before = extent_of(im->env);
	tu_image_close(im);

	assert_int_equal(open_capped(im, 4 << 20), 0);
	assert_int_equal(write_new(im->env, "inside", 2 << 20, 1), 0);
	assert_int_equal(write_new(im->env, "more", 4 << 20, 4), -ENOSPC);
	assert_int_equal(rm(im->env, "big", KV_OP_RESERVE), 0);
	assert_int_equal(write_new(im->env, "new2", 2 << 20, 2), 0);
	expect_content(im->env, "inside", 2 << 20, 1);
	expect_content(im->env, "new2", 2 << 20, 2);
	assert_true(extent_of(im->env) <= before + (1 << 20));
}

/* A truncate to 0 of the file that filled the image is a delete too. */
struct trunc_arg {
	uint64_t ino;
};

static int trunc_apply(kv_txn *t, void *p)
{
	struct trunc_arg *a = p;
	struct kv_inode in;
	int rc = kv_inode_get(t, a->ino, &in);

	if (!rc)
		rc = kv_data_truncate(t, &in, 0);
	if (!rc)
		rc = kv_inode_put(t, &in);
	return rc;
}

static void truncate_when_full(void **state)
{
	struct tu_image *im = image_of(state);
	struct trunc_arg a;
	uint64_t ino;

	assert_int_equal(open_capped(im, 32 << 20), 0);
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "fill", 0100644, &ino), 0);
	fill_up(im->env, ino);
	a.ino = ino;
	assert_int_equal(kv_write(im->env, trunc_apply, &a, KV_OP_RESERVE), 0);
	assert_int_equal(write_new(im->env, "again", 8 << 20, 4), 0);
	expect_content(im->env, "again", 8 << 20, 4);
}

/* Shared blocks on a full image: a write over a borrowed block stores one
 * block more, and a write or a truncate of the original copies its lent
 * blocks to the borrower first: each is refused (-ENOSPC), as the daemon's
 * writes try (KV_OP_OVERWRITE) and truncates run (KV_OP_RESERVE), never
 * taken from the reserve, which stays whole; once a delete made room they
 * work, and the copy reads what it read. */
static void shared_when_full(void **state)
{
	struct tu_image *im = image_of(state);
	const uint64_t max = 8 << 20, nb = 32;
	struct trunc_arg tr;
	struct kv_usage u0, u1;
	unsigned char *buf, *got;
	uint64_t orig, copy, fill_ino, bs;

	assert_int_equal(open_capped(im, max), 0);
	bs = kv_block_size(im->env);
	buf = malloc(nb * bs);
	got = malloc(nb * bs);
	assert_non_null(buf);
	assert_non_null(got);
	tu_fill(buf, nb * bs, 1);
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "orig", 0100644, &orig), 0);
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "copy", 0100644, &copy), 0);
	assert_int_equal(tu_pwrite(im->env, orig, 0, buf, nb * bs), 0);
	assert_int_equal(tu_share(im->env, copy, 0, orig, 0, nb), 0);
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "fill", 0100644, &fill_ino), 0);
	fill_up(im->env, fill_ino);
	assert_int_equal(kv_usage_get(im->env, &u0), 0);
	for (uint64_t i = 0; i < nb; i++)
		assert_int_equal(tu_pwrite_daemon(im->env, copy, i * bs, buf, bs), -ENOSPC);
	assert_int_equal(tu_pwrite_daemon(im->env, orig, 0, buf + bs, bs), -ENOSPC);
	tr.ino = orig;
	assert_int_equal(kv_write(im->env, trunc_apply, &tr, KV_OP_RESERVE), -ENOSPC);
	assert_int_equal(kv_usage_get(im->env, &u1), 0);
	assert_true(u1.blocks == u0.blocks);
	assert_true(u1.extent_bytes <= max);
	assert_int_equal(tu_pread(im->env, copy, 0, nb * bs, got), (ssize_t)(nb * bs));
	assert_memory_equal(got, buf, nb * bs);

	assert_int_equal(rm(im->env, "fill", KV_OP_RESERVE), 0);
	assert_int_equal(tu_pwrite_daemon(im->env, copy, 0, buf + bs, bs), 0);
	assert_int_equal(kv_write(im->env, trunc_apply, &tr, KV_OP_RESERVE), 0);
	memcpy(buf, buf + bs, bs);
	assert_int_equal(tu_pread(im->env, copy, 0, nb * bs, got), (ssize_t)(nb * bs));
	assert_memory_equal(got, buf, nb * bs);
	free(buf);
	free(got);
}

/* kv_usage_get on another thread while deletes on a full image resize the
 * map (to the reserve and back): it reads LMDB's meta pages, which move
 * with the map, so it must hold the map still, as any reader does. */
struct usage_loop {
	kv_env *env;
	volatile int stop;
	int rc;
	unsigned runs;
};

static void *usage_main(void *p)
{
	struct usage_loop *l = p;
	struct kv_usage u;

	while (!l->stop && !l->rc) {
		l->rc = kv_usage_get(l->env, &u);
		l->runs++;
		sched_yield(); /* under valgrind, one thread runs at a time */
	}
	return NULL;
}

static void usage_beside_resizes(void **state)
{
	struct tu_image *im = image_of(state);
	struct usage_loop l = {0};
	pthread_t th;
	uint64_t ino;

	assert_int_equal(open_capped(im, 8 << 20), 0);
	l.env = im->env;
	assert_int_equal(pthread_create(&th, NULL, usage_main, &l), 0);
	for (int cycle = 0; cycle < 40; cycle++) {
		assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "fill", 0100644, &ino), 0);
		fill_up(im->env, ino);
		assert_int_equal(rm(im->env, "fill", KV_OP_RESERVE), 0);
	}
	l.stop = 1;
	pthread_join(th, NULL);
	assert_int_equal(l.rc, 0);
	assert_true(l.runs > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(full_delete_write_again, tu_setup_closed, tu_teardown),
		cmocka_unit_test_setup_teardown(many_deletes_when_full, tu_setup_closed, tu_teardown),
		cmocka_unit_test_setup_teardown(fill_delete_cycles, tu_setup_closed, tu_teardown),
		cmocka_unit_test_setup_teardown(small_deletes_and_appends, tu_setup_closed, tu_teardown),
		cmocka_unit_test_setup_teardown(max_size_below_image, tu_setup_closed, tu_teardown),
		cmocka_unit_test_setup_teardown(truncate_when_full, tu_setup_closed, tu_teardown),
		cmocka_unit_test_setup_teardown(shared_when_full, tu_setup_closed, tu_teardown),
		cmocka_unit_test_setup_teardown(usage_beside_resizes, tu_setup_closed, tu_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
