/*
 * data.c - file contents as checksummed blocks: key = ino + block index,
 * value = 1..block_size data bytes + XXH3-64 of them (seeded by the key).
 *
 * Block i covers bytes [i * B, (i + 1) * B) of the file, B the image's block
 * size. A missing block is a hole; a block shorter than B reads as zeros past
 * its end. A block of no bytes is unwritten: fallocate's, it reads as zeros
 * and stands for the page its first write will take (room.c keeps that much
 * free for it), as ext4's unwritten extents do.
 *
 * Invariants:
 *  1. No stored byte lies at or past the file size: truncate and punch trim
 *     or drop the blocks they uncover, so growing a file again shows zeros.
 *  2. Every block is verified against its checksum before its bytes are used,
 *     for a read and for a read-modify-write alike: a mismatch is -EIO and a
 *     log line, never data.
 *  3. in->nblocks counts the stored blocks of the file, unwritten ones too.
 *  5. The meta record KV_UNWRITTEN_KEY counts the unwritten blocks of the
 *     image: whatever stores or drops one changes it in the same op.
 *  4. Range operations walk the stored blocks with a cursor, never every
 *     index of the range, so a huge sparse range costs what it holds.
 *
 * (Invariant 5 is kept by this file and kv_inode_purge.)
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include <zstd.h>

#include "kv_int.h"

#define KV_FILE_MAX ((uint64_t)INT64_MAX)

static const unsigned char zeros[KV_BLOCK_SIZE_MAX];

static kv_val block_key(unsigned char buf[16], uint64_t ino, uint64_t idx)
{
	kv_put_be64(buf, ino);
	kv_put_be64(buf + 8, idx);
	return (kv_val){16, buf};
}

int kv_block_check(kv_txn *t, uint64_t ino, uint64_t idx, kv_val *v, size_t *len)
{
	switch (kv_block_verify(t->env->super.block_size, ino, idx, v->data, v->size, len)) {
	case KV_BLOCK_OK:
		return 0;
	case KV_BLOCK_ZSTD: /* stored compressed: its bytes, decompressed (zstd.c) */
		return kv_block_unz(t, ino, idx, v, *len);
	case KV_BLOCK_BAD_LEN:
		kv_log("inode %llu block %llu: bad length %zu", (unsigned long long)ino,
		       (unsigned long long)idx, v->size);
		return -EIO;
	default:
		kv_log("inode %llu block %llu: checksum mismatch", (unsigned long long)ino,
		       (unsigned long long)idx);
		return -EIO;
	}
}

/* The data bytes block value v of (ino, idx) holds, to decide whether a
 * change keeps any of them: a compressed block's are its frame's content
 * size (its checksum checked, nothing decompressed); a value too damaged
 * to tell counts as a whole block. */
static size_t held_len(kv_txn *t, uint64_t ino, uint64_t idx, const kv_val *v)
{
	const uint64_t bs = t->env->super.block_size;
	size_t len;

	if (v->size < KV_CSUM_LEN || v->size > bs + KV_CSUM_LEN)
		return bs;
	len = v->size - KV_CSUM_LEN;
	if (len >= 4 && kv_get_le32(v->data) == ZSTD_MAGICNUMBER) {
		switch (kv_block_verify((uint32_t)bs, ino, idx, v->data, v->size, &len)) {
		case KV_BLOCK_ZSTD:
			return len;
		case KV_BLOCK_OK:
			return v->size - KV_CSUM_LEN;
		default: /* a damaged frame's data may be longer than it */
			return bs;
		}
	}
	return v->size - KV_CSUM_LEN;
}

int kv_block_get(kv_txn *t, uint64_t ino, uint64_t idx, const void **data, size_t *len)
{
	unsigned char kb[16];
	kv_val k = block_key(kb, ino, idx), v;
	int mrc, rc;

	assert(kv_txn_mine(t));
	mrc = kv_eget(t, KV_DB_DATA, &k, &v);
	if (mrc == KV_ENOTFOUND && kv_has_feature(t->env, KV_FEATURE_INCOMPAT_SHARED)) {
		struct kv_extent x;
		uint64_t next;

		rc = kv_ext_find(t, ino, idx, &x, &next);
		if (rc == 0)
			rc = kv_ext_block(t, &x, idx, &v, len);
		if (rc == 0)
			*data = v.data;
		return rc;
	}
	if (mrc)
		return kv_err(t, mrc, "get block");
	rc = kv_block_check(t, ino, idx, &v, len);
	if (rc == 0)
		*data = v.data;
	return rc;
}

int kv_block_put(kv_txn *t, uint64_t ino, uint64_t idx, const void *data, size_t len,
		     const uint64_t *sum, unsigned flags)
{
	unsigned char kb[16];
	kv_val k = block_key(kb, ino, idx), v = {len + KV_CSUM_LEN, NULL};
	int rc;

	assert(t->write && kv_role_mine(t->env)); /* wb_bytes is the role's */
	rc = kv_err(t, kv_eput(t, KV_DB_DATA, &k, &v, KV_PUT_RESERVE | flags),
		    "put block");
	if (rc)
		return rc;
	memcpy(v.data, data, len);
	kv_put_le64((unsigned char *)v.data + len,
		    sum ? *sum : kv_block_csum(ino, idx, data, len));
	t->env->w.wb_bytes += len;
	return 0;
}

