/*
 * share.c - blocks shared between files (copy_file_range): an extent record
 * says a run of a file's blocks reads as a run of another file's, and a
 * lend record indexes the same run by the file that stores it (its home).
 *
 * A borrowed block is stored once, under its home's key, its checksum
 * seeded by that key (data.c): a copy of a gigabyte writes two records per
 * KV_EXTENT_MAX blocks and moves no data. A block idx of a file with no
 * data record of its own reads as its extent's block, when one covers idx.
 *
 * Invariants:
 *  1. Every extent record has the lend record of the same parts and the
 *     other way round; both change in the same op.
 *  2. An extent names blocks its home stores in data records of their own,
 *     written (not fallocate's unwritten ones): a share of a borrowed block
 *     names the block's home, so chains are one step long. A block shorter
 *     than the block size is shared too (a small file's one block): its
 *     bytes lie below the borrower's size as they do below its home's.
 *  3. A file's data records and its extents never cover the same block, and
 *     no extent covers a block at or past the file's size.
 *  4. A lent block never changes: before its home writes, trims or drops
 *     it, each borrower gets a copy under its own key (re-checksummed). A
 *     home that is deleted keeps its lent blocks under its number (inode
 *     numbers are never reused) until the last borrower lets go of them.
 *     The copies add data: past the room for ordinary changes
 *     (kv_txn_reserved) none is made (-ENOSPC), nor does a write there
 *     make a borrowed block its own (data.c).
 *  5. An extent covers 1 to KV_EXTENT_MAX blocks: the lend records naming a
 *     block start at most KV_EXTENT_MAX - 1 blocks before it.
 *  6. in->nblocks counts borrowed blocks as the borrower's, as if each copy
 *     were whole (btrfs reports reflinked files so too).
 *  7. KV_INODE_LENDS and KV_INODE_BORROWS are set before the first record
 *     that needs them and never cleared: a file without them pays nothing.
 */
#include <assert.h>
#include <errno.h>

#include "kv_int.h"

static int missing(kv_txn *t, enum kv_db db)
{
	return (t->env->missing_dbs >> db) & 1;
}

static int decode(kv_txn *t, enum kv_db db, const kv_val *k, const kv_val *v,
		  struct kv_extent *x)
{
	if (kv_decode_extent(db, k->data, k->size, v->data, v->size, x) == 0)
		return 0;
	kv_log("inode %llu: a damaged %s record (fsck.kvfs repairs it)",
	       k->size >= 8 ? (unsigned long long)kv_get_be64(k->data) : 0ULL,
	       kv_db_names[db]);
	(void)t;
	return -EIO;
}

int kv_ext_find(kv_txn *t, uint64_t ino, uint64_t idx, struct kv_extent *x, uint64_t *next)
{
	unsigned char kb[16];
	kv_val k = {16, kb}, v;
	kv_ecur *c;
	int mrc, rc;

	*next = UINT64_MAX;
	if (missing(t, KV_DB_EXTENT))
		return -ENOENT;
	c = kv_cursor(t, KV_DB_EXTENT, &rc);
	if (!c)
		return rc;
	kv_put_be64(kb, ino);
	kv_put_be64(kb + 8, idx);
	mrc = kv_cget(t, c, &k, &v, KV_SET_RANGE);
	if (mrc == 0) {
		if (k.size == 16 && kv_get_be64(k.data) == ino) {
			rc = decode(t, KV_DB_EXTENT, &k, &v, x);
			if (rc)
				return rc;
			if (x->first == idx)
				return 0;
			*next = x->first;
		}
		mrc = kv_cget(t, c, &k, &v, KV_PREV);
	} else if (mrc == KV_ENOTFOUND) {
		mrc = kv_cget(t, c, &k, &v, KV_LAST);
	}
	if (mrc == KV_ENOTFOUND)
		return -ENOENT;
	if (mrc)
		return kv_err(t, mrc, "find extent");
	if (k.size != 16 || kv_get_be64(k.data) != ino)
		return -ENOENT;
	rc = decode(t, KV_DB_EXTENT, &k, &v, x);
	if (rc)
		return rc;
	return x->first + x->count > idx ? 0 : -ENOENT;
}

