/*
 * test_data.c - kv/data.c: file contents as blocks. Writes and reads (the
 * iovecs gathered into a buffer) with holes, short tails, overwrites and
 * unaligned writes across blocks; truncate down and up; punch hole;
 * SEEK_DATA/SEEK_HOLE; nblocks accounting; fallocate's unwritten blocks
 * and ZERO_RANGE, their count and the room they keep; a seeded random
 * sequence checked against an in-memory model (data_model.c) after every
 * step; a block corrupted through raw LMDB reading as -EIO; purge of an
 * inode's blocks (also of one that borrows blocks); checksums computed
 * before the write (kv_data_sums), and a write over a block left past the
 * end of a damaged file.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "data_model.h"
#include "kv_int.h"
#include "testutil.h"

/* ------------------------------------------------------------- tests -- */

static kv_env *env_of(void **state)
{
	return ((struct tu_image *)*state)->env;
}

static void small_write(void **state)
{
	kv_env *e = env_of(state);
	uint64_t ino = f_new(e, "f");
	unsigned char got[100];
	struct kv_inode in;

	assert_int_equal(tu_getattr(e, ino, &in), 0);
	assert_true(in.size == 0 && in.nblocks == 0);
	assert_int_equal(tu_pread(e, ino, 0, 100, got), 0);
	assert_int_equal(tu_pwrite(e, ino, 0, "0123456789", 10), 0);
	assert_int_equal(tu_getattr(e, ino, &in), 0);
	assert_true(in.size == 10 && in.nblocks == 1);
	assert_int_equal(tu_pread(e, ino, 0, 100, got), 10);
	assert_memory_equal(got, "0123456789", 10);
	assert_int_equal(tu_pread(e, ino, 4, 3, got), 3);
	assert_memory_equal(got, "456", 3);
	assert_int_equal(tu_pread(e, ino, 10, 100, got), 0);
	assert_int_equal(tu_pread(e, ino, 1000, 100, got), 0);
	/* the short tail grows in place */
	assert_int_equal(tu_pwrite(e, ino, 10, "ab", 2), 0);
	assert_int_equal(tu_pread(e, ino, 8, 100, got), 4);
	assert_memory_equal(got, "89ab", 4);
	assert_int_equal(tu_getattr(e, ino, &in), 0);
	assert_true(in.size == 12 && in.nblocks == 1);
	/* an empty write changes nothing */
	assert_int_equal(tu_pwrite(e, ino, 5000, "", 0), 0);
	assert_int_equal(tu_getattr(e, ino, &in), 0);
	assert_true(in.size == 12 && in.nblocks == 1);
}

static void holes_and_tails(void **state)
{
	kv_env *e = env_of(state);
	uint64_t ino = f_new(e, "f"), bs = kv_block_size(e);
	struct model m;

	m_init(&m, bs);
	mw(e, ino, &m, 3 * bs + 5, 1, 1);  /* blocks 0-2 are holes */
	mw(e, ino, &m, 10, 10, 2);         /* block 0: a short block mid-file */
	mw(e, ino, &m, bs + bs / 2, 7, 3); /* block 1 starts with zeros */
	check_range(e, ino, &m, 15, bs);   /* data, tail zeros, hole, data */
	check_range(e, ino, &m, 3 * bs, 100);
	check_seeks(e, ino, &m);
	free(m.buf);
}

static void overwrite_middle(void **state)
{
	kv_env *e = env_of(state);
	uint64_t ino = f_new(e, "f"), bs = kv_block_size(e);
	struct model m;

	m_init(&m, bs);
	mw(e, ino, &m, 0, 3 * bs, 1);
	mw(e, ino, &m, bs + 50, 100, 2);
	mw(e, ino, &m, 0, 1, 3);
	mw(e, ino, &m, 3 * bs - 1, 1, 4); /* last byte: size unchanged */
	mw(e, ino, &m, bs - 1, 2, 5);     /* two bytes across a boundary */
	assert_true(m.size == 3 * bs);
	check_seeks(e, ino, &m);
	free(m.buf);
}

static void unaligned_spanning(void **state)
{
	kv_env *e = env_of(state);
	uint64_t ino = f_new(e, "f"), bs = kv_block_size(e);
	struct model m;

	m_init(&m, bs);
	mw(e, ino, &m, bs - 7, 2 * bs + bs / 2, 1); /* blocks 0 to 3 */
	assert_int_equal(m_nblocks(&m), 4);
	mw(e, ino, &m, 3, 3 * bs, 2);
	mw(e, ino, &m, 5 * bs + 1, bs + 2, 3); /* past a hole, blocks 5 to 6 */
	for (uint64_t off = 0; off < m.size; off += bs / 3)
		check_range(e, ino, &m, off, bs + 11);
	check_seeks(e, ino, &m);
	free(m.buf);
}

