/*
 * zstd.c - data blocks stored compressed: the value of such a block is a
 * zstd frame holding its data (the frame's content size is the data's
 * length) and a checksum of the frame's bytes, seeded apart from a plain
 * block's (kv_block_zcsum): a reader tells the kinds apart by which of the
 * two checksums holds (codec.c, kv_block_verify), so a plain block's value
 * is as it always was.
 *
 * Invariants:
 *  1. A block is stored compressed only where that takes less of the image
 *     (worth()): a value up to KV_LEAF_MAX bytes packs into a leaf page
 *     beside others, a larger one takes whole overflow pages.
 *  2. Compression runs in the writing thread before it takes the writer's
 *     role (kv_data_compress), with that thread's own context and buffer,
 *     for the blocks a write covers whole. A block a write covers in part
 *     is merged by the role (read-modify-write), which compresses it then
 *     at level 1, the fastest (kv_z_pack_merged): most writes of a tree's
 *     files (tar's 10 KiB, cp's 128 KiB) end or begin inside a block.
 *  3. Decompressed bytes go to the transaction's scratch (struct
 *     kv_zscratch): a read transaction's is its thread's reader's, the
 *     writer's role's is env->z.scratch. A kv_data_read keeps every block it
 *     decompressed until the next one (its iovecs point there); any other
 *     caller gets the one-block buffer, valid until the next block.
 *     Buffers grow when they must and are kept: no allocation once warm.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <zstd.h>

#include "kv_int.h"

/* The largest value LMDB keeps in a leaf page of 4 KiB beside others (a
 * node of a 16-byte key; larger ones take overflow pages of their own). */
#define KV_LEAF_MAX 2014

/* The image bytes a value of vlen bytes takes, about (invariant 1). */
static size_t cost(size_t vlen)
{
	return vlen <= KV_LEAF_MAX ? vlen + 24 : (vlen + 16 + 4095) / 4096 * 4096;
}

static int worth(size_t zlen, size_t len)
{
	return cost(zlen + KV_CSUM_LEN) < cost(len + KV_CSUM_LEN);
}

/* ------------------------------------------------------------ reading -- */

static int grow(unsigned char **buf, size_t *cap, size_t need)
{
	unsigned char *p;

	if (*cap >= need)
		return 0;
	p = realloc(*buf, need);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = need;
	return 0;
}

void kv_z_begin_read(kv_txn *t, size_t len)
{
	struct kv_zscratch *z = kv_txn_z(t);
	size_t bs = t->env->super.block_size, need = (len / bs + 2) * bs;

	z->used = 0;
	z->reading = 1;
	/* an image without compressed blocks needs no room (the bit is set in
	 * the op that stores the first, before any reader can see it); a
	 * failure shows when a block needs the room (-ENOMEM then) */
	if (kv_has_feature(t->env, KV_FEATURE_INCOMPAT_COMPRESSED))
		(void)grow(&z->buf, &z->cap, need);
}

void kv_z_end_read(kv_txn *t)
{
	kv_txn_z(t)->reading = 0;
}

