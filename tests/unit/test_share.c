/*
 * test_share.c - shared blocks (kv/share.c) and compressed ones (kv/zstd.c):
 * kv_data_share, then every change of a borrower or a home (write,
 * truncate, punch, zero, allocate, purge), a third of the writes
 * compressed, against the model of data_model.c, and the records left
 * behind checked after each op (extent and lend pairs, homes stored, no
 * block kept that no one reads).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "data_model.h"
#include "kv_int.h"
#include "testutil.h"

#define BS 1024 /* the smallest block size: more blocks in the models */
#define NF 4    /* files of the random test */

static int setup_small(void **state)
{
	struct tu_image *im = calloc(1, sizeof(*im));
	struct kv_mkfs_opts o = {.block_size = BS, .root_mode = 0755};

	if (!im || tu_image_new(im, &o) || tu_image_open(im, NULL))
		return -1;
	*state = im;
	return 0;
}

static kv_env *env_of(void **state)
{
	return ((struct tu_image *)*state)->env;
}

/* The model of a share: src's written blocks, whole or short, read the
 * same in dst, its holes and unwritten blocks are holes there. */
static void m_share(struct model *d, uint64_t didx, const struct model *s, uint64_t sidx,
		    uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		uint64_t si = sidx + i, di = didx + i;

		memset(d->buf + di * d->bs, 0, d->bs);
		d->unw[di] = 0;
		d->blen[di] = s->unw[si] ? 0 : s->blen[si];
		memcpy(d->buf + di * d->bs, s->buf + si * s->bs, d->blen[di]);
	}
	if ((didx + n) * d->bs > d->size)
		d->size = (didx + n) * d->bs;
}

static int purge_apply(kv_txn *t, void *p)
{
	return kv_inode_purge(t, *(uint64_t *)p);
}

/* Bytes that compress: lines of text, varied by seed. */
static void text_fill(unsigned char *buf, size_t len, uint64_t seed)
{
	size_t n = 0;

	while (n < len) {
		char line[64];
		int k = snprintf(line, sizeof(line), "line %llu of a file that compresses\n",
				 (unsigned long long)(seed + n / 40));

		memcpy(buf + n, line, len - n < (size_t)k ? len - n : (size_t)k);
		n += (size_t)k;
	}
}

/* tu_raw_edit: a compressed block's frame spoilt past its header, its
 * checksum made to hold again. */
static void spoil_frame(unsigned char *val, size_t len, void *arg)
{
	const uint64_t *key = arg;

	assert_true(len > 20 && kv_get_le32(val) == 0xFD2FB528);
	memset(val + 12, 0xAB, len - 12 - KV_CSUM_LEN);
	kv_put_le64(val + len - KV_CSUM_LEN, kv_block_zcsum(key[0], key[1], val, len - KV_CSUM_LEN));
}

/* How many of the image's data records are stored compressed. */
static uint64_t compressed_blocks(kv_env *e)
{
	const void *k, *v;
	size_t kl, vl, len;
	uint64_t n = 0;
	kv_iter *it;
	kv_txn *t;

	assert_int_equal(kv_read_begin(e, &t), 0);
	assert_int_equal(kv_iter_open(t, KV_DB_DATA, &it), 0);
	while (kv_iter_next(it, &k, &kl, &v, &vl) == 0)
		n += kv_check_block(e, kv_get_be64(k), kv_get_be64((const unsigned char *)k + 8), v,
				    vl, &len) == 1;
	kv_iter_close(it);
	kv_read_end(t);
	return n;
}

/* ------------------------------------------------ record checks -- */

static int live(const uint64_t *inos, int n, uint64_t ino)
{
	for (int i = 0; i < n; i++)
		if (inos[i] == ino)
			return 1;
	return 0;
}

static int has_record(kv_txn *t, enum kv_db db, const void *key, size_t klen,
		      const void *val, size_t vlen)
{
	kv_val k = {klen, (void *)key}, v;

	if (kv_eget(t, db, &k, &v))
		return 0;
	return !val || (v.size == vlen && memcmp(v.data, val, vlen) == 0);
}

/* Invariants 1-3 of share.c over the whole image, and no data record a
 * file does not read: each belongs to a live file, or is named by a lend
 * record (a deleted home's). */