int kv_ext_block(kv_txn *t, const struct kv_extent *x, uint64_t idx, kv_val *v, size_t *len)
{
	uint64_t h = x->hfirst + (idx - x->first);
	unsigned char kb[16];
	kv_val k = {16, kb};
	int mrc;

	assert(idx >= x->first && idx - x->first < x->count);
	kv_put_be64(kb, x->home);
	kv_put_be64(kb + 8, h);
	mrc = kv_eget(t, KV_DB_DATA, &k, v);
	if (mrc == KV_ENOTFOUND || (mrc == 0 && kv_block_unwritten(v))) {
		kv_log("inode %llu block %llu: its home, inode %llu block %llu, is missing",
		       (unsigned long long)x->ino, (unsigned long long)idx,
		       (unsigned long long)x->home, (unsigned long long)h);
		return -EIO;
	}
	if (mrc)
		return kv_err(t, mrc, "get borrowed block");
	return kv_block_check(t, x->home, h, v, len);
}

/* A cursor on home's lend records from the first that may name block idx
 * (invariant 5), *mrc KV_SET_RANGE's code there; NULL with *rc 0 on a
 * version 1 image (it has none), with *rc an error else. kb: the key's
 * room, k and v: where the record is. */
static kv_ecur *lend_from(kv_txn *t, uint64_t home, uint64_t idx, unsigned char kb[32],
			     kv_val *k, kv_val *v, int *mrc, int *rc)
{
	kv_ecur *c;

	*rc = 0;
	*mrc = KV_ENOTFOUND;
	if (missing(t, KV_DB_LEND))
		return NULL;
	c = kv_cursor(t, KV_DB_LEND, rc);
	if (!c)
		return NULL;
	memset(kb, 0, 32);
	kv_put_be64(kb, home);
	kv_put_be64(kb + 8, idx >= KV_EXTENT_MAX - 1 ? idx - (KV_EXTENT_MAX - 1) : 0);
	*k = (kv_val){32, kb};
	*mrc = kv_cget(t, c, k, v, KV_SET_RANGE);
	return c;
}

int kv_lend_covered(kv_txn *t, uint64_t home, uint64_t idx, uint64_t *end, uint64_t *next)
{
	unsigned char kb[32];
	kv_val k, v;
	struct kv_extent x;
	kv_ecur *c;
	int mrc, rc;

	*end = idx;
	*next = UINT64_MAX;
	c = lend_from(t, home, idx, kb, &k, &v, &mrc, &rc);
	if (!c)
		return rc;
	for (; mrc == 0; mrc = kv_cget(t, c, &k, &v, KV_NEXT)) {
		if (k.size < 8 || kv_get_be64(k.data) != home)
			break;
		rc = decode(t, KV_DB_LEND, &k, &v, &x);
		if (rc)
			return rc;
		if (x.hfirst > idx) {
			*next = x.hfirst;
			break;
		}
		if (x.hfirst + x.count > *end)
			*end = x.hfirst + x.count;
	}
	if (mrc && mrc != KV_ENOTFOUND)
		return kv_err(t, mrc, "find lent blocks");
	return *end > idx;
}

/* Store x's extent and lend records (invariant 1). */
static int ext_put(kv_txn *t, const struct kv_extent *x)
{
	unsigned char kb[32], vb[KV_EXTENT_VLEN];
	kv_val k, v;
	int rc;

	assert(x->count >= 1 && x->count <= KV_EXTENT_MAX);
	kv_encode_extent(KV_DB_EXTENT, x, kb, &k.size, vb, &v.size);
	k.data = kb;
	v.data = vb;
	rc = kv_err(t, kv_eput(t, KV_DB_EXTENT, &k, &v, 0), "put extent");
	if (rc)
		return rc;
	kv_encode_extent(KV_DB_LEND, x, kb, &k.size, vb, &v.size);
	return kv_err(t, kv_eput(t, KV_DB_LEND, &k, &v, 0), "put lend");
}