static void truncate_down_up(void **state)
{
	kv_env *e = env_of(state);
	uint64_t ino = f_new(e, "f"), bs = kv_block_size(e);
	struct model m;

	m_init(&m, bs);
	mw(e, ino, &m, 0, 3 * bs, 1);
	assert_int_equal(f_truncate(e, ino, bs + 100), 0);
	m_truncate(&m, bs + 100);
	check_model(e, ino, &m);
	assert_int_equal(m_nblocks(&m), 2);
	/* grow again: the cut bytes read back as zeros */
	assert_int_equal(f_truncate(e, ino, 3 * bs), 0);
	m_truncate(&m, 3 * bs);
	check_model(e, ino, &m);
	check_seeks(e, ino, &m);
	/* grow by a write past the end: still zeros between */
	mw(e, ino, &m, 4 * bs, 5, 2);
	assert_int_equal(f_truncate(e, ino, bs), 0); /* exactly a boundary */
	m_truncate(&m, bs);
	check_model(e, ino, &m);
	assert_int_equal(m_nblocks(&m), 1);
	assert_int_equal(f_truncate(e, ino, 2 * bs + 3), 0);
	m_truncate(&m, 2 * bs + 3);
	check_model(e, ino, &m);
	check_seeks(e, ino, &m);
	assert_int_equal(f_truncate(e, ino, 0), 0);
	m_truncate(&m, 0);
	check_model(e, ino, &m);
	assert_int_equal(f_truncate(e, ino, 5 * bs), 0); /* all hole */
	m_truncate(&m, 5 * bs);
	check_model(e, ino, &m);
	check_seeks(e, ino, &m);
	free(m.buf);
}

static void punch_hole(void **state)
{
	kv_env *e = env_of(state);
	uint64_t ino = f_new(e, "f"), bs = kv_block_size(e), out;
	struct model m;

	m_init(&m, bs);
	mw(e, ino, &m, 0, 4 * bs, 1);
	assert_int_equal(f_punch(e, ino, bs / 2, 2 * bs), 0);
	m_punch(&m, bs / 2, 2 * bs);
	check_model(e, ino, &m);
	assert_int_equal(m_nblocks(&m), 3); /* block 1 dropped, 0 trimmed, 2 zeroed */
	assert_int_equal(f_seek(e, ino, 0, SEEK_HOLE, &out), 0);
	assert_true(out == bs); /* a block kept in part is data whole */
	assert_int_equal(f_seek(e, ino, bs / 2, SEEK_DATA, &out), 0);
	assert_true(out == bs / 2);
	assert_int_equal(f_seek(e, ino, bs, SEEK_DATA, &out), 0);
	assert_true(out == 2 * bs);
	check_seeks(e, ino, &m);
	/* inside one block; past the end (clipped); beyond the end (nothing) */
	assert_int_equal(f_punch(e, ino, 3 * bs + 10, 20), 0);
	m_punch(&m, 3 * bs + 10, 20);
	assert_int_equal(f_punch(e, ino, 4 * bs - 5, 1000), 0);
	m_punch(&m, 4 * bs - 5, 1000);
	assert_int_equal(f_punch(e, ino, 4 * bs, 1000), 0);
	assert_int_equal(f_punch(e, ino, 0, 0), 0);
	check_model(e, ino, &m);
	check_seeks(e, ino, &m);
	/* the whole file: no blocks, the size stays */
	assert_int_equal(f_punch(e, ino, 0, UINT64_MAX), 0);
	m_punch(&m, 0, UINT64_MAX);
	check_model(e, ino, &m);
	assert_int_equal(m_nblocks(&m), 0);
	assert_true(m.size == 4 * bs);
	check_seeks(e, ino, &m);
	free(m.buf);
}

static uint64_t holes_of(kv_env *e, uint64_t ino, uint64_t off, uint64_t end)
{
	uint64_t n = 0;
	kv_txn *t;

	assert_int_equal(kv_read_begin(e, &t), 0);
	assert_int_equal(kv_data_holes(t, ino, off, end, &n), 0);
	kv_read_end(t);
	return n;
}

/* fallocate's half of kv/data.c: holes counted, then stored as unwritten
 * blocks (a short tail block filled out with zeros to the size), a few
 * blocks per call, never a block past the size; the bytes read the same. */