int kv_unwritten_read(kv_env *e, kv_etxn *txn, uint64_t *count)
{
	kv_val k = {strlen(KV_UNWRITTEN_KEY), KV_UNWRITTEN_KEY}, v;
	int mrc = e->eng->get(e, txn, KV_DB_META, &k, &v);

	*count = 0;
	if (mrc == KV_ENOTFOUND)
		return 0;
	if (mrc)
		return kv_err(NULL, mrc, "get unwritten count");
	if (v.size != 8)
		return -EIO;
	*count = kv_get_le64(v.data);
	return 0;
}

/* The image records that it uses an incompatible feature (bit), in t:
 * decided from the superblock t holds, so an op rolled back and replayed
 * stores it again. e->super takes the bit too, so a commit's own store of
 * the superblock keeps it; a bit with no such record is harmless. */
int kv_feature_set(kv_txn *t, uint64_t bit)
{
	kv_env *e = t->env;
	kv_val k = {strlen(KV_SUPER_KEY), KV_SUPER_KEY}, v;
	struct kv_super s;
	int rc;

	rc = kv_err(t, kv_eget(t, KV_DB_META, &k, &v), "get superblock");
	if (rc == 0)
		rc = kv_super_decode(v.data, v.size, &s);
	if (rc)
		return rc;
	e->super.feature_incompat |= bit;
	atomic_fetch_or(&e->features, bit); /* readers look for such records from now on */
	if (s.feature_incompat & bit)
		return 0;
	s.feature_incompat |= bit;
	s.next_ino = e->w.next_ino > s.next_ino ? e->w.next_ino : s.next_ino;
	return kv_super_store(t, &s);
}

int kv_feature_add(kv_txn *t, uint64_t incompat)
{
	if (!t->write)
		return -EROFS;
	if (incompat & ~KV_FEATURE_INCOMPAT_KNOWN)
		return -EINVAL;
	return kv_feature_set(t, incompat);
}

/* Store n as the count in t (the role): published after its commit. */
static int unwritten_put(kv_txn *t, uint64_t n)
{
	unsigned char b[8];
	kv_val k = {strlen(KV_UNWRITTEN_KEY), KV_UNWRITTEN_KEY}, v = {sizeof(b), b};
	int rc;

	kv_put_le64(b, n);
	rc = kv_err(t, kv_eput(t, KV_DB_META, &k, &v, 0),
		    "put unwritten count");
	if (rc == 0)
		t->env->unwritten.dirty = 1;
	return rc;
}

int kv_unwritten_add(kv_txn *t, int64_t delta)
{
	kv_env *e = t->env;
	uint64_t n;
	int rc;

	if (delta == 0)
		return 0;
	assert(t->write && kv_role_mine(e));
	rc = kv_unwritten_read(e, t->txn, &n);
	if (rc == -EIO) {
		kv_log("%s: damaged count of unwritten blocks (fsck.kvfs sets it right)", e->path);
		n = 0;
	} else if (rc) {
		return rc;
	}
	if (delta < 0)
		n = (uint64_t)-delta > n ? 0 : n - (uint64_t)-delta; /* never below 0 */
	else
		n += (uint64_t)delta;
	if (delta > 0 && (rc = kv_feature_set(t, KV_FEATURE_INCOMPAT_UNWRITTEN)) != 0)
		return rc;
	return unwritten_put(t, n);
}

int kv_unwritten_recount(kv_txn *t, uint64_t *count)
{
	kv_env *e = t->env;
	kv_val bk, bv;
	kv_ecur *c;
	uint64_t n = 0, old;
	int mrc, rc;

	if (!t->write)
		return -EROFS;
	assert(kv_role_mine(e));
	c = kv_cursor(t, KV_DB_DATA, &rc);
	if (!c)
		return rc;
	for (mrc = kv_cget(t, c, &bk, &bv, KV_FIRST); mrc == 0;
	     mrc = kv_cget(t, c, &bk, &bv, KV_NEXT))
		n += kv_block_unwritten(&bv);
	if (mrc != KV_ENOTFOUND)
		return kv_err(t, mrc, "count unwritten blocks");
	*count = n;
	rc = n ? kv_feature_set(t, KV_FEATURE_INCOMPAT_UNWRITTEN) : 0;
	if (rc)
		return rc;
	rc = kv_unwritten_read(e, t->txn, &old);
	if (rc == 0 && old == n)
		return 0;
	if (rc && rc != -EIO)
		return rc;
	return unwritten_put(t, n); /* wrong, or damaged */
}

int kv_unwritten_get(kv_txn *t, uint64_t *count)
{
	return kv_unwritten_read(t->env, t->txn, count);
}