static int ext_del(kv_txn *t, const struct kv_extent *x)
{
	unsigned char kb[32], vb[KV_EXTENT_VLEN];
	kv_val k, v;
	int mrc;

	for (enum kv_db db = KV_DB_EXTENT; db <= KV_DB_LEND; db++) {
		kv_encode_extent(db, x, kb, &k.size, vb, &v.size);
		k.data = kb;
		mrc = kv_edel(t, db, &k);
		if (mrc == KV_ENOTFOUND) /* the other half of a damaged pair */
			kv_log("inode %llu: extent at block %llu without its %s record",
			       (unsigned long long)x->ino, (unsigned long long)x->first,
			       kv_db_names[db]);
		else if (mrc)
			return kv_err(t, mrc, "delete extent");
	}
	return 0;
}

/* Delete home's data records [a, b) (counting the unwritten ones). */
static int drop_blocks(kv_txn *t, uint64_t home, uint64_t a, uint64_t b, int64_t *unwritten)
{
	unsigned char kb[16];
	kv_val k = {16, kb}, v;
	kv_ecur *c;
	int mrc, rc;

	c = kv_cursor(t, KV_DB_DATA, &rc);
	if (!c)
		return rc;
	kv_put_be64(kb, home);
	kv_put_be64(kb + 8, a);
	mrc = kv_cget(t, c, &k, &v, KV_SET_RANGE);
	while (mrc == 0) {
		if (k.size != 16 || kv_get_be64(k.data) != home ||
		    kv_get_be64((unsigned char *)k.data + 8) >= b)
			return 0;
		*unwritten += kv_block_unwritten(&v);
		mrc = kv_cdel(t, c);
		if (mrc)
			break;
		/* the cursor now stands on the following key (inode.c) */
		mrc = kv_cget(t, c, &k, &v, KV_NEXT);
	}
	return mrc == KV_ENOTFOUND ? 0 : kv_err(t, mrc, "delete blocks");
}

/* Drop home's blocks of [a, b) that no lend record names any more, and
 * the others of [a, b) too when all is set (a purge). */
static int drop_unlent(kv_txn *t, uint64_t home, uint64_t a, uint64_t b, int64_t *unwritten)
{
	uint64_t i = a, end, next;
	int rc;

	while (i < b) {
		rc = kv_lend_covered(t, home, i, &end, &next);
		if (rc < 0)
			return rc;
		if (rc) {
			i = end;
			continue;
		}
		end = next < b ? next : b;
		rc = drop_blocks(t, home, i, end, unwritten);
		if (rc)
			return rc;
		i = end;
	}
	return 0;
}

/* A borrower let go of home's blocks [a, b): a deleted home's blocks no
 * one borrows any more go (invariant 4). */
static int release(kv_txn *t, uint64_t home, uint64_t a, uint64_t b)
{
	unsigned char kb[8];
	kv_val k = {8, kb}, v;
	int64_t unwritten = 0;
	int mrc, rc;

	kv_put_be64(kb, home);
	mrc = kv_eget(t, KV_DB_INODE, &k, &v);
	if (mrc == 0)
		return 0; /* a live home keeps its blocks */
	if (mrc != KV_ENOTFOUND)
		return kv_err(t, mrc, "get home");
	rc = drop_unlent(t, home, a, b, &unwritten);
	return rc ? rc : kv_unwritten_add(t, -unwritten);
}

/* Take blocks [a, b) out of ino's extents: *dropped is how many were
 * borrowed. */
static int ext_cut(kv_txn *t, uint64_t ino, uint64_t a, uint64_t b, uint64_t *dropped)
{
	uint64_t pos = a, next, lo, hi;
	struct kv_extent x, part;
	int rc;

	*dropped = 0;
	kv_win_mark(t, ino); /* window.c invariant 3 */
	while (pos < b) {
		rc = kv_ext_find(t, ino, pos, &x, &next);
		if (rc == -ENOENT) {
			if (next >= b)
				break;
			pos = next;
			continue;
		}
		if (rc)
			return rc;
		lo = pos;
		hi = b - x.first < x.count ? b : x.first + x.count;
		rc = ext_del(t, &x);
		if (!rc && x.first < lo) {
			part = x;
			part.count = lo - x.first;
			rc = ext_put(t, &part);
		}
		if (!rc && hi < x.first + x.count) {
			part = x;
			part.first = hi;
			part.hfirst = x.hfirst + (hi - x.first);
			part.count = x.first + x.count - hi;
			rc = ext_put(t, &part);
		}
		if (!rc)
			rc = release(t, x.home, x.hfirst + (lo - x.first), x.hfirst + (hi - x.first));
		if (rc)
			return rc;
		*dropped += hi - lo;
		pos = hi;
	}
	return 0;
}