static void allocate_holes(void **state)
{
	kv_env *e = env_of(state);
	uint64_t ino = f_new(e, "f"), bs = kv_block_size(e);
	struct alloc_arg a = {.ino = ino, .max = 2};
	struct model m;

	m_init(&m, bs);
	mw(e, ino, &m, bs + 10, 20, 1);      /* block 1 short: data at 10..30 */
	mw(e, ino, &m, 4 * bs, bs / 2, 2);   /* block 4 short, the size 4.5 blocks */
	assert_true(holes_of(e, ino, 0, m.size) == 3); /* blocks 0, 2, 3 */
	assert_true(holes_of(e, ino, bs, 2 * bs) == 0);
	/* past the size: nothing stored; the size is the caller's */
	a.off = 0;
	a.end = 8 * bs;
	for (a.next = 0; a.next < m.size; a.off = a.next)
		assert_int_equal(kv_write(e, alloc_apply, &a, 0), 0);
	m_allocate(&m, 0, 8 * bs);
	check_model(e, ino, &m);
	check_seeks(e, ino, &m);
	assert_true(holes_of(e, ino, 0, m.size) == 0);
	/* grow the size with it, as fallocate without KEEP_SIZE does */
	a = (struct alloc_arg){.ino = ino, .off = 6 * bs + 3, .end = 7 * bs, .size = 7 * bs,
			       .max = 100};
	assert_true(holes_of(e, ino, a.off, a.end) == 1);
	assert_int_equal(kv_write(e, alloc_apply, &a, 0), 0);
	m.size = 7 * bs;
	m_allocate(&m, 6 * bs + 3, 7 * bs);
	check_model(e, ino, &m);
	check_seeks(e, ino, &m);
	assert_true(m.blen[5] == 0 && m.blen[4] == bs / 2); /* outside the range: untouched */
	free(m.buf);
}

static void seek_cases(void **state)
{
	kv_env *e = env_of(state);
	uint64_t ino = f_new(e, "f"), bs = kv_block_size(e), out;

	assert_int_equal(f_seek(e, ino, 0, SEEK_DATA, &out), -ENXIO); /* empty */
	assert_int_equal(f_seek(e, ino, 0, SEEK_HOLE, &out), -ENXIO);
	assert_int_equal(tu_pwrite(e, ino, 2 * bs, "x", 1), 0);
	assert_int_equal(f_seek(e, ino, 0, SEEK_DATA, &out), 0);
	assert_true(out == 2 * bs);
	assert_int_equal(f_seek(e, ino, 0, SEEK_HOLE, &out), 0);
	assert_true(out == 0);
	assert_int_equal(f_seek(e, ino, 2 * bs, SEEK_HOLE, &out), 0);
	assert_true(out == 2 * bs + 1); /* the end of the file is a hole */
	assert_int_equal(f_seek(e, ino, 2 * bs + 1, SEEK_DATA, &out), -ENXIO);
	assert_int_equal(f_seek(e, ino, 2 * bs, SEEK_CUR, &out), -EINVAL);
	/* a file that ends in a hole: the last block is data to its end (as
	 * tmpfs says of a page, ext4 of a block), no data after it */
	assert_int_equal(f_truncate(e, ino, 10 * bs), 0);
	assert_int_equal(f_seek(e, ino, 2 * bs + 1, SEEK_DATA, &out), 0);
	assert_true(out == 2 * bs + 1);
	assert_int_equal(f_seek(e, ino, 3 * bs, SEEK_DATA, &out), -ENXIO);
	assert_int_equal(f_seek(e, ino, 2 * bs + 1, SEEK_HOLE, &out), 0);
	assert_true(out == 3 * bs);
	assert_int_equal(f_seek(e, ino, 10 * bs - 1, SEEK_HOLE, &out), 0);
	assert_true(out == 10 * bs - 1);
}