void kv_unwritten_prepare(kv_env *e, kv_etxn *txn)
{
	assert(kv_role_mine(e));
	if (e->unwritten.dirty)
		/* read: published once the commit is; unread (damaged), the
		 * last published count stays */
		e->unwritten.dirty = kv_unwritten_read(e, txn, &e->unwritten.txn) == 0 ? 2 : 1;
}

int kv_unwritten_publish(kv_env *e)
{
	assert(kv_role_mine(e));
	if (e->unwritten.dirty != 2)
		return 0;
	e->unwritten.dirty = 0;
	return atomic_exchange(&e->unwritten.count, e->unwritten.txn) != e->unwritten.txn;
}

/* Append a segment to iov, merging runs of zeros. */
static int iov_add(struct iovec *iov, int iovmax, int *n, const void *p, size_t len)
{
	if (p == zeros && *n > 0 && iov[*n - 1].iov_base == zeros &&
	    iov[*n - 1].iov_len + len <= sizeof(zeros)) {
		iov[*n - 1].iov_len += len;
		return 0;
	}
	while (p == zeros && len > sizeof(zeros)) {
		int rc = iov_add(iov, iovmax, n, zeros, sizeof(zeros));
		if (rc)
			return rc;
		len -= sizeof(zeros);
	}
	if (*n >= iovmax)
		return -E2BIG;
	iov[*n].iov_base = (void *)p;
	iov[*n].iov_len = len;
	(*n)++;
	return 0;
}

static ssize_t data_read(kv_txn *t, uint64_t ino, uint64_t size, uint64_t off, size_t len,
			 struct iovec *iov, int iovmax, int *iovcnt);

ssize_t kv_data_read(kv_txn *t, uint64_t ino, uint64_t size, uint64_t off, size_t len,
		     struct iovec *iov, int iovmax, int *iovcnt)
{
	ssize_t n;

	kv_z_begin_read(t, len); /* compressed blocks stay until the next read */
	n = data_read(t, ino, size, off, len, iov, iovmax, iovcnt);
	kv_z_end_read(t);
	return n;
}

static ssize_t data_read(kv_txn *t, uint64_t ino, uint64_t size, uint64_t off, size_t len,
			 struct iovec *iov, int iovmax, int *iovcnt)
{
	const uint64_t bs = t->env->super.block_size;
	const int shared = kv_has_feature(t->env, KV_FEATURE_INCOMPAT_SHARED);
	struct kv_extent xv = {0}; /* the extent last found (count 0: none) */
	unsigned char kb[16];
	uint64_t end, pos = off, idx;
	kv_ecur *c;
	kv_val k, v = {0, NULL};
	size_t blen;
	int mrc, rc, n = 0;

	*iovcnt = 0;
	if (off >= size || len == 0)
		return 0;
	end = size - off < len ? size : off + len;
	c = kv_cursor(t, KV_DB_DATA, &rc);
	if (!c)
		return rc;
	k = block_key(kb, ino, off / bs);
	mrc = kv_cget(t, c, &k, &v, KV_SET_RANGE);
	while (pos < end) {
		uint64_t next = UINT64_MAX; /* index of the block the cursor stands on */
		kv_val bv = v;
		int borrowed = 0;

		if (mrc == 0 && k.size == 16 && kv_get_be64(k.data) == ino)
			next = kv_get_be64((unsigned char *)k.data + 8);
		else if (mrc && mrc != KV_ENOTFOUND)
			return kv_err(t, mrc, "read");
		idx = pos / bs;
		if (next != idx && shared) { /* not stored: borrowed (share.c)? */
			uint64_t xnext;

			if (!(xv.count && idx >= xv.first && idx - xv.first < xv.count)) {
				rc = kv_ext_find(t, ino, idx, &xv, &xnext);
				if (rc == -ENOENT) {
					xv.count = 0;
					next = xnext < next ? xnext : next;
				} else if (rc) {
					return rc;
				}
			}
			if (xv.count) {
				rc = kv_ext_block(t, &xv, idx, &bv, &blen);
				if (rc)
					return rc;
				borrowed = 1;
			}
		}
		if (next != idx && !borrowed) { /* a hole up to the next stored block */
			uint64_t to = next != UINT64_MAX && next < end / bs + 1 ? next * bs : end;
			if (to > end)
				to = end;
			rc = iov_add(iov, iovmax, &n, zeros, to - pos);
			if (rc)
				return rc;
			pos = to; /* the cursor still stands on block next */
			continue;
		}
		if (!borrowed && (rc = kv_block_check(t, ino, idx, &bv, &blen)) != 0)
			return rc;
		uint64_t boff = pos - idx * bs, bend = end - idx * bs < bs ? end - idx * bs : bs;
		if (boff < blen) {
			uint64_t seg = (bend < blen ? bend : blen) - boff;
			rc = iov_add(iov, iovmax, &n, (unsigned char *)bv.data + boff, seg);
			if (rc)
				return rc;
			pos += seg;
		}
		if (pos < idx * bs + bend) {
			rc = iov_add(iov, iovmax, &n, zeros, idx * bs + bend - pos);
			if (rc)
				return rc;
			pos = idx * bs + bend;
		}
		if (!borrowed)
			mrc = kv_cget(t, c, &k, &v, KV_NEXT);
	}
	*iovcnt = n;
	return (ssize_t)(end - off);
}