/* Copy a block value's bytes out of the map into the writer's buffer. */
static const void *out_of_map(kv_txn *t, const kv_val *v, size_t len)
{
	memcpy(t->env->w.wbuf, v->data, len);
	return t->env->w.wbuf;
}

int kv_ext_own(kv_txn *t, struct kv_inode *in, uint64_t idx)
{
	struct kv_extent x;
	uint64_t next, dropped;
	size_t len;
	kv_val v;
	int rc;

	rc = kv_ext_find(t, in->ino, idx, &x, &next);
	if (rc == -ENOENT)
		return 0;
	if (!rc)
		rc = kv_ext_block(t, &x, idx, &v, &len);
	if (!rc)
		rc = kv_block_put(t, in->ino, idx, out_of_map(t, &v, len), len, NULL, 0);
	return rc ? rc : ext_cut(t, in->ino, idx, idx + 1, &dropped);
}

/* Block value v of (home, h) copied to (ino, idx), checksummed for its new
 * key: a compressed one stays compressed (its frame copied, zstd.c). */
static int copy_block(kv_txn *t, uint64_t home, uint64_t h, kv_val *v, uint64_t ino,
		      uint64_t idx)
{
	uint64_t zsum;
	size_t len;

	switch (kv_block_verify(t->env->super.block_size, home, h, v->data, v->size,
				&len)) {
	case KV_BLOCK_ZSTD:
		len = v->size - KV_CSUM_LEN;
		zsum = kv_block_zcsum(ino, idx, v->data, len);
		return kv_block_put(t, ino, idx, out_of_map(t, v, len), len, &zsum, 0);
	case KV_BLOCK_OK:
		return kv_block_put(t, ino, idx, out_of_map(t, v, len), len, NULL, 0);
	default:
		return kv_block_check(t, home, h, v, &len); /* says what is wrong: -EIO */
	}
}

/* The first lend record of home naming a block of [a, b). */
static int lend_first(kv_txn *t, uint64_t home, uint64_t a, uint64_t b, struct kv_extent *x)
{
	unsigned char kb[32];
	kv_val k, v;
	kv_ecur *c;
	int mrc, rc;

	c = lend_from(t, home, a, kb, &k, &v, &mrc, &rc);
	if (!c)
		return rc ? rc : -ENOENT;
	for (; mrc == 0; mrc = kv_cget(t, c, &k, &v, KV_NEXT)) {
		if (k.size < 8 || kv_get_be64(k.data) != home)
			return -ENOENT;
		rc = decode(t, KV_DB_LEND, &k, &v, x);
		if (rc)
			return rc;
		if (x->hfirst >= b)
			return -ENOENT;
		if (x->hfirst + x->count > a)
			return 0;
	}
	return mrc == KV_ENOTFOUND ? -ENOENT : kv_err(t, mrc, "find lent blocks");
}

/* Home's blocks [a, b) are about to change: each borrower of one gets a
 * copy of its own first (invariant 4). */
static int lend_cow(kv_txn *t, uint64_t home, uint64_t a, uint64_t b)
{
	struct kv_extent x;
	unsigned char kb[16];
	kv_val k = {16, kb}, v;
	uint64_t lo, hi, dropped;
	int mrc, rc;

	while ((rc = lend_first(t, home, a, b, &x)) == 0) {
		/* the copies add data: not past the room for ordinary changes,
		 * where only what frees its own room may go (room.c) */
		if (kv_txn_reserved(t))
			return -ENOSPC;
		lo = x.hfirst > a ? x.hfirst : a;
		hi = b - x.hfirst < x.count ? b : x.hfirst + x.count;
		kv_win_mark(t, x.ino); /* window.c invariant 3 */
		for (uint64_t h = lo; h < hi; h++) {
			kv_put_be64(kb, home);
			kv_put_be64(kb + 8, h);
			mrc = kv_eget(t, KV_DB_DATA, &k, &v);
			if (mrc == KV_ENOTFOUND) {
				kv_log("inode %llu block %llu: lent, but missing",
				       (unsigned long long)home, (unsigned long long)h);
				return -EIO;
			}
			if (mrc)
				return kv_err(t, mrc, "get lent block");
			rc = copy_block(t, home, h, &v, x.ino, x.first + (h - x.hfirst));
			if (rc)
				return rc;
		}
		rc = ext_cut(t, x.ino, x.first + (lo - x.hfirst), x.first + (hi - x.hfirst),
			     &dropped);
		if (rc)
			return rc;
	}
	return rc == -ENOENT ? 0 : rc;
}