static void sparse_far(void **state)
{
	kv_env *e = env_of(state);
	uint64_t ino = f_new(e, "f"), bs = kv_block_size(e), out, far = 1ULL << 40;
	size_t len = 3 * KV_BLOCK_SIZE_MAX + 100; /* zeros over several iovecs */
	unsigned char *got = malloc(len);
	struct iovec iov[2];
	struct kv_inode in;
	kv_txn *t;
	int cnt;

	assert_non_null(got);
	assert_int_equal(tu_pwrite(e, ino, far, "tail", 4), 0);
	assert_int_equal(tu_getattr(e, ino, &in), 0);
	assert_true(in.size == far + 4 && in.nblocks == 1);
	assert_int_equal(tu_pread(e, ino, far + 4 - len, len, got), (ssize_t)len);
	for (size_t i = 0; i < len - 4; i++)
		if (got[i])
			fail_msg("byte %zu of the hole is %d", i, got[i]);
	assert_memory_equal(got + len - 4, "tail", 4);
	assert_int_equal(f_seek(e, ino, 0, SEEK_DATA, &out), 0);
	assert_true(out == far / bs * bs);
	assert_int_equal(f_seek(e, ino, 5, SEEK_HOLE, &out), 0);
	assert_true(out == 5);
	/* too few iovecs for the range */
	assert_int_equal(kv_read_begin(e, &t), 0);
	assert_int_equal(kv_data_read(t, ino, in.size, far + 4 - len, len, iov, 2, &cnt), -E2BIG);
	kv_read_end(t);
	assert_int_equal(f_truncate(e, ino, 0), 0);
	assert_int_equal(tu_getattr(e, ino, &in), 0);
	assert_true(in.size == 0 && in.nblocks == 0);
	free(got);
}

static void too_big(void **state)
{
	kv_env *e = env_of(state);
	uint64_t ino = f_new(e, "f");
	struct kv_inode in;

	assert_int_equal(tu_pwrite(e, ino, INT64_MAX, "x", 1), -EFBIG);
	assert_int_equal(tu_pwrite(e, ino, (uint64_t)INT64_MAX + 1, "x", 1), -EFBIG);
	assert_int_equal(f_truncate(e, ino, (uint64_t)INT64_MAX + 1), -EFBIG);
	assert_int_equal(tu_getattr(e, ino, &in), 0);
	assert_true(in.size == 0 && in.nblocks == 0);
	assert_int_equal(tu_pwrite(e, ino, INT64_MAX - 1, "x", 1), 0);
	assert_int_equal(tu_getattr(e, ino, &in), 0);
	assert_true(in.size == (uint64_t)INT64_MAX && in.nblocks == 1);
}

/* Seeded random writes, truncates, fallocates (ZERO_RANGE too) and
 * punches, each checked in full. */
static void random_ops(void **state)
{
	kv_env *e = env_of(state);
	uint64_t ino = f_new(e, "f"), bs = kv_block_size(e), s = 20240501;
	struct model m;

	m_init(&m, bs);
	for (int step = 0; step < 300; step++) {
		uint64_t r = tu_rand(&s) % 10, off = tu_rand(&s) % (6 * bs);
		uint64_t len = 1 + tu_rand(&s) % (tu_rand(&s) % 4 ? bs / 2 : 2 * bs);
		if (r < 6) {
			mw(e, ino, &m, off, len, s);
			continue;
		}
		if (r < 8) {
			off = tu_rand(&s) % (7 * bs);
			assert_int_equal(f_truncate(e, ino, off), 0);
			m_truncate(&m, off);
		} else if (r == 9 && tu_rand(&s) % 2 && off + len <= NB * bs) {
			/* fallocate ZERO_RANGE, growing the size half the time */
			struct zero_arg z = {.ino = ino, .off = off, .end = off + len,
					     .grow = tu_rand(&s) % 2};
			assert_int_equal(kv_write(e, zero_apply, &z, 0), 0);
			if (z.grow && off + len > m.size) {
				memset(m.buf + m.size, 0, off + len - m.size);
				m.size = off + len;
			}
			if (off < m.size)
				m_zero(&m, off, off + len < m.size ? off + len : m.size);
			m_allocate(&m, off, off + len);
		} else if (r == 8 && off + len <= NB * bs) {
			/* fallocate, growing the size half the time */
			struct alloc_arg a = {.ino = ino, .off = off, .end = off + len, .max = 100,
					      .size = tu_rand(&s) % 2 ? off + len : 0};
			assert_int_equal(kv_write(e, alloc_apply, &a, 0), 0);
			if (a.size > m.size)
				m.size = a.size;
			m_allocate(&m, off, off + len);
		} else {
			assert_int_equal(f_punch(e, ino, off, len), 0);
			m_punch(&m, off, len);
		}
		check_model(e, ino, &m);
		check_range(e, ino, &m, tu_rand(&s) % (7 * bs), tu_rand(&s) % (3 * bs));
		check_seeks(e, ino, &m);
		for (int k = 0; k < 4; k++)
			check_seek(e, ino, &m, tu_rand(&s) % (m.size + bs));
	}
	free(m.buf);
}