static void check_records(kv_env *e, const uint64_t *inos, int n)
{
	const uint64_t bs = kv_block_size(e);
	unsigned char kb[32], vb[KV_EXTENT_VLEN];
	const void *k, *v;
	size_t kl, vl, ekl, evl;
	struct kv_extent x;
	struct kv_inode in;
	kv_iter *it;
	kv_txn *t;

	assert_int_equal(kv_read_begin(e, &t), 0);
	assert_int_equal(kv_iter_open(t, KV_DB_EXTENT, &it), 0);
	while (kv_iter_next(it, &k, &kl, &v, &vl) == 0) {
		assert_int_equal(kv_decode_extent(KV_DB_EXTENT, k, kl, v, vl, &x), 0);
		kv_encode_extent(KV_DB_LEND, &x, kb, &ekl, vb, &evl);
		if (!has_record(t, KV_DB_LEND, kb, ekl, vb, evl))
			fail_msg("extent %llu/%llu: no lend record", (unsigned long long)x.ino,
				 (unsigned long long)x.first);
		assert_true(live(inos, n, x.ino));
		assert_int_equal(kv_inode_get(t, x.ino, &in), 0);
		assert_true(in.flags & KV_INODE_BORROWS);
		assert_true((x.first + x.count) * bs <= in.size + bs - 1);
		for (uint64_t i = 0; i < x.count; i++) {
			const void *data;
			size_t len;
			unsigned char dk[16];

			kv_put_be64(dk, x.ino);
			kv_put_be64(dk + 8, x.first + i);
			if (has_record(t, KV_DB_DATA, dk, 16, NULL, 0))
				fail_msg("inode %llu block %llu: stored and borrowed",
					 (unsigned long long)x.ino, (unsigned long long)(x.first + i));
			assert_int_equal(kv_block_get(t, x.home, x.hfirst + i, &data, &len), 0);
			assert_true((x.first + i) * bs + len <= in.size); /* invariant 3 */
		}
		if (live(inos, n, x.home)) {
			assert_int_equal(kv_inode_get(t, x.home, &in), 0);
			assert_true(in.flags & KV_INODE_LENDS);
		}
	}
	kv_iter_close(it);
	assert_int_equal(kv_iter_open(t, KV_DB_LEND, &it), 0);
	while (kv_iter_next(it, &k, &kl, &v, &vl) == 0) {
		assert_int_equal(kv_decode_extent(KV_DB_LEND, k, kl, v, vl, &x), 0);
		kv_encode_extent(KV_DB_EXTENT, &x, kb, &ekl, vb, &evl);
		assert_true(has_record(t, KV_DB_EXTENT, kb, ekl, vb, evl));
	}
	kv_iter_close(it);
	assert_int_equal(kv_iter_open(t, KV_DB_DATA, &it), 0);
	while (kv_iter_next(it, &k, &kl, &v, &vl) == 0) {
		uint64_t ino = kv_get_be64(k), idx = kv_get_be64((const unsigned char *)k + 8);
		uint64_t end, next;

		if (live(inos, n, ino))
			continue;
		if (kv_lend_covered(t, ino, idx, &end, &next) != 1)
			fail_msg("block %llu of deleted inode %llu: kept, no one borrows it",
				 (unsigned long long)idx, (unsigned long long)ino);
	}
	kv_iter_close(it);
	kv_read_end(t);
}

/* The blocks of a file as the model and the store hold them (a trace). */
static void show(kv_env *e, uint64_t ino, const struct model *m)
{
	kv_txn *t;

	assert_int_equal(kv_read_begin(e, &t), 0);
	for (int i = 0; i < NB; i++) {
		unsigned char kb[16];
		kv_val k = {16, kb}, v;
		struct kv_extent x;
		uint64_t next;

		kv_put_be64(kb, ino);
		kv_put_be64(kb + 8, (uint64_t)i);
		fprintf(stderr, "block %d: model %zu%s; store ", i, m->blen[i], m->unw[i] ? " unw" : "");
		if (kv_eget(t, KV_DB_DATA, &k, &v) == 0)
			fprintf(stderr, "own %zu\n", v.size - KV_CSUM_LEN);
		else if (kv_ext_find(t, ino, (uint64_t)i, &x, &next) == 0)
			fprintf(stderr, "borrowed from %llu\n", (unsigned long long)x.home);
		else
			fprintf(stderr, "hole\n");
	}
	kv_read_end(t);
}