size_t kv_data_sums(kv_env *e, uint64_t ino, uint64_t off, const void *buf, size_t len,
		   uint64_t *sums, size_t max)
{
	const uint64_t bs = e->super.block_size;
	uint64_t idx = (off + bs - 1) / bs, pos = idx * bs, end = off + len;
	size_t n = 0;

	if (off > KV_FILE_MAX || len > KV_FILE_MAX - off)
		return 0;
	for (; pos < end && n < max; idx++, pos += bs, n++)
		sums[n] = kv_block_csum(ino, idx, (const unsigned char *)buf + (pos - off),
					end - pos < bs ? end - pos : bs);
	return n;
}

int kv_data_write(kv_txn *t, struct kv_inode *in, uint64_t off, const void *buf, size_t len)
{
	return kv_data_write_sums(t, in, off, buf, len, NULL, 0, NULL);
}

void kv_data_prefetch(kv_txn *t, uint64_t ino, uint64_t off, size_t len)
{
	const uint64_t bs = t->env->super.block_size;

	if (len == 0 || off > KV_FILE_MAX || len > KV_FILE_MAX - off)
		return;
	for (uint64_t idx = off / bs; idx <= (off + len - 1) / bs; idx++) {
		unsigned char kb[16];
		kv_val k = block_key(kb, ino, idx);

		kv_eprefetch(t, KV_DB_DATA, &k);
	}
}

/* A write to a file that lends or borrows blocks: lent blocks are copied to
 * their borrowers, borrowed ones let go (those kept in part become the
 * file's own first): share.c */
static int write_share_prepare(kv_txn *t, struct kv_inode *in, uint64_t off, uint64_t end)
{
	const uint64_t bs = t->env->super.block_size;
	uint64_t a = off / bs, b = (end - 1) / bs + 1, next;
	struct kv_extent x;
	int rc;

	/* a borrowed block written becomes one more stored: past the room
	 * for ordinary changes a write may only replace (room.c) */
	if (kv_txn_reserved(t) && (in->flags & KV_INODE_BORROWS)) {
		rc = kv_ext_find(t, in->ino, a, &x, &next);
		if (rc == 0 || (rc == -ENOENT && next < b))
			return -ENOSPC;
		if (rc != -ENOENT)
			return rc;
	}
	return kv_share_prepare(t, in, a, b, off % bs || end - a * bs < bs, end % bs != 0);
}

/* A write as its loop walks the blocks (kv_data_write_sums). */
struct write_run {
	kv_txn *t;
	struct kv_inode *in;
	const unsigned char *src;   /* the caller's bytes for the block at hand */
	const uint64_t *sums;       /* sums[i]: block first_sum + i */
	size_t nsums;
	uint64_t first_sum;
	const struct kv_zblocks *z; /* NULL: nothing compressed */
	int64_t unwritten_gone;     /* unwritten blocks written so far */
	int packed;                 /* a block was stored compressed */
};

/* The block a write is at: bytes [from, to) of block idx are written. */
struct write_block {
	uint64_t idx, from, to;
	const uint64_t *sum; /* the caller's checksum of it (NULL: none) */
	unsigned char kb[16];
	kv_val k, v;         /* its key; its old value, where had */
	size_t olen;         /* the data bytes it held */
	int fresh;           /* put with no lookup first */
	int had, was_unwritten;
};

static void write_block_at(const struct write_run *r, struct write_block *b, uint64_t pos,
			   uint64_t end)
{
	const uint64_t bs = r->t->env->super.block_size;

	b->idx = pos / bs;
	b->from = pos - b->idx * bs;
	b->to = end - b->idx * bs < bs ? end - b->idx * bs : bs;
	b->sum = NULL;
	if (b->from == 0 && b->idx - r->first_sum < r->nsums)
		b->sum = &r->sums[b->idx - r->first_sum];
	b->k = block_key(b->kb, r->in->ino, b->idx);
	b->olen = 0;
	/* no block starts at or past the size (fsck checks it): such a
	 * block is put without looking it up first */
	b->fresh = b->idx * bs >= r->in->size;
	b->had = 0;
	b->was_unwritten = 0;
}

/* Look up the block's old value; the old bytes are needed (and verified)
 * only when some of them survive: a block written over whole is just
 * replaced, which also lets a damaged block be overwritten. */
static int write_block_old(struct write_run *r, struct write_block *b)
{
	kv_txn *t = r->t;
	int mrc = b->fresh ? KV_ENOTFOUND : kv_eget(t, KV_DB_DATA, &b->k, &b->v);

	if (mrc == 0) {
		b->had = 1;
		b->was_unwritten = kv_block_unwritten(&b->v);
		b->olen = held_len(t, r->in->ino, b->idx, &b->v);
		if (!(b->from == 0 && b->to >= b->olen))
			return kv_block_check(t, r->in->ino, b->idx, &b->v, &b->olen);
	} else if (mrc != KV_ENOTFOUND) {
		return kv_err(t, mrc, "get block");
	}
	return 0;
}