static int small_block_setup(void **state)
{
	struct tu_image *im = calloc(1, sizeof(*im));
	struct kv_mkfs_opts o = {.block_size = KV_BLOCK_SIZE_MIN, .root_mode = 0755};

	*state = im;
	if (!im || tu_image_new(im, &o) || tu_image_open(im, NULL))
		return -1;
	return kv_block_size(im->env) == KV_BLOCK_SIZE_MIN ? 0 : -1;
}

static void block_get(void **state)
{
	kv_env *e = env_of(state);
	uint64_t ino = f_new(e, "f"), bs = kv_block_size(e);
	const void *data;
	size_t len;
	kv_txn *t;

	assert_int_equal(tu_pwrite(e, ino, 2 * bs, "abc", 3), 0);
	assert_int_equal(kv_read_begin(e, &t), 0);
	assert_int_equal(kv_block_get(t, ino, 2, &data, &len), 0);
	assert_int_equal(len, 3);
	assert_memory_equal(data, "abc", 3);
	assert_int_equal(kv_block_get(t, ino, 1, &data, &len), -ENOENT);
	assert_int_equal(kv_block_get(t, ino + 1, 2, &data, &len), -ENOENT);
	kv_read_end(t);
}

/* Close the image, change one raw record (tu_raw_edit), open it again. */
static void edit_closed(struct tu_image *im, enum kv_db db, const void *key, size_t klen,
			tu_edit_fn fn, void *arg)
{
	tu_image_close(im);
	assert_int_equal(tu_raw_edit(im->path, kv_db_names[db], key, klen, fn, arg), 0);
	assert_int_equal(tu_image_open(im, NULL), 0);
}

static void flip_byte(unsigned char *val, size_t len, void *arg)
{
	size_t at = *(size_t *)arg;

	assert_true(at < len);
	val[at] ^= 0x40;
}

/* A flipped byte in a stored block: reads and read-modify-writes of that
 * block fail with -EIO, the other blocks still read. */
static void corrupt_block(void **state)
{
	struct tu_image *im = *state;
	uint64_t ino = f_new(im->env, "f"), bs = kv_block_size(im->env);
	unsigned char *src = malloc(3 * bs), *got = malloc(3 * bs), kb[16];
	size_t at = 10, len;
	const void *data;
	kv_txn *t;
	int cnt;
	struct iovec iov[8];

	assert_non_null(src);
	assert_non_null(got);
	tu_fill(src, 3 * bs, 9);
	assert_int_equal(tu_pwrite(im->env, ino, 0, src, 3 * bs), 0);
	kv_put_be64(kb, ino);
	kv_put_be64(kb + 8, 1);
	edit_closed(im, KV_DB_DATA, kb, 16, flip_byte, &at);

	assert_int_equal(kv_read_begin(im->env, &t), 0);
	assert_int_equal(kv_block_get(t, ino, 1, &data, &len), -EIO);
	assert_int_equal(kv_block_get(t, ino, 0, &data, &len), 0);
	assert_int_equal(kv_data_read(t, ino, 3 * bs, bs + 5, 10, iov, 8, &cnt), -EIO);
	assert_int_equal(kv_data_read(t, ino, 3 * bs, 0, 3 * bs, iov, 8, &cnt), -EIO);
	kv_read_end(t);
	assert_int_equal(tu_pread(im->env, ino, 0, 3 * bs, got), -EIO);
	assert_int_equal(tu_pread(im->env, ino, 0, bs, got), (ssize_t)bs);
	assert_memory_equal(got, src, bs);
	assert_int_equal(tu_pread(im->env, ino, 2 * bs, bs, got), (ssize_t)bs);
	assert_memory_equal(got, src + 2 * bs, bs);
	/* a partial write must not build on the bad bytes */
	assert_int_equal(tu_pwrite(im->env, ino, bs + 1, "x", 1), -EIO);
	free(src);
	free(got);
}

/* kv_data_sums: one checksum per block the write starts on a boundary,
 * bound to the block's place, and no more than asked for. */