/* Every file against its model; the image's unwritten count against all. */
static void check_all(kv_env *e, const uint64_t *inos, struct model *m, int n)
{
	unsigned char *got = malloc(NB * BS + 1);
	uint64_t unw = 0;
	struct kv_inode in;
	struct kv_usage u;

	assert_non_null(got);
	for (int i = 0; i < n; i++) {
		assert_int_equal(tu_getattr(e, inos[i], &in), 0);
		assert_true(in.size == m[i].size);
		if (in.nblocks != m_nblocks(&m[i]) && getenv("KVFS_SHARE_TRACE"))
			show(e, inos[i], &m[i]);
		if (in.nblocks != m_nblocks(&m[i]))
			fail_msg("file %d: %llu blocks, expected %llu", i,
				 (unsigned long long)in.nblocks, (unsigned long long)m_nblocks(&m[i]));
		assert_int_equal(tu_pread(e, inos[i], 0, NB * BS + 1, got), (ssize_t)m[i].size);
		if (m[i].size && memcmp(got, m[i].buf, m[i].size) != 0)
			fail_msg("file %d: bytes differ", i);
		unw += m_unwritten(&m[i]);
	}
	assert_int_equal(kv_usage_get(e, &u), 0);
	assert_true(u.unwritten == unw);
	free(got);
	check_records(e, inos, n);
}

/* ------------------------------------------------------------ tests -- */

/* A large share: extents of at most KV_EXTENT_MAX blocks, no data moved;
 * the copy reads the same, a write to either leaves the other alone, and
 * deleting the original keeps the blocks the copy reads, then the last
 * borrower's delete drops them. */
static void share_large(void **state)
{
	kv_env *e = env_of(state);
	const uint64_t nb = 3 * KV_EXTENT_MAX + 17, len = nb * BS + 100;
	unsigned char *buf = malloc(len), *got = malloc(len), patch[BS * 2];
	uint64_t a = f_new(e, "a"), b = f_new(e, "b"), c = f_new(e, "c"), inos[3] = {a, b, c};
	struct kv_inode in;
	struct kv_usage u0, u1;
	kv_txn *t;

	assert_non_null(buf);
	assert_non_null(got);
	tu_fill(buf, len, 1);
	tu_fill(patch, sizeof(patch), 2);
	assert_int_equal(tu_pwrite(e, a, 0, buf, len), 0);
	assert_int_equal(kv_usage_get(e, &u0), 0);
	assert_int_equal(tu_share(e, b, 0, a, 0, nb), 0);
	assert_int_equal(tu_share(e, a, 0, a, 0, nb), -EINVAL);
	assert_int_equal(kv_usage_get(e, &u1), 0);
	assert_true(u1.blocks == u0.blocks); /* no data record added */
	assert_int_equal(kv_read_begin(e, &t), 0);
	{
		uint64_t n;

		assert_int_equal(kv_db_count(t, KV_DB_EXTENT, &n), 0);
		assert_true(n == (nb + KV_EXTENT_MAX - 1) / KV_EXTENT_MAX);
	}
	kv_read_end(t);
	assert_int_equal(tu_getattr(e, b, &in), 0);
	assert_true(in.size == nb * BS && in.nblocks == nb);
	assert_int_equal(tu_pread(e, b, 0, len, got), (ssize_t)(nb * BS));
	assert_memory_equal(got, buf, nb * BS);
	/* a copy of the copy names the original's blocks (one step) */
	assert_int_equal(tu_share(e, c, 5, b, 0, nb), 0);
	check_records(e, inos, 3);
	/* writes to the copy and to the original, each across a block edge */
	assert_int_equal(tu_pwrite(e, b, 300 * BS + 7, patch, sizeof(patch)), 0);
	assert_int_equal(tu_pwrite(e, a, 10 * BS - 3, patch, sizeof(patch)), 0);
	assert_int_equal(tu_pread(e, c, 5 * BS, nb * BS, got), (ssize_t)(nb * BS));
	assert_memory_equal(got, buf, nb * BS);
	memcpy(buf + 300 * BS + 7, patch, sizeof(patch));
	assert_int_equal(tu_pread(e, b, 0, nb * BS, got), (ssize_t)(nb * BS));
	assert_memory_equal(got, buf, nb * BS);
	check_records(e, inos, 3);
	/* the original goes: the copies read on, from its kept blocks */
	assert_int_equal(kv_write(e, purge_apply, &a, 0), 0);
	inos[0] = UINT64_MAX;
	check_records(e, inos, 3);
	assert_int_equal(tu_pread(e, b, 0, nb * BS, got), (ssize_t)(nb * BS));
	assert_memory_equal(got, buf, nb * BS);
	assert_int_equal(kv_write(e, purge_apply, &b, 0), 0);
	assert_int_equal(kv_write(e, purge_apply, &c, 0), 0);
	assert_int_equal(kv_usage_get(e, &u1), 0);
	assert_true(u1.blocks == 0);
	assert_int_equal(kv_read_begin(e, &t), 0);
	{
		uint64_t n1, n2;

		assert_int_equal(kv_db_count(t, KV_DB_EXTENT, &n1), 0);
		assert_int_equal(kv_db_count(t, KV_DB_LEND, &n2), 0);
		assert_true(n1 == 0 && n2 == 0);
	}
	kv_read_end(t);
	free(buf);
	free(got);
}