int kv_block_unz(kv_txn *t, uint64_t ino, uint64_t idx, kv_val *v, size_t len)
{
	struct kv_zscratch *z = kv_txn_z(t);
	size_t bs = t->env->super.block_size, got;
	unsigned char *out;

	if (!z->dctx && !(z->dctx = ZSTD_createDCtx()))
		return -ENOMEM;
	if (z->reading) {
		/* grown only while empty: a move would leave the read's earlier
		 * blocks behind (kv_z_begin_read made the room it needs) */
		if (z->used + bs > z->cap && (z->used || grow(&z->buf, &z->cap, bs) != 0))
			return -ENOMEM;
		out = z->buf + z->used;
		z->used += bs;
	} else {
		if (grow(&z->one, &z->one_cap, bs) != 0)
			return -ENOMEM;
		out = z->one;
	}
	got = ZSTD_decompressDCtx(z->dctx, out, len, v->data, v->size - KV_CSUM_LEN);
	if (ZSTD_isError(got) || got != len) {
		kv_log("inode %llu block %llu: its compressed bytes do not decompress (%s)",
		       (unsigned long long)ino, (unsigned long long)idx,
		       ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short");
		return -EIO;
	}
	v->data = out;
	v->size = len + KV_CSUM_LEN; /* as a plain block's, for the callers */
	return 0;
}

void kv_z_free(struct kv_zscratch *z)
{
	ZSTD_freeDCtx(z->dctx);
	ZSTD_freeCCtx(z->cctx);
	free(z->buf);
	free(z->one);
	free(z->pack);
	memset(z, 0, sizeof(*z));
}

/* ------------------------------------------------ the writer's merges -- */

void kv_set_compress(kv_env *e, int level)
{
	atomic_store(&e->z.level, level);
}

int kv_z_pack_merged(kv_txn *t, uint64_t ino, uint64_t idx, const void *data, size_t len,
		     const void **out, size_t *olen, uint64_t *sum)
{
	struct kv_zscratch *z = &t->env->z.scratch;
	size_t bound = ZSTD_compressBound(len), zl;

	if (!atomic_load(&t->env->z.level) || !t->write)
		return 0;
	if (!z->cctx && !(z->cctx = ZSTD_createCCtx()))
		return 0;
	if (grow(&z->pack, &z->pack_cap, bound) != 0)
		return 0;
	/* level 1 whatever the mount's: the writer's time is every writer's */
	zl = ZSTD_compressCCtx(z->cctx, z->pack, bound, data, len, 1);
	if (ZSTD_isError(zl) || !worth(zl, len))
		return 0;
	*out = z->pack;
	*olen = zl;
	*sum = kv_block_zcsum(ino, idx, z->pack, zl);
	return 1;
}

/* ------------------------------------------------------------ writing -- */

/* The calling thread's compression state (invariant 2). */
struct zthread {
	ZSTD_CCtx *cctx;
	unsigned char *buf;
	size_t cap;
	uint32_t *zoff, *zlen;
	size_t nmax;
};

static pthread_key_t zkey;
static pthread_once_t zonce = PTHREAD_ONCE_INIT;

static void zthread_free(void *p)
{
	struct zthread *z = p;

	ZSTD_freeCCtx(z->cctx);
	free(z->buf);
	free(z->zoff);
	free(z->zlen);
	free(z);
}

static void zkey_make(void)
{
	pthread_key_create(&zkey, zthread_free);
}

static struct zthread *zthread_get(size_t nblocks, size_t bytes)
{
	struct zthread *z;

	pthread_once(&zonce, zkey_make);
	z = pthread_getspecific(zkey);
	if (!z) {
		z = calloc(1, sizeof(*z));
		if (!z || !(z->cctx = ZSTD_createCCtx())) {
			free(z);
			return NULL;
		}
		pthread_setspecific(zkey, z);
	}
	if (grow(&z->buf, &z->cap, bytes) != 0)
		return NULL;
	if (z->nmax < nblocks) {
		uint32_t *a = realloc(z->zoff, nblocks * sizeof(*a)), *b;

		if (!a)
			return NULL;
		z->zoff = a;
		b = realloc(z->zlen, nblocks * sizeof(*b));
		if (!b)
			return NULL;
		z->zlen = b;
		z->nmax = nblocks;
	}
	return z;
}

size_t kv_data_compress(kv_env *e, uint64_t ino, uint64_t off, const void *buf, size_t len,
			int level, uint64_t *sums, size_t nsums, struct kv_zblocks *out)
{
	const uint64_t bs = e->super.block_size;
	uint64_t idx = (off + bs - 1) / bs, pos = idx * bs, end = off + len;
	size_t bound = ZSTD_compressBound(bs), used = 0, n = 0;
	struct zthread *z;

	memset(out, 0, sizeof(*out));
	if (level <= 0 || nsums == 0 || !(z = zthread_get(nsums, nsums * bound)))
		return 0;
	if (ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_contentSizeFlag, 1)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 0)))
		return 0;
	for (; pos < end && n < nsums; idx++, pos += bs, n++) {
		const unsigned char *src = (const unsigned char *)buf + (pos - off);
		size_t blen = end - pos < bs ? end - pos : bs;
		size_t zl = ZSTD_compress2(z->cctx, z->buf + used, bound, src, blen);

		z->zoff[n] = (uint32_t)used;
		z->zlen[n] = 0;
		if (ZSTD_isError(zl) || !worth(zl, blen))
			continue; /* stored as it is, its plain checksum kept */
		z->zlen[n] = (uint32_t)zl;
		sums[n] = kv_block_zcsum(ino, idx, z->buf + used, zl);
		used += zl;
	}
	out->data = z->buf;
	out->zoff = z->zoff;
	out->zlen = z->zlen;
	out->n = n;
	return n;
}