static void sums_per_block(void **state)
{
	kv_env *e = env_of(state);
	uint64_t bs = kv_block_size(e), sums[8];
	unsigned char *buf = malloc(4 * bs);

	assert_non_null(buf);
	tu_fill(buf, 4 * bs, 5);
	/* aligned: blocks 0-3, the last one short */
	assert_int_equal(kv_data_sums(e, 7, 0, buf, 3 * bs + 9, sums, 8), 4);
	assert_true(sums[0] == kv_block_csum(7, 0, buf, bs));
	assert_true(sums[3] == kv_block_csum(7, 3, buf + 3 * bs, 9));
	/* unaligned: the head of block 2 is not a whole segment */
	assert_int_equal(kv_data_sums(e, 7, 2 * bs + 1, buf, 2 * bs, sums, 8), 2);
	assert_true(sums[0] == kv_block_csum(7, 3, buf + bs - 1, bs));
	assert_true(sums[1] == kv_block_csum(7, 4, buf + 2 * bs - 1, 1));
	assert_int_equal(kv_data_sums(e, 7, 1, buf, bs - 1, sums, 8), 0);
	assert_int_equal(kv_data_sums(e, 7, 0, buf, 4 * bs, sums, 2), 2);
	assert_int_equal(kv_data_sums(e, 7, UINT64_MAX - 1, buf, 4, sums, 8), 0);
	free(buf);
}

static void set_size_zero(unsigned char *val, size_t len, void *arg)
{
	(void)arg;
	assert_true(len >= KV_INODE_LEN);
	kv_put_le64(val + 16, 0);
}

/* A write past the size skips looking its blocks up (none may be there);
 * on a damaged image where one is, the write still replaces it and counts
 * it once. */
static void stray_block_past_end(void **state)
{
	struct tu_image *im = *state;
	uint64_t ino = f_new(im->env, "f"), bs = kv_block_size(im->env);
	unsigned char *buf = malloc(3 * bs), *got = malloc(3 * bs), kb[8];
	struct kv_inode in;

	assert_non_null(buf);
	assert_non_null(got);
	tu_fill(buf, 3 * bs, 1);
	assert_int_equal(tu_pwrite(im->env, ino, 0, buf, 3 * bs), 0);
	kv_put_be64(kb, ino);
	edit_closed(im, KV_DB_INODE, kb, 8, set_size_zero, NULL);
	assert_int_equal(tu_getattr(im->env, ino, &in), 0);
	assert_true(in.size == 0 && in.nblocks == 3);

	tu_fill(buf, 3 * bs, 2);
	assert_int_equal(tu_pwrite_sums(im->env, ino, 0, buf, 2 * bs), 0);
	assert_int_equal(tu_pwrite(im->env, ino, 2 * bs, buf + 2 * bs, bs), 0);
	assert_int_equal(tu_getattr(im->env, ino, &in), 0);
	assert_true(in.size == 3 * bs && in.nblocks == 3);
	assert_int_equal(tu_pread(im->env, ino, 0, 3 * bs, got), (ssize_t)(3 * bs));
	assert_memory_equal(got, buf, 3 * bs);
	free(buf);
	free(got);
}

/* kv_inode_purge drops the blocks and xattrs of one inode, no other. */
struct purge_arg {
	uint64_t ino;
};

static int purge_apply(kv_txn *t, void *p)
{
	return kv_inode_purge(t, ((struct purge_arg *)p)->ino);
}

static void purge(void **state)
{
	kv_env *e = env_of(state);
	uint64_t a = f_new(e, "a"), b = f_new(e, "b"), bs = kv_block_size(e);
	unsigned char *buf = malloc(20 * bs), *got = malloc(20 * bs);
	struct purge_arg pa = {a};
	struct kv_inode in;
	struct kv_usage u;

	assert_non_null(buf);
	assert_non_null(got);
	tu_fill(buf, 20 * bs, 4);
	assert_int_equal(tu_pwrite(e, a, 0, buf, 20 * bs), 0);
	assert_int_equal(tu_pwrite(e, b, 0, buf, 3 * bs), 0);
	assert_int_equal(kv_usage_get(e, &u), 0);
	assert_true(u.blocks == 23);
	assert_int_equal(kv_write(e, purge_apply, &pa, 0), 0);
	assert_int_equal(kv_usage_get(e, &u), 0);
	assert_true(u.blocks == 3);
	assert_int_equal(tu_getattr(e, a, &in), -ENOENT);
	assert_int_equal(tu_pread(e, b, 0, 3 * bs, got), (ssize_t)(3 * bs));
	assert_memory_equal(got, buf, 3 * bs);
	free(buf);
	free(got);
}

/* A file that borrows blocks and stores some of its own: its purge drops
 * its own, and the blocks it borrowed stay with their home. */