/* Put a block written over whole: the caller's bytes, or their frame
 * where kv_data_compress packed them. */
static int write_block_whole(struct write_run *r, const struct write_block *b)
{
	const void *data = r->src;
	size_t dlen = b->to, i = b->idx - r->first_sum;
	const struct kv_zblocks *z = r->z;

	if (b->sum && z && i < z->n && z->zlen[i]) { /* stored compressed */
		data = z->data + z->zoff[i];
		dlen = z->zlen[i];
		r->packed = 1;
	}
	return kv_block_put(r->t, r->in->ino, b->idx, data, dlen, b->sum,
			    b->fresh ? KV_PUT_NOOVERWRITE : 0);
}

/* Put a block written over in part: its old bytes (a hole has none) with
 * the new ones merged in, in wbuf, compressed where the mount says so. */
static int write_block_merged(struct write_run *r, const struct write_block *b)
{
	unsigned char *w = r->t->env->w.wbuf;
	const void *data = w;
	size_t nlen, dlen;
	uint64_t zsum, *zs = NULL;

	if (b->olen)
		memcpy(w, b->v.data, b->olen);
	if (b->from > b->olen)
		memset(w + b->olen, 0, b->from - b->olen);
	memcpy(w + b->from, r->src, b->to - b->from);
	nlen = b->to > b->olen ? b->to : b->olen;
	dlen = nlen;
	if (kv_z_pack_merged(r->t, r->in->ino, b->idx, w, nlen, &data, &dlen, &zsum)) {
		zs = &zsum; /* compressed (zstd.c invariant 2) */
		r->packed = 1;
	}
	return kv_block_put(r->t, r->in->ino, b->idx, data, dlen, zs,
			    b->fresh ? KV_PUT_NOOVERWRITE : 0);
}

/* Store block b of the write, whole or merged. */
static int write_block_store(struct write_run *r, struct write_block *b)
{
	int rc;

	for (;;) {
		rc = write_block_old(r, b);
		if (rc)
			return rc;
		if (b->from == 0 && b->to >= b->olen)
			rc = write_block_whole(r, b);
		else
			rc = write_block_merged(r, b);
		if (rc != -EEXIST)
			return rc;
		b->fresh = 0; /* a block past the end after all (a damaged image) */
	}
}

int kv_data_write_sums(kv_txn *t, struct kv_inode *in, uint64_t off, const void *buf,
		       size_t len, const uint64_t *sums, size_t nsums, const struct kv_zblocks *z)
{
	const uint64_t bs = t->env->super.block_size;
	struct write_run r = {.t = t, .in = in, .src = buf, .sums = sums, .nsums = nsums, .z = z};
	uint64_t pos = off, end;
	int rc;

	kv_win_mark(t, in->ino); /* window.c invariant 3 */
	if (!t->write)
		return -EROFS;
	if (off > KV_FILE_MAX || len > KV_FILE_MAX - off)
		return -EFBIG;
	if (len == 0)
		return 0; /* an empty write does not extend the file (POSIX write) */
	assert(kv_role_mine(t->env)); /* kv_int.h invariant 2: wbuf */
	end = off + len;
	r.first_sum = (off + bs - 1) / bs; /* sums[i]: block first_sum + i */
	if (in->flags & (KV_INODE_LENDS | KV_INODE_BORROWS)) {
		rc = write_share_prepare(t, in, off, end);
		if (rc)
			return rc;
	}
	/* each block below is looked up (a fresh one by its put, which checks
	 * it is new): on a server, all in one wait */
	kv_data_prefetch(t, in->ino, off, len);
	while (pos < end) {
		struct write_block b;

		write_block_at(&r, &b, pos, end);
		rc = write_block_store(&r, &b);
		if (rc)
			return rc;
		if (!b.had)
			in->nblocks++;
		r.unwritten_gone += b.was_unwritten;
		r.src += b.to - b.from;
		pos = b.idx * bs + b.to;
	}
	rc = kv_unwritten_add(t, -r.unwritten_gone);
	/* asked of t's superblock each time, not of env->super: an op rolled
	 * back after it set the bit there left the record without it */
	if (!rc && r.packed)
		rc = kv_feature_set(t, KV_FEATURE_INCOMPAT_COMPRESSED);
	if (rc)
		return rc;
	if (end > in->size)
		in->size = end;
	return 0;
}

/* Zero [off, end) of the stored blocks: drop the blocks it covers whole,
 * zero or trim the others. Walks stored blocks only (invariant 4). */