/* Blocks stored compressed: they read back, a write into one keeps the
 * rest of its bytes, a truncate into one trims it, a share of one reads
 * the same, the feature bit is set; random bytes stay as they are; a frame
 * that does not decompress under a valid checksum reads as -EIO. */
static void compressed(void **state)
{
	kv_env *e = env_of(state);
	uint64_t a = f_new(e, "a"), b = f_new(e, "b"), r = f_new(e, "r"), inos[3] = {a, b, r};
	unsigned char buf[8 * BS], got[8 * BS + 1], rnd[4 * BS];
	struct kv_super sb;

	text_fill(buf, sizeof(buf), 1);
	tu_fill(rnd, sizeof(rnd), 2);
	assert_int_equal(tu_pwrite_z(e, a, 0, buf, sizeof(buf), 3), 0);
	assert_true(compressed_blocks(e) == 8);
	assert_int_equal(tu_pwrite_z(e, r, 0, rnd, sizeof(rnd), 3), 0);
	assert_true(compressed_blocks(e) == 8); /* random bytes: as they are */
	kv_super_get(e, &sb);
	assert_true(sb.feature_incompat & KV_FEATURE_INCOMPAT_COMPRESSED);
	assert_int_equal(tu_pread(e, a, 0, sizeof(got), got), (ssize_t)sizeof(buf));
	assert_memory_equal(got, buf, sizeof(buf));
	/* a write into the middle of one, across into the next */
	memcpy(buf + BS + 100, "XYZ", 3);
	memcpy(buf + 2 * BS - 2, "abcd", 4);
	assert_int_equal(tu_pwrite(e, a, BS + 100, "XYZ", 3), 0);
	assert_true(compressed_blocks(e) == 7); /* merged by the writer: as it is */
	kv_set_compress(e, 3); /* the mount compresses: the writer's merges too */
	assert_int_equal(tu_pwrite(e, a, 2 * BS - 2, "abcd", 4), 0);
	assert_true(compressed_blocks(e) == 8); /* blocks 1 and 2 merged, compressed */
	assert_int_equal(tu_pread(e, a, 0, sizeof(got), got), (ssize_t)sizeof(buf));
	assert_memory_equal(got, buf, sizeof(buf));
	/* shared: the borrower reads the compressed home blocks */
	assert_int_equal(tu_share(e, b, 0, a, 0, 8), 0);
	assert_int_equal(tu_pread(e, b, 0, sizeof(got), got), (ssize_t)sizeof(buf));
	assert_memory_equal(got, buf, sizeof(buf));
	/* a truncate into one: trimmed (and the borrower keeps its bytes) */
	assert_int_equal(f_truncate(e, a, 5 * BS + 17), 0);
	assert_int_equal(tu_pread(e, a, 0, sizeof(got), got), (ssize_t)(5 * BS + 17));
	assert_memory_equal(got, buf, 5 * BS + 17);
	assert_int_equal(tu_pread(e, b, 0, sizeof(got), got), (ssize_t)sizeof(buf));
	assert_memory_equal(got, buf, sizeof(buf));
	check_records(e, inos, 3);
	/* a frame that does not decompress, under a checksum that holds */
	{
		struct tu_image *im = *state;
		uint64_t key[2] = {a, 3}; /* inode, block: kept compressed so far */
		unsigned char kb[16];

		kv_put_be64(kb, a);
		kv_put_be64(kb + 8, 3);
		tu_image_close(im);
		assert_int_equal(tu_raw_edit(im->path, kv_db_names[KV_DB_DATA], kb, 16, spoil_frame,
					     key), 0);
		assert_int_equal(tu_image_open(im, NULL), 0);
		e = im->env;
		assert_int_equal(tu_pread(e, a, 3 * BS, 10, got), -EIO);
		assert_int_equal(tu_pread(e, a, 0, 10, got), 10); /* the others read */
	}
}