static void purge_borrower(void **state)
{
	kv_env *e = env_of(state);
	uint64_t a = f_new(e, "a"), b = f_new(e, "b"), bs = kv_block_size(e);
	unsigned char *buf = malloc(4 * bs), *got = malloc(4 * bs);
	struct purge_arg pa = {b};
	struct kv_usage u;

	assert_non_null(buf);
	assert_non_null(got);
	tu_fill(buf, 4 * bs, 5);
	assert_int_equal(tu_pwrite(e, a, 0, buf, 4 * bs), 0);
	assert_int_equal(tu_share(e, b, 0, a, 0, 4), 0);
	assert_int_equal(tu_pwrite(e, b, 2 * bs, "own", 3), 0); /* a copy of its own */
	assert_int_equal(tu_pwrite(e, b, 6 * bs, "own", 3), 0); /* a block of its own */
	assert_int_equal(kv_usage_get(e, &u), 0);
	assert_true(u.blocks == 6);
	assert_int_equal(kv_write(e, purge_apply, &pa, 0), 0);
	assert_int_equal(kv_usage_get(e, &u), 0);
	assert_true(u.blocks == 4);
	assert_int_equal(tu_pread(e, a, 0, 4 * bs, got), (ssize_t)(4 * bs));
	assert_memory_equal(got, buf, 4 * bs);
	free(buf);
	free(got);
}

static void unwritten_count(kv_env *e, uint64_t want)
{
	struct kv_usage u;

	assert_int_equal(kv_usage_get(e, &u), 0);
	if (u.unwritten != want || u.promised_bytes != want * 4096)
		fail_msg("%llu unwritten blocks (%llu bytes promised), expected %llu",
			 (unsigned long long)u.unwritten, (unsigned long long)u.promised_bytes,
			 (unsigned long long)want);
}

/* fallocate's unwritten blocks: stored with no bytes, read as zeros,
 * counted in nblocks and in the image's count (kept across a close, and
 * by room.c as promised), made blocks of bytes by a write, dropped by a
 * punch or truncate only when it covers them whole, and by a purge. */
static void unwritten_blocks(void **state)
{
	struct tu_image *im = *state;
	kv_env *e = env_of(state);
	uint64_t ino = f_new(e, "f"), bs = kv_block_size(e);
	struct alloc_arg a = {.ino = ino, .off = 0, .end = 8 * bs, .size = 8 * bs, .max = 3};
	struct purge_arg pa = {ino};
	struct kv_super sb;
	struct model m;

	m_init(&m, bs);
	unwritten_count(e, 0);
	kv_super_get(e, &sb);
	assert_true(sb.feature_incompat == 0); /* set by the first one only */
	for (a.next = 0; a.next < a.end; a.off = a.next)
		assert_int_equal(kv_write(e, alloc_apply, &a, 0), 0);
	m.size = 8 * bs;
	m_allocate(&m, 0, 8 * bs);
	check_model(e, ino, &m);
	check_seeks(e, ino, &m);
	unwritten_count(e, 8);
	kv_super_get(e, &sb);
	assert_true(sb.feature_incompat == KV_FEATURE_INCOMPAT_UNWRITTEN);
	mw(e, ino, &m, 2 * bs + 10, 3, 5);   /* inside one: zeros around it */
	mw(e, ino, &m, 4 * bs, 2 * bs, 6);   /* two whole */
	unwritten_count(e, 5);
	assert_int_equal(f_punch(e, ino, 0, bs + 5), 0); /* block 0 whole, 1 in part */
	m_punch(&m, 0, bs + 5);
	check_model(e, ino, &m);
	unwritten_count(e, 4);
	assert_int_equal(f_truncate(e, ino, 6 * bs + 1), 0); /* block 7 goes, 6 stays */
	m_truncate(&m, 6 * bs + 1);
	check_model(e, ino, &m);
	check_seeks(e, ino, &m);
	unwritten_count(e, 3);
	tu_image_close(im);
	assert_int_equal(tu_image_open(im, NULL), 0);
	e = im->env;
	unwritten_count(e, 3);
	check_model(e, ino, &m);
	assert_int_equal(kv_write(e, purge_apply, &pa, 0), 0);
	unwritten_count(e, 0);
	free(m.buf);
}

/* An op that holds the writer's role until told to go on, so that the ops
 * submitted meanwhile run as one batch after it. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int entered, go, done;
} gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};

static int gate_apply(kv_txn *t, void *arg)
{
	(void)t;
	(void)arg;
	pthread_mutex_lock(&gate.lock);
	gate.entered = 1;
	pthread_cond_broadcast(&gate.cond);
	while (!gate.go)
		pthread_cond_wait(&gate.cond, &gate.lock);
	pthread_mutex_unlock(&gate.lock);
	return 0;
}

static void gate_done(void *arg, int rc)
{
	(void)arg;
	(void)rc;
	pthread_mutex_lock(&gate.lock);
	gate.done++;
	pthread_cond_broadcast(&gate.cond);
	pthread_mutex_unlock(&gate.lock);
}

static int fail_apply(kv_txn *t, void *arg)
{
	(void)t;
	(void)arg;
	return -ENOENT;
}

/* A batch [fallocate, an op that fails] runs flat, fails, and is run again
 * op by op: the feature bit the first run stored went with it, and the
 * second run must store it again (it once looked at its own memory, which
 * said it was set). */