int kv_data_zero_range(kv_txn *t, struct kv_inode *in, uint64_t off, uint64_t end)
{
	const uint64_t bs = t->env->super.block_size;
	unsigned char kb[16];
	unsigned char *w = t->env->w.wbuf;
	uint64_t idx = off / bs;
	int64_t unwritten_gone = 0;
	kv_ecur *c;
	kv_val k, v;
	size_t blen;
	int mrc, rc;

	if (off >= end)
		return 0;
	if (in->flags & (KV_INODE_LENDS | KV_INODE_BORROWS)) { /* as a write (share.c) */
		uint64_t b = end == UINT64_MAX ? UINT64_MAX : (end - 1) / bs + 1;

		rc = kv_share_prepare(t, in, idx, b, off % bs != 0, end != UINT64_MAX && end % bs);
		if (rc)
			return rc;
	}
	c = kv_cursor(t, KV_DB_DATA, &rc);
	if (!c)
		return rc;
	for (;;) {
		k = block_key(kb, in->ino, idx);
		mrc = kv_cget(t, c, &k, &v, KV_SET_RANGE);
		if (mrc == KV_ENOTFOUND)
			break;
		if (mrc)
			return kv_err(t, mrc, "zero range");
		if (k.size != 16 || kv_get_be64(k.data) != in->ino)
			break;
		idx = kv_get_be64((unsigned char *)k.data + 8);
		if (idx > (end - 1) / bs)
			break;
		uint64_t from = off > idx * bs ? off - idx * bs : 0;
		uint64_t to = end - idx * bs < bs ? end - idx * bs : bs;
		blen = held_len(t, in->ino, idx, &v); /* 0: an unwritten block */
		/* a block dropped whole needs no check (so damage can be cut out);
		 * one partly kept is verified first */
		if (!(from == 0 && to >= blen) && (rc = kv_block_check(t, in->ino, idx, &v, &blen)))
			return rc;
		if (kv_block_unwritten(&v) &&
		    !(from == 0 && (to >= bs || idx * bs + to >= in->size))) {
			/* an unwritten block stays allocated unless all of it goes
			 * (as ext4 zeroes part of a block it punches) */
		} else if (from == 0 && to >= blen) {
			int was_unwritten = kv_block_unwritten(&v);

			rc = kv_err(t, kv_cdel(t, c), "delete block");
			if (rc)
				return rc;
			in->nblocks--;
			unwritten_gone += was_unwritten;
		} else if (from < blen) {
			memcpy(w, v.data, blen);
			if (to >= blen)
				blen = from; /* trim the tail */
			else
				memset(w + from, 0, to - from);
			rc = kv_block_put(t, in->ino, idx, w, blen, NULL, 0);
			if (rc)
				return rc;
		}
		if (idx == UINT64_MAX)
			break;
		idx++;
	}
	return kv_unwritten_add(t, -unwritten_gone);
}

int kv_data_truncate(kv_txn *t, struct kv_inode *in, uint64_t size)
{
	int rc = 0;

	kv_win_mark(t, in->ino); /* window.c invariant 3 */
	if (!t->write)
		return -EROFS;
	if (size > KV_FILE_MAX)
		return -EFBIG;
	if (size < in->size)
		rc = kv_data_zero_range(t, in, size, UINT64_MAX);
	if (rc == 0)
		in->size = size;
	return rc;
}

int kv_data_punch(kv_txn *t, struct kv_inode *in, uint64_t off, uint64_t len)
{
	uint64_t end;

	kv_win_mark(t, in->ino); /* window.c invariant 3 */
	if (!t->write)
		return -EROFS;
	if (off >= in->size || len == 0)
		return 0;
	end = len > in->size - off ? in->size : off + len;
	return kv_data_zero_range(t, in, off, end);
}

/* A fallocate (kv_data_allocate) as its loop walks the blocks. */
struct alloc_run {
	kv_txn *t;
	struct kv_inode *in;
	kv_ecur *c;
	unsigned char kb[16];
	kv_val k, v;   /* the block at hand: its key, its value */
	size_t blen;   /* its data bytes */
	uint64_t n;    /* blocks stored so far */
	int64_t added; /* unwritten blocks stored so far */
};

/* Put the cursor on stored block idx: 0, KV_ENOTFOUND or an engine code. */
static int alloc_seek(struct alloc_run *r, uint64_t idx)
{
	r->k = block_key(r->kb, r->in->ino, idx);
	return kv_cget(r->t, r->c, &r->k, &r->v, KV_SET_KEY);
}

/* Block idx, not stored, of a file that borrows: 1 if it is borrowed with
 * want bytes (written, nothing to do); a short one becomes the file's own,
 * the cursor on it (*mrc), to be filled out as a stored one is; 0 if no
 * extent covers it. */
static int alloc_borrowed(struct alloc_run *r, uint64_t idx, uint64_t want, int *mrc)
{
	struct kv_extent x;
	uint64_t xnext;
	int rc;

	rc = kv_ext_find(r->t, r->in->ino, idx, &x, &xnext);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	rc = kv_ext_block(r->t, &x, idx, &r->v, &r->blen);
	if (rc)
		return rc;
	if (r->blen >= want)
		return 1;
	rc = kv_ext_own(r->t, r->in, idx);
	if (rc)
		return rc;
	*mrc = alloc_seek(r, idx);
	return 0;
}

/* Store block idx, a hole, as unwritten: no bytes to store now, its page
 * kept free. */