int kv_share_prepare(kv_txn *t, struct kv_inode *in, uint64_t a, uint64_t b, int keep_first,
		     int keep_last)
{
	uint64_t dropped;
	int rc = 0;

	if (a >= b)
		return 0;
	if (in->flags & KV_INODE_LENDS)
		rc = lend_cow(t, in->ino, a, b);
	if (rc || !(in->flags & KV_INODE_BORROWS))
		return rc;
	if (keep_first || (keep_last && b - 1 == a))
		rc = kv_ext_own(t, in, a);
	if (!rc && keep_last && b - 1 != a)
		rc = kv_ext_own(t, in, b - 1);
	if (!rc)
		rc = ext_cut(t, in->ino, a, b, &dropped);
	if (!rc)
		in->nblocks = in->nblocks > dropped ? in->nblocks - dropped : 0;
	return rc;
}

int kv_share_purge(kv_txn *t, uint64_t ino, uint64_t flags, int64_t *unwritten)
{
	uint64_t dropped;
	int rc = 0;

	if (flags & KV_INODE_BORROWS)
		rc = ext_cut(t, ino, 0, UINT64_MAX, &dropped);
	if (!rc && (flags & KV_INODE_LENDS))
		rc = drop_unlent(t, ino, 0, UINT64_MAX, unwritten);
	return rc;
}

/* ---------------------------------------------------------- the share -- */

struct run {
	struct kv_extent x; /* x.count 0: none yet */
	struct kv_inode *dst, *src;
	int lent;           /* src lends a block */
	int any;            /* an extent was stored */
};

static int run_flush(kv_txn *t, struct run *r)
{
	int rc;

	if (r->x.count == 0)
		return 0;
	rc = ext_put(t, &r->x);
	if (rc)
		return rc;
	r->dst->nblocks += r->x.count;
	r->lent |= r->x.home == r->src->ino;
	r->any = 1;
	r->x.count = 0;
	return 0;
}

/* Dst block d reads as count blocks of home from h on. */
static int run_add(kv_txn *t, struct run *r, uint64_t d, uint64_t home, uint64_t h,
		   uint64_t count)
{
	int rc;

	while (count) {
		uint64_t take;

		if (r->x.count && (r->x.home != home || r->x.hfirst + r->x.count != h ||
				   r->x.first + r->x.count != d || r->x.count == KV_EXTENT_MAX)) {
			rc = run_flush(t, r);
			if (rc)
				return rc;
		}
		if (r->x.count == 0) {
			r->x.ino = r->dst->ino;
			r->x.first = d;
			r->x.home = home;
			r->x.hfirst = h;
		}
		take = KV_EXTENT_MAX - r->x.count < count ? KV_EXTENT_MAX - r->x.count : count;
		r->x.count += take;
		d += take;
		h += take;
		count -= take;
	}
	return 0;
}

/* kv_data_share's walk: src's blocks [pos, stop) are still to share, src
 * block i into dst block didx + (i - sidx). */
struct share_walk {
	struct run r;
	kv_ecur *c;
	uint64_t sidx, didx, pos, stop;
};

/* Share src's data records from w->pos on while they run on (an unwritten
 * one is a hole); *next: the first block src stores past them. */
