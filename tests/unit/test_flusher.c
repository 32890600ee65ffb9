/*
 * test_flusher.c - kv/lmdb/flusher.c: while the image grows, room past its end
 * is allocated ahead of the commits, counted by kv_usage and given back at
 * close, never past max_size; with durability=none the image is written
 * back behind the commits.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "lmdb_int.h"
#include "testutil.h"

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif
#define SYS_CACHESTAT 451 /* the same on every architecture */

struct cs_range {
	uint64_t off, len;
};

struct cs {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

static off_t alloc_bytes(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return (off_t)st.st_blocks * 512 - st.st_size;
}

/* Write MiB from..to-1 of file ino (0: a new file "big") through the
 * writer, 1 MiB per op; returns ino. */
static uint64_t write_mib(kv_env *e, uint64_t ino, int from, int to)
{
	unsigned char *buf = malloc(1 << 20);

	assert_non_null(buf);
	tu_fill(buf, 1 << 20, 3);
	if (!ino)
		assert_int_equal(tu_mkfile(e, KV_ROOT_INO, "big", 0100644, &ino), 0);
	for (int i = from; i < to; i++)
		assert_int_equal(tu_pwrite_sums(e, ino, (uint64_t)i << 20, buf, 1 << 20), 0);
	free(buf);
	return ino;
}

/* Wait (10 s at most) until the flusher has handled n kicks. */
static void wait_kicks(kv_env *e, unsigned n)
{
	unsigned done = 0;

	for (int i = 0; i < 1000; i++) {
		pthread_mutex_lock(&kv_lmdb(e)->flush.lock);
		done = kv_lmdb(e)->flush.done;
		pthread_mutex_unlock(&kv_lmdb(e)->flush.lock);
		if (done >= n)
			break;
		usleep(10000);
	}
	assert_true(done >= n);
}

/* While the image grows, room past its end is allocated ahead of the
 * commits (at least 8 MiB) and counted as free space; kv_close gives it
 * back. */
static void flusher_allocates_ahead(void **state)
{
	struct tu_image *im = *state;
	struct kv_usage u;
	char probe[PATH_MAX];
	int fd, rc;

	/* a host filesystem without fallocate has nothing to show */
	fd = open(tu_image_file(im, "probe", probe), O_CREAT | O_RDWR, 0644);
	assert_true(fd >= 0);
	rc = fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 4096);
	close(fd);
	unlink(probe);
	if (rc != 0)
		skip();
	assert_true(alloc_bytes(im->path) < (4 << 20));
	write_mib(im->env, 0, 0, 10); /* a kick at 8 MiB */
	wait_kicks(im->env, 1);
	assert_true(alloc_bytes(im->path) >= (4 << 20));
	assert_int_equal(kv_usage_get(im->env, &u), 0);
	assert_true(u.ahead_bytes >= (4 << 20));
	tu_image_close(im);
	assert_true(alloc_bytes(im->path) < (1 << 20));
}

#ifndef XFS_SUPER_MAGIC
#define XFS_SUPER_MAGIC 0x58465342
#endif

static int capped20_setup(void **state)
{
	struct tu_image *im = calloc(1, sizeof(*im));
	struct kv_open_opts o = {.durability = KV_DURABLE_NONE, .max_size = 20 << 20};

	*state = im;
	if (!im || tu_image_new(im, NULL))
		return -1;
	return tu_image_open(im, &o);
}

/* The room allocated ahead never takes the image's blocks past max_size. */
static void flusher_stays_under_max_size(void **state)
{
	struct tu_image *im = *state;
	struct statfs sf;
	struct stat st;
	int fd;

	/* XFS allocates past a growing file's end on its own */
	assert_int_equal(statfs(im->dir, &sf), 0);
	if (sf.f_type == XFS_SUPER_MAGIC)
		skip();
	write_mib(im->env, 0, 0, 16); /* kicks at 8 and 16 MiB: 8 MiB more wanted */
	wait_kicks(im->env, 2);
	/* written back first: until then ext4 also counts blocks it reserved
	 * for pages written before the room was allocated */
	fd = open(im->path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fsync(fd), 0);
	close(fd);
	assert_int_equal(stat(im->path, &st), 0);
	/* plus a block or two of the host's own (ext4's extent tree) */
	assert_true((uint64_t)st.st_blocks * 512 <= (20 << 20) + (64 << 10));
	assert_true((uint64_t)st.st_size > (16 << 20));
}

static uint64_t dirty_bytes(int fd)
{
	struct cs_range r = {0, 0};
	struct cs c;

	assert_int_equal(syscall(SYS_CACHESTAT, fd, &r, &c, 0), 0);
	return c.nr_dirty * 4096;
}

/* With durability=none commits do not sync: the flusher starts write-back
 * of the image behind them, so the host's page cache does not hold every
 * byte dirty until a sync (the kernel's own write-back waits 30 s here). */
static void flusher_writes_behind(void **state)
{
	struct tu_image *im = *state;
	struct cs_range r = {0, 0};
	struct cs c;
	struct statfs sf;
	uint64_t dirty = 0, ino;
	int fd;

	assert_int_equal(statfs(im->dir, &sf), 0);
	fd = open(im->path, O_RDONLY);
	assert_true(fd >= 0);
	if (sf.f_type == TMPFS_MAGIC || syscall(SYS_CACHESTAT, fd, &r, &c, 0) != 0) {
		close(fd); /* memory has nothing to write back; or an older kernel */
		skip();
	}
	ino = write_mib(im->env, 0, 0, 7); /* no kick yet */
	if (dirty_bytes(fd) < (5 << 20)) {
		close(fd); /* the host writes back this soon on its own */
		skip();
	}
	write_mib(im->env, ino, 7, 40);
	wait_kicks(im->env, 4);
	for (int i = 0; i < 1000; i++) {
		dirty = dirty_bytes(fd);
		if (dirty < (16 << 20))
			break;
		usleep(10000);
	}
	close(fd);
	assert_true(dirty < (16 << 20));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(flusher_allocates_ahead, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(flusher_writes_behind, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(flusher_stays_under_max_size, capped20_setup,
	                                        tu_teardown),
	};

	return cmocka_run_group_tests_name("flusher", tests, NULL, NULL);
}