static int alloc_unwritten(struct alloc_run *r, uint64_t idx)
{
	int rc = kv_block_put(r->t, r->in->ino, idx, zeros, 0, NULL, 0);

	if (rc)
		return rc;
	r->in->nblocks++;
	r->n++;
	r->added++;
	return 0;
}

/* Stored block idx holds fewer than want bytes: its zeros up to the size
 * become stored (a lent block is first copied to its borrowers). */
static int alloc_fill_tail(struct alloc_run *r, uint64_t idx, uint64_t want)
{
	unsigned char *w = r->t->env->w.wbuf;
	int mrc, rc;

	if (r->in->flags & KV_INODE_LENDS) { /* lent: its borrowers' first */
		rc = kv_share_prepare(r->t, r->in, idx, idx + 1, 0, 0);
		if (rc)
			return rc;
		mrc = alloc_seek(r, idx); /* the cursor may have moved */
		if (mrc)
			return kv_err(r->t, mrc, "allocate");
		/* its bytes again */
		rc = kv_block_check(r->t, r->in->ino, idx, &r->v, &r->blen);
		if (rc)
			return rc;
	}
	memcpy(w, r->v.data, r->blen);
	memset(w + r->blen, 0, want - r->blen);
	rc = kv_block_put(r->t, r->in->ino, idx, w, want, NULL, 0);
	if (rc)
		return rc;
	r->n++;
	return 0;
}

/* Block idx within the size: left as it is if it holds its bytes up to
 * the size (or is unwritten), else stored unwritten or filled out. */
static int alloc_block(struct alloc_run *r, uint64_t idx)
{
	const uint64_t bs = r->t->env->super.block_size;
	/* the bytes of block idx that lie within the size */
	uint64_t want = r->in->size - idx * bs < bs ? r->in->size - idx * bs : bs;
	int mrc, rc;

	mrc = alloc_seek(r, idx);
	if (mrc == KV_ENOTFOUND && (r->in->flags & KV_INODE_BORROWS)) {
		rc = alloc_borrowed(r, idx, want, &mrc);
		if (rc)
			return rc < 0 ? rc : 0;
	}
	if (mrc == KV_ENOTFOUND)
		return alloc_unwritten(r, idx);
	if (mrc)
		return kv_err(r->t, mrc, "allocate");
	rc = kv_block_check(r->t, r->in->ino, idx, &r->v, &r->blen);
	if (rc)
		return rc;
	if (r->blen >= want || kv_block_unwritten(&r->v))
		return 0;
	return alloc_fill_tail(r, idx, want);
}

int kv_data_allocate(kv_txn *t, struct kv_inode *in, uint64_t off, uint64_t end,
		     uint64_t max_blocks, uint64_t *next)
{
	const uint64_t bs = t->env->super.block_size;
	struct alloc_run r = {.t = t, .in = in};
	uint64_t idx, last;
	int rc;

	kv_win_mark(t, in->ino); /* window.c invariant 3 */
	if (!t->write)
		return -EROFS;
	if (end > in->size)
		end = in->size; /* no block past the size (invariant 1) */
	*next = end;
	if (off >= end)
		return 0;
	r.c = kv_cursor(t, KV_DB_DATA, &rc);
	if (!r.c)
		return rc;
	last = (end - 1) / bs;
	for (idx = off / bs; idx <= last; idx++) {
		if (r.n == max_blocks) {
			*next = idx * bs;
			break;
		}
		rc = alloc_block(&r, idx);
		if (rc)
			return rc;
	}
	rc = kv_unwritten_add(t, r.added);
	/* the promise must fit (the caller's op is then rolled back whole):
	 * fallocates that each looked at the room before either committed
	 * cannot promise the same pages twice */
	return rc || !t->env->eng->room_promise ? rc : t->env->eng->room_promise(t->env, t->txn);
}

int kv_data_zero(kv_txn *t, struct kv_inode *in, uint64_t off, uint64_t end)
{
	uint64_t stop = end < in->size ? end : in->size, next;
	int rc = 0;

	/* the bytes go (whole blocks dropped, the others zeroed in place),
	 * then every block of the range is allocated again: the dropped ones
	 * and the holes as unwritten blocks, as ext4 makes them unwritten
	 * extents (kv_data_allocate marks the inode, refuses a read txn and
	 * keeps to the size) */
	if (t->write && off < stop)
		rc = kv_data_zero_range(t, in, off, stop);
	return rc ? rc : kv_data_allocate(t, in, off, end, UINT64_MAX, &next);
}

