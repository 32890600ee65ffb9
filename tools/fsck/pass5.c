/*
 * pass5.c - pass 5: data blocks. One walk of the data database in key
 * order, in step with the index (keys are ino, block index): every block's
 * bytes are read and checksummed.
 *
 * Per block: a well-formed key; an owner that exists and is a regular file;
 * a place below the file's size (a block wholly past it is dropped, one
 * that straddles it is trimmed at it, as truncate would have); a length of
 * 1 to the block size, or 0 for an unwritten block; its checksum. Every
 * record of no bytes is counted, for pass 7, as the image counts them. A damaged block is dropped, the file
 * keeping a hole there; the problem names the inode, the block and its
 * offset. Per inode, once its blocks are known: nblocks equals the blocks
 * that stay stored (every inode, also those with no block at all).
 *
 * Invariants:
 *  1. The walk and the index advance together: each inode's blocks are
 *     counted in one run, then its count is checked and the index moves on.
 *  2. A block that is left where it is counts, damaged or not: nblocks is
 *     the number of records stored, as kv_data_* keep it.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fsck.h"

static int check_count(struct fsck *f, struct fino *fi, uint64_t counted)
{
	struct pctx p = {.ino = fi->ino, .num = fi->nblocks, .num2 = counted};

	if (!fino_live(fi) || (fi->flags & F_BAD) || fi->nblocks == counted)
		return 0;
	return fsck_fix_field(f, PR_NBLOCKS, &p, fi, SET_NBLOCKS, counted);
}

/* Report problem code for the block r; drop it when repaired.
 * 1: dropped. */
static int drop(struct fsck *f, enum fsck_pr code, struct pctx *p, const struct fsck_rec *r)
{
	struct pend *pr = fsck_problem(f, code, p);

	if (!pr)
		return 0;
	return fsck_fix_del(f, KV_DB_DATA, r->k, r->kl, p->ino, pr) ? -ENOMEM : 1;
}

/* Check one block of a live owner; 1 when it is dropped. */
static int check_block(struct fsck *f, struct fino *fi, const struct fsck_rec *r)
{
	uint64_t idx = r->key.idx;
	size_t vl = r->vl;
	struct pctx p = {.ino = fi->ino, .num = idx, .str = fsck_type_name(fi->mode)};
	uint64_t off = idx <= UINT64_MAX / f->bs ? idx * f->bs : UINT64_MAX;
	struct pend *pr;
	struct fix *x;
	size_t len;

	if (fi->flags & F_BAD)
		return 0; /* its type is unknown: the block stays with it */
	if (!S_ISREG(fi->mode))
		return drop(f, PR_BLOCK_NOT_FILE, &p, r);
	p.num2 = fi->size;
	if (off >= fi->size)
		return drop(f, PR_BLOCK_PAST_EOF, &p, r);
	p.num2 = off;
	len = kv_block_len(vl);
	if ((len == 0 && vl != KV_BLOCK_UNWRITTEN_LEN) || len > f->bs)
		return drop(f, PR_BLOCK_BAD_LEN, &p, r);
	if (kv_check_block(f->env, fi->ino, idx, r->v, vl, &len) != 0)
		return drop(f, PR_BLOCK_CSUM, &p, r);
	if (len == 0)
		return 0; /* unwritten (fallocate's): no bytes */
	f->n_bytes += len;
	if (off + len <= fi->size)
		return 0;
	p.num2 = fi->size;
	pr = fsck_problem(f, PR_BLOCK_TAIL, &p);
	if (pr) {
		x = fsck_fix(f, FX_BLOCK_TRIM, fi->ino, pr);
		if (!x)
			return -ENOMEM;
		x->u.trim.size = fi->size;
		x->u.trim.end = off + f->bs;
	}
	return 0;
}

/* Check the block counts of the inodes the walk leaves behind: those below
 * ino, or all that are left when last. */
static int settle_counts(struct fsck_walk *w, uint64_t *counted, uint64_t ino, int last)
{
	struct fsck *f = w->f;
	int rc;

	for (; w->ci < f->nino && (last || f->ino[w->ci].ino < ino); w->ci++, *counted = 0)
		if ((rc = check_count(f, &f->ino[w->ci], *counted)) != 0)
			return rc;
	return 0;
}

static int block_record(struct fsck_walk *w, const struct fsck_rec *r)
{
	struct fsck *f = w->f;
	uint64_t *counted = w->arg; /* blocks kept of the inode at w->ci */
	uint64_t ino = r->key.ino;
	struct fino *fi;
	int rc;

	if ((rc = settle_counts(w, counted, ino, 0)) != 0)
		return rc;
	f->n_blocks++;
	/* as the image counts them: every record of no bytes, whatever
	 * becomes of it (a repair that drops one counts it out) */
	f->n_unwritten += r->vl == KV_BLOCK_UNWRITTEN_LEN;
	fi = fsck_merge(w, ino);
	if (!fi || !fino_live(fi)) {
		rc = drop(f, PR_BLOCK_NO_OWNER, &(struct pctx){.ino = ino, .num = r->key.idx}, r);
		if (rc == 0 && ino > f->max_key)
			f->max_key = ino; /* it stays: no new inode may inherit it */
	} else {
		rc = check_block(f, fi, r);
		if (rc == 0)
			(*counted)++;
	}
	return rc < 0 ? rc : 0;
}

int fsck_pass5(struct fsck *f)
{
	uint64_t counted = 0;
	struct fsck_walk w = {.f = f, .arg = &counted};
	int rc;

	/* the count of the snapshot the walk reads (pass 7 compares them) */
	f->unwritten_bad = kv_unwritten_get(f->txn, &f->unwritten) != 0;
	rc = fsck_walk(&w, KV_DB_DATA, PR_BLOCK_BAD_KEY, block_record);
	if (!rc) /* the inodes past the last block */
		rc = settle_counts(&w, &counted, 0, 1);
	fsck_info(f, "  %llu blocks (%llu unwritten), %llu bytes verified",
		  (unsigned long long)f->n_blocks, (unsigned long long)f->n_unwritten,
		  (unsigned long long)f->n_bytes);
	return rc;
}