static void unwritten_flag_replayed(void **state)
{
	struct tu_image *im = *state;
	kv_env *e = env_of(state);
	uint64_t ino = f_new(e, "f"), bs = kv_block_size(e);
	struct alloc_arg a = {.ino = ino, .end = 4 * bs, .size = 4 * bs, .max = 100};
	struct kv_op og = {.apply = gate_apply, .done = gate_done},
		     oa = {.apply = alloc_apply, .arg = &a, .done = gate_done},
		     of = {.apply = fail_apply, .done = gate_done};
	struct kv_super sb;

	assert_int_equal(kv_submit(e, &og), 0);
	pthread_mutex_lock(&gate.lock);
	while (!gate.entered)
		pthread_cond_wait(&gate.cond, &gate.lock);
	pthread_mutex_unlock(&gate.lock);
	assert_int_equal(kv_submit(e, &oa), 0);
	assert_int_equal(kv_submit(e, &of), 0);
	pthread_mutex_lock(&gate.lock);
	gate.go = 1;
	pthread_cond_broadcast(&gate.cond);
	while (gate.done < 3)
		pthread_cond_wait(&gate.cond, &gate.lock);
	pthread_mutex_unlock(&gate.lock);
	assert_int_equal(oa.rc, 0);
	assert_int_equal(of.rc, -ENOENT);
	tu_image_close(im);
	assert_int_equal(tu_image_open(im, NULL), 0);
	e = im->env;
	kv_super_get(e, &sb);
	assert_true(sb.feature_incompat == KV_FEATURE_INCOMPAT_UNWRITTEN);
	unwritten_count(e, 4);
}

/* fallocate's promise holds in the store itself: ops that each promise a
 * part (no caller looking at the room first) stop with -ENOSPC before the
 * promises pass the room, and then every block promised is written. */
static void unwritten_promise_kept(void **state)
{
	struct tu_image *im = *state;
	struct kv_open_opts o = {.max_size = 16ULL << 20};
	static unsigned char buf[16 * 4072];
	struct alloc_arg a;
	struct kv_usage u;
	uint64_t ino, bs, off, n;
	kv_env *e;
	int rc = 0;

	assert_int_equal(tu_image_open(im, &o), 0);
	e = im->env;
	bs = kv_block_size(e);
	ino = f_new(e, "f");
	a = (struct alloc_arg){.ino = ino, .end = 6000 * bs, .size = 6000 * bs, .max = 700};
	for (a.next = 0; a.next < a.end && rc == 0; a.off = a.next)
		rc = kv_write(e, alloc_apply, &a, 0);
	assert_int_equal(rc, -ENOSPC);
	assert_int_equal(kv_usage_get(e, &u), 0);
	n = u.unwritten;
	assert_true(n > 0 && n < 6000);
	memset(buf, 7, sizeof(buf));
	for (off = 0; off < n * bs; off += 16 * bs) {
		/* in pieces, as fs/file.c's write_in_pieces on a full image */
		size_t len = n * bs - off < 16 * bs ? n * bs - off : 16 * bs;

		rc = tu_pwrite_daemon(e, ino, off, buf, len);
		if (rc)
			fail_msg("write at block %llu of the %llu promised: %d",
				 (unsigned long long)(off / bs), (unsigned long long)n, rc);
	}
	unwritten_count(e, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(small_write, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(holes_and_tails, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(overwrite_middle, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(unaligned_spanning, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(truncate_down_up, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(punch_hole, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(allocate_holes, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(allocate_holes, small_block_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(unwritten_blocks, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(unwritten_blocks, small_block_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(unwritten_flag_replayed, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(unwritten_promise_kept, tu_setup_closed, tu_teardown),
	        cmocka_unit_test_setup_teardown(seek_cases, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(sparse_far, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(too_big, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(random_ops, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(random_ops, small_block_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(holes_and_tails, small_block_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(block_get, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(corrupt_block, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(purge, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(purge_borrower, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(sums_per_block, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(stray_block_past_end, tu_setup, tu_teardown),
	};

	return cmocka_run_group_tests_name("data", tests, NULL, NULL);
}