int kv_data_holes(kv_txn *t, uint64_t ino, uint64_t off, uint64_t end, uint64_t *count)
{
	const uint64_t bs = t->env->super.block_size;
	unsigned char kb[16];
	uint64_t first, last, stored = 0;
	kv_ecur *c;
	kv_val k, v;
	int mrc, rc;

	*count = 0;
	if (off >= end)
		return 0;
	first = off / bs;
	last = (end - 1) / bs;
	c = kv_cursor(t, KV_DB_DATA, &rc);
	if (!c)
		return rc;
	k = block_key(kb, ino, first);
	for (mrc = kv_cget(t, c, &k, &v, KV_SET_RANGE); mrc == 0;
	     mrc = kv_cget(t, c, &k, &v, KV_NEXT)) {
		if (k.size != 16 || kv_get_be64(k.data) != ino ||
		    kv_get_be64((unsigned char *)k.data + 8) > last)
			break;
		stored++;
	}
	if (mrc && mrc != KV_ENOTFOUND)
		return kv_err(t, mrc, "count holes");
	if (kv_has_feature(t->env, KV_FEATURE_INCOMPAT_SHARED)) {
		/* borrowed blocks are no holes (share.c invariant 3: never
		 * stored ones too) */
		for (uint64_t pos = first, next; pos <= last;) {
			struct kv_extent x;

			rc = kv_ext_find(t, ino, pos, &x, &next);
			if (rc == -ENOENT) {
				pos = next;
				continue;
			}
			if (rc)
				return rc;
			next = x.first + x.count - 1 < last ? x.first + x.count : last + 1;
			stored += next - pos;
			pos = next;
		}
	}
	*count = last - first + 1 - stored;
	return 0;
}

/* kv_data_seek where files may borrow blocks (share.c): a borrowed block
 * is data. Looks at each run of stored, borrowed or missing blocks. */
static int seek_shared(kv_txn *t, uint64_t ino, uint64_t size, uint64_t off, int whence,
		       uint64_t *out)
{
	const uint64_t bs = t->env->super.block_size, last = (size - 1) / bs;
	unsigned char kb[16];
	uint64_t idx = off / bs;
	kv_ecur *c;
	kv_val k, v;
	size_t blen;
	int mrc, rc;

	c = kv_cursor(t, KV_DB_DATA, &rc);
	if (!c)
		return rc;
	while (idx <= last) {
		uint64_t stored = UINT64_MAX, xnext, span;
		struct kv_extent x;
		int data;

		k = block_key(kb, ino, idx);
		mrc = kv_cget(t, c, &k, &v, KV_SET_RANGE);
		if (mrc && mrc != KV_ENOTFOUND)
			return kv_err(t, mrc, "seek");
		if (mrc == 0 && k.size == 16 && kv_get_be64(k.data) == ino)
			stored = kv_get_be64((unsigned char *)k.data + 8);
		if (stored == idx) {
			rc = kv_block_check(t, ino, idx, &v, &blen);
			if (rc)
				return rc;
			data = !kv_block_unwritten(&v);
			span = idx + 1;
		} else {
			rc = kv_ext_find(t, ino, idx, &x, &xnext);
			if (rc && rc != -ENOENT)
				return rc;
			data = rc == 0;
			span = data ? x.first + x.count : stored < xnext ? stored : xnext;
		}
		if (data == (whence == SEEK_DATA)) {
			uint64_t at = idx * bs;

			*out = at > off ? at : off;
			return 0;
		}
		idx = span;
	}
	if (whence == SEEK_DATA)
		return -ENXIO; /* no data block left before EOF */
	*out = size; /* the hole at EOF */
	return 0;
}

int kv_data_seek(kv_txn *t, uint64_t ino, uint64_t size, uint64_t off, int whence,
		 uint64_t *out)
{
	const uint64_t bs = t->env->super.block_size;
	unsigned char kb[16];
	uint64_t want = off / bs; /* SEEK_HOLE: the block a run of data needs next */
	kv_ecur *c;
	kv_val k, v;
	size_t blen;
	int mrc, rc;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	if (off >= size)
		return -ENXIO;
	if (kv_has_feature(t->env, KV_FEATURE_INCOMPAT_SHARED))
		return seek_shared(t, ino, size, off, whence, out);
	c = kv_cursor(t, KV_DB_DATA, &rc);
	if (!c)
		return rc;
	k = block_key(kb, ino, want);
	for (mrc = kv_cget(t, c, &k, &v, KV_SET_RANGE);;
	     mrc = kv_cget(t, c, &k, &v, KV_NEXT)) {
		uint64_t idx = UINT64_MAX, at;

		if (mrc && mrc != KV_ENOTFOUND)
			return kv_err(t, mrc, "seek");
		if (mrc == 0 && k.size == 16 && kv_get_be64(k.data) == ino)
			idx = kv_get_be64((unsigned char *)k.data + 8);
		if (idx != UINT64_MAX && idx * bs < size) {
			rc = kv_block_check(t, ino, idx, &v, &blen);
			if (rc)
				return rc;
			if (!kv_block_unwritten(&v)) { /* data: the whole block, to the size */
				if (whence == SEEK_DATA) {
					at = idx * bs;
					*out = at > off ? at : off;
					return 0;
				}
				if (idx == want) {
					want++;
					continue;
				}
			} else if (whence == SEEK_DATA) {
				continue; /* unwritten: a hole, as ext4 and tmpfs say */
			}
		} else if (whence == SEEK_DATA) {
			return -ENXIO; /* no data block left before EOF */
		}
		/* a hole at block want (a gap, an unwritten block, or EOF) */
		at = want * bs;
		*out = at > off ? (at < size ? at : size) : off;
		return 0;
	}
}