/* tu_raw_edit: one bit of a value's checksum flipped. */
static void spoil_sum(unsigned char *val, size_t len, void *arg)
{
	(void)arg;
	val[len - 1] ^= 1;
}

/* A compressed block whose checksum fails: a write or a punch over its
 * start, shorter than its data but longer than its frame, is -EIO (the
 * rest of its bytes cannot be kept), not a short block put in its place
 * that reads zeros there; a write over all of it replaces it. */
static void damaged_frame(void **state)
{
	struct tu_image *im = *state;
	kv_env *e = im->env;
	uint64_t a = f_new(e, "a");
	unsigned char buf[2 * BS], got[2 * BS], kb[16];

	text_fill(buf, sizeof(buf), 1);
	assert_int_equal(tu_pwrite_z(e, a, 0, buf, sizeof(buf), 3), 0);
	assert_true(compressed_blocks(e) == 2);
	tu_image_close(im);
	kv_put_be64(kb, a);
	kv_put_be64(kb + 8, 0);
	assert_int_equal(tu_raw_edit(im->path, kv_db_names[KV_DB_DATA], kb, 16, spoil_sum, NULL),
			 0);
	assert_int_equal(tu_image_open(im, NULL), 0);
	e = im->env;
	assert_int_equal(tu_pread(e, a, 0, 10, got), -EIO);
	assert_int_equal(tu_pwrite(e, a, 0, buf, BS - 1), -EIO);
	assert_int_equal(f_punch(e, a, 0, BS - 1), -EIO);
	assert_int_equal(tu_pread(e, a, BS - 10, 10, got), -EIO);
	assert_int_equal(tu_pwrite(e, a, 0, buf, BS), 0);
	assert_int_equal(tu_pread(e, a, 0, sizeof(got), got), (ssize_t)sizeof(got));
	assert_memory_equal(got, buf, sizeof(buf));
}

struct zwrite {
	uint64_t ino;
	const unsigned char *buf;
	size_t len;
	uint64_t sums[8];
	size_t nsums;
	struct kv_zblocks z;
};

/* A compressed write that its op then fails after all: rolled back. */
static int zwrite_fail_apply(kv_txn *t, void *p)
{
	struct zwrite *a = p;
	struct kv_inode in;
	int rc = kv_inode_get(t, a->ino, &in);

	if (!rc)
		rc = kv_data_write_sums(t, &in, 0, a->buf, a->len, a->sums, a->nsums, &a->z);
	return rc ? rc : -EIO;
}

/* The first op that stored compressed blocks was rolled back (as an op
 * short of room is, then run again): the write that stores them for good
 * still sets the feature bit in the image, not only in memory. */
static void compressed_bit_replayed(void **state)
{
	struct tu_image *im = *state;
	kv_env *e = im->env;
	uint64_t a = f_new(e, "a");
	unsigned char buf[4 * BS];
	struct zwrite w = {.ino = a, .buf = buf, .len = sizeof(buf)};
	struct kv_super sb;

	text_fill(buf, sizeof(buf), 1);
	w.nsums = kv_data_sums(e, a, 0, buf, sizeof(buf), w.sums, 8);
	assert_true(kv_data_compress(e, a, 0, buf, sizeof(buf), 3, w.sums, w.nsums, &w.z) == 4);
	assert_int_equal(kv_write(e, zwrite_fail_apply, &w, 0), -EIO);
	assert_true(compressed_blocks(e) == 0);
	assert_int_equal(tu_pwrite_z(e, a, 0, buf, sizeof(buf), 3), 0);
	assert_true(compressed_blocks(e) == 4);
	tu_image_close(im);
	assert_int_equal(tu_image_open(im, NULL), 0);
	kv_super_get(im->env, &sb);
	assert_true(sb.feature_incompat & KV_FEATURE_INCOMPAT_COMPRESSED);
}