static int share_stored(kv_txn *t, struct share_walk *w, uint64_t *next)
{
	const uint64_t ino = w->r.src->ino;
	unsigned char kb[16];
	kv_val k, v;
	int mrc, rc;

	kv_put_be64(kb, ino);
	kv_put_be64(kb + 8, w->pos);
	k = (kv_val){16, kb};
	mrc = kv_cget(t, w->c, &k, &v, KV_SET_RANGE);
	*next = UINT64_MAX;
	while (mrc == 0 && k.size == 16 && kv_get_be64(k.data) == ino) {
		uint64_t i = kv_get_be64((unsigned char *)k.data + 8);

		if (i != w->pos || i >= w->stop) {
			*next = i;
			break;
		}
		if (!kv_block_unwritten(&v))
			rc = run_add(t, &w->r, w->didx + (i - w->sidx), ino, i, 1);
		else
			rc = run_flush(t, &w->r); /* unwritten: a hole */
		if (rc)
			return rc;
		w->pos++;
		mrc = kv_cget(t, w->c, &k, &v, KV_NEXT);
	}
	if (mrc && mrc != KV_ENOTFOUND)
		return kv_err(t, mrc, "share");
	return 0;
}

/* src does not store block w->pos: borrowed, its extent's blocks are
 * shared from their home (invariant 2); else a hole up to next, the
 * block src stores next, or the next extent. */
static int share_unstored(kv_txn *t, struct share_walk *w, uint64_t next)
{
	struct kv_inode *src = w->r.src;
	struct kv_extent x;
	uint64_t xnext = UINT64_MAX;
	int rc = -ENOENT;

	if (src->flags & KV_INODE_BORROWS)
		rc = kv_ext_find(t, src->ino, w->pos, &x, &xnext);
	if (rc == 0) {
		uint64_t end = x.first + x.count < w->stop ? x.first + x.count : w->stop;

		rc = run_add(t, &w->r, w->didx + (w->pos - w->sidx), x.home,
			     x.hfirst + (w->pos - x.first), end - w->pos);
		w->pos = end;
	} else if (rc == -ENOENT) {
		rc = run_flush(t, &w->r);
		next = next < xnext ? next : xnext;
		w->pos = next < w->stop ? next : w->stop;
	}
	return rc;
}

/* The last extent stored, and what the records stored say of src and of
 * the image (invariant 7). */
static int share_finish(kv_txn *t, struct run *r)
{
	int rc;

	rc = run_flush(t, r);
	if (rc)
		return rc;
	if (r->lent && !(r->src->flags & KV_INODE_LENDS)) {
		r->src->flags |= KV_INODE_LENDS; /* invariant 7 */
		rc = kv_inode_put(t, r->src);
		if (rc)
			return rc;
	}
	if (r->any)
		return kv_feature_set(t, KV_FEATURE_INCOMPAT_SHARED);
	return 0;
}

int kv_data_share(kv_txn *t, struct kv_inode *dst, uint64_t didx, struct kv_inode *src,
		  uint64_t sidx, uint64_t n)
{
	const uint64_t bs = t->env->super.block_size, max = (uint64_t)INT64_MAX / bs;
	struct share_walk w = {.r = {.dst = dst, .src = src}, .sidx = sidx, .didx = didx};
	uint64_t next;
	int rc;

	kv_win_mark(t, dst->ino); /* window.c invariant 3 */
	if (!t->write)
		return -EROFS;
	if (dst->ino == src->ino)
		return -EINVAL;
	if (didx > max || n > max - didx || sidx > max || n > max - sidx)
		return -EFBIG;
	if (n == 0)
		return 0;
	assert(kv_role_mine(t->env)); /* kv_int.h invariant 2: wbuf */
	/* what dst held there goes (invariant 3) */
	if (dst->size > didx * bs) {
		rc = kv_data_zero_range(t, dst, didx * bs, (didx + n) * bs);
		if (rc)
			return rc;
	}
	dst->flags |= KV_INODE_BORROWS; /* invariant 7 */
	w.pos = sidx;
	w.stop = sidx + n;
	w.c = kv_cursor(t, KV_DB_DATA, &rc);
	if (!w.c)
		return rc;
	while (w.pos < w.stop) {
		rc = share_stored(t, &w, &next);
		if (rc == 0 && w.pos < w.stop)
			rc = share_unstored(t, &w, next);
		if (rc)
			return rc;
	}
	rc = share_finish(t, &w.r);
	if (rc)
		return rc;
	if ((didx + n) * bs > dst->size)
		dst->size = (didx + n) * bs;
	return 0;
}