/* Random ops on NF small files, shares among them, against the models. */
static void share_random(void **state)
{
	kv_env *e = env_of(state);
	struct model m[NF];
	uint64_t inos[NF], s = getenv("KVFS_SHARE_SEED") ? strtoull(getenv("KVFS_SHARE_SEED"), 0, 0)
							 : 12345;
	unsigned char src[NB * BS];
	char name[16];
	int gen = 0, ops = getenv("KVFS_SHARE_OPS") ? atoi(getenv("KVFS_SHARE_OPS")) : 4000;
	int trace = getenv("KVFS_SHARE_TRACE") != NULL; /* each op on stderr */

	/* the writer compresses the blocks it merges too, where they shrink */
	kv_set_compress(e, 3);
	for (int i = 0; i < NF; i++) {
		snprintf(name, sizeof(name), "f%d", gen++);
		inos[i] = f_new(e, name);
		m_init(&m[i], BS);
	}
	for (int op = 0; op < ops; op++) {
		int f = (int)(tu_rand(&s) % NF), g = (int)(tu_rand(&s) % NF);
		unsigned r = (unsigned)(tu_rand(&s) % 100);
		uint64_t off = tu_rand(&s) % (NB * BS), len = tu_rand(&s) % (NB * BS - off + 1);

		if (trace)
			fprintf(stderr, "op %d: r=%u f=%d g=%d off=%llu len=%llu\n", op, r, f, g,
				(unsigned long long)off, (unsigned long long)len);

		if (r < 30) { /* a write: a third of them compressed where they shrink */
			if (len == 0)
				len = 1;
			if (off + len > NB * BS)
				off = NB * BS - len;
			if (r % 3 == 0) {
				text_fill(src, len, tu_rand(&s));
				assert_int_equal(tu_pwrite_z(e, inos[f], off, src, len, 3), 0);
			} else {
				tu_fill(src, len, tu_rand(&s));
				assert_int_equal(tu_pwrite(e, inos[f], off, src, len), 0);
			}
			m_write(&m[f], off, src, len);
		} else if (r < 60) { /* a share of whole blocks within src's size */
			uint64_t whole = m[g].size / BS, sidx, didx, n;

			if (f == g || whole == 0)
				continue;
			sidx = tu_rand(&s) % whole;
			n = 1 + tu_rand(&s) % (whole - sidx);
			didx = tu_rand(&s) % NB;
			if (didx + n > NB)
				n = NB - didx;
			assert_int_equal(tu_share(e, inos[f], didx, inos[g], sidx, n), 0);
			m_share(&m[f], didx, &m[g], sidx, n);
		} else if (r < 70) {
			assert_int_equal(f_truncate(e, inos[f], off), 0);
			m_truncate(&m[f], off);
		} else if (r < 80) {
			assert_int_equal(f_punch(e, inos[f], off, len), 0);
			m_punch(&m[f], off, len);
		} else if (r < 85) {
			struct zero_arg z = {.ino = inos[f], .off = off, .end = off + len};

			assert_int_equal(kv_write(e, zero_apply, &z, 0), 0);
			if (off < m[f].size)
				m_zero(&m[f], off, off + len < m[f].size ? off + len : m[f].size);
			m_allocate(&m[f], off, off + len);
		} else if (r < 90) {
			struct alloc_arg a = {.ino = inos[f], .off = off, .end = off + len,
					      .max = UINT64_MAX};

			assert_int_equal(kv_write(e, alloc_apply, &a, 0), 0);
			m_allocate(&m[f], off, off + len);
		} else if (r < 95) { /* deleted, and a new file in its place */
			assert_int_equal(kv_write(e, purge_apply, &inos[f], 0), 0);
			snprintf(name, sizeof(name), "f%d", gen++);
			inos[f] = f_new(e, name);
			free(m[f].buf);
			m_init(&m[f], BS);
		} else {
			check_seeks(e, inos[f], &m[f]);
		}
		check_all(e, inos, m, NF);
	}
	for (int i = 0; i < NF; i++) {
		assert_int_equal(kv_write(e, purge_apply, &inos[i], 0), 0);
		inos[i] = UINT64_MAX;
		free(m[i].buf);
	}
	check_records(e, inos, NF);
	{
		struct kv_usage u;

		assert_int_equal(kv_usage_get(e, &u), 0);
		assert_true(u.blocks == 0); /* nothing kept that no one reads */
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(share_large, setup_small, tu_teardown),
	        cmocka_unit_test_setup_teardown(compressed, setup_small, tu_teardown),
	        cmocka_unit_test_setup_teardown(damaged_frame, setup_small, tu_teardown),
	        cmocka_unit_test_setup_teardown(compressed_bit_replayed, setup_small, tu_teardown),
	        cmocka_unit_test_setup_teardown(share_random, setup_small, tu_teardown),
	};

	return cmocka_run_group_tests_name("share", tests, NULL, NULL);
}
