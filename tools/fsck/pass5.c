/*
 * pass5.c - pass 5: data blocks. One walk of the data database in key
 * order, in step with the index (keys are ino, block index): every block's
 * bytes are read and checksummed.
 *
 * Per block: a well-formed key; an owner that exists and is a regular file;
 * a place below the file's size (a block wholly past it is dropped, one
 * that straddles it is trimmed at it, as truncate would have); a length of
 * 1 to the block size, or 0 for an unwritten block; its checksum, and for
 * a block stored compressed (docs/FORMAT.md) a frame that decompresses to
 * its data length, which is what the size is checked against. Every record
 * of no bytes is counted, for pass 7, as the image counts them. A damaged
 * block is dropped, the file keeping a hole there; the problem names the
 * inode, the block and its offset. Per inode, once its blocks are known:
 * nblocks equals the blocks that stay stored (every inode, also those with
 * no block at all), and those it borrows. Once all are known: the
 * superblock says it holds compressed blocks if it does.
 *
 * Shared blocks (share.c) are checked before the walk and in step with it:
 * a block that extents name (lent) is kept when its inode is missing (a
 * ghost home's), and a repair that would drop it or cut it gives its
 * borrowers a copy first, as truncate does. A borrower's count is checked
 * once the walk is over: its borrowed blocks are known only then.
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

#include "cli.h"
#include "fsck.h"

/* A compressed block's data, unpacked to check it (fsck runs one thread). */
static unsigned char zbuf[KV_BLOCK_SIZE_MAX];

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

/* How the record r of inode ino stands (its data bytes into *len: a
 * compressed block's once unpacked). -ENOMEM. */
static int block_state(struct fsck *f, uint64_t ino, const struct fsck_rec *r, size_t *len)
{
	const void *data;
	int rc;

	*len = kv_block_len(r->vl);
	if ((*len == 0 && r->vl != KV_BLOCK_UNWRITTEN_LEN) || *len > f->bs)
		return BS_BAD_LEN;
	rc = cli_block_data(f->env, ino, r->key.idx, r->v, r->vl, zbuf, &data, len);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		return rc == -EBADMSG ? BS_FRAME : BS_CSUM;
	if (rc == 1) {
		f->n_zblocks++;
		f->n_zdata += *len;
		f->n_zframes += kv_block_len(r->vl);
	}
	if (*len == 0)
		return BS_UNWRITTEN;
	return *len == f->bs ? BS_GOOD : BS_SHORT;
}

/* The problem of a damaged block in state st; 0 for a sound one. */
static enum fsck_pr damage(enum fsck_bstate st)
{
	switch (st) {
	case BS_BAD_LEN: return PR_BLOCK_BAD_LEN;
	case BS_CSUM: return PR_BLOCK_CSUM;
	case BS_FRAME: return PR_BLOCK_FRAME;
	default: return 0;
	}
}

/* Report problem code for lent block idx of fi at offset off, and with the
 * repair cut it as truncate would: its borrowers get a copy first. 1:
 * dropped. */
static int give_away(struct fsck *f, enum fsck_pr code, struct pctx *p, struct fino *fi,
		     uint64_t off)
{
	struct pend *pr = fsck_problem(f, code, p);
	struct fix *x;

	if (!pr)
		return 0;
	x = fsck_fix(f, FX_BLOCK_TRIM, fi->ino, pr);
	if (!x)
		return -ENOMEM;
	x->u.trim.size = off;
	x->u.trim.end = off + f->bs;
	x->u.trim.flags = KV_INODE_LENDS;
	return 1;
}

/* Check one block of a live owner, in state st, that lent extents of the
 * model name; 1 when it is dropped. */
static int check_block(struct fsck *f, struct fino *fi, const struct fsck_rec *r,
		       enum fsck_bstate st, size_t len, int lent)
{
	uint64_t idx = r->key.idx;
	struct pctx p = {.ino = fi->ino, .num = idx, .str = fsck_type_name(fi->mode)};
	uint64_t off = idx <= UINT64_MAX / f->bs ? idx * f->bs : UINT64_MAX;
	enum fsck_pr bad = damage(st);
	struct pend *pr;
	struct fix *x;

	if (fi->flags & F_BAD)
		return 0; /* its type is unknown: the block stays with it */
	if (lent && st != BS_GOOD) {
		/* lent, but of no use to its borrowers, whose problem was left:
		 * only its damage is its own (dropping it else could lose what
		 * a borrower reads of a short block) */
		p.num2 = off;
		if (bad)
			return drop(f, bad, &p, r);
		f->n_bytes += len;
		return 0;
	}
	lent = lent && off <= (uint64_t)INT64_MAX;
	if (!S_ISREG(fi->mode))
		return lent ? give_away(f, PR_BLOCK_NOT_FILE, &p, fi, off)
			    : drop(f, PR_BLOCK_NOT_FILE, &p, r);
	p.num2 = fi->size;
	if (off >= fi->size)
		return lent ? give_away(f, PR_BLOCK_PAST_EOF, &p, fi, off)
			    : drop(f, PR_BLOCK_PAST_EOF, &p, r);
	p.num2 = off;
	if (bad)
		return drop(f, bad, &p, r);
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
		x->u.trim.flags = lent ? KV_INODE_LENDS : 0;
	}
	return 0;
}

/* A block of an inode that is missing: a ghost home's, kept while an
 * extent of the model names it (lent), else dropped. 1 when dropped. */
static int ghost_block(struct fsck *f, const struct fsck_rec *r, enum fsck_bstate st,
		       size_t len, int lent)
{
	uint64_t ino = r->key.ino, idx = r->key.idx;
	struct pctx p = {.ino = ino, .num = idx,
			 .num2 = idx <= UINT64_MAX / f->bs ? idx * f->bs : UINT64_MAX};
	int rc;

	if (!lent) {
		rc = drop(f, PR_BLOCK_NO_OWNER, &p, r);
		if (rc == 0 && ino > f->max_key)
			f->max_key = ino; /* it stays: no new inode may inherit it */
		return rc;
	}
	if (ino > f->max_key)
		f->max_key = ino;
	if (damage(st))
		return drop(f, damage(st), &p, r);
	f->n_bytes += len;
	return 0;
}

/* Check the block counts of the inodes the walk leaves behind: those below
 * ino, or all that are left when last. */
static int settle_counts(struct fsck_walk *w, uint64_t *counted, uint64_t ino, int last)
{
	struct fsck *f = w->f;
	int rc;

	for (; w->ci < f->nino && (last || f->ino[w->ci].ino < ino); w->ci++, *counted = 0) {
		/* a borrower's count waits for its borrowed blocks (share.c) */
		rc = fsck_share_own(f, &f->ino[w->ci], *counted);
		if (rc == 0)
			rc = check_count(f, &f->ino[w->ci], *counted);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int block_record(struct fsck_walk *w, const struct fsck_rec *r)
{
	struct fsck *f = w->f;
	uint64_t *counted = w->arg; /* blocks kept of the inode at w->ci */
	uint64_t ino = r->key.ino;
	struct fino *fi;
	size_t len;
	int rc, lent, st;

	if ((rc = settle_counts(w, counted, ino, 0)) != 0)
		return rc;
	f->n_blocks++;
	/* as the image counts them: every record of no bytes, whatever
	 * becomes of it (a repair that drops one counts it out) */
	f->n_unwritten += r->vl == KV_BLOCK_UNWRITTEN_LEN;
	fi = fsck_merge(w, ino);
	st = block_state(f, ino, r, &len);
	if (st < 0)
		return st;
	/* the extents that name it first: whether it stays lent decides what
	 * becomes of it */
	lent = fsck_share_block(f, ino, r->key.idx, st, len);
	if (lent < 0)
		return lent;
	if (!fi || !fino_live(fi)) {
		rc = ghost_block(f, r, st, len, lent);
	} else {
		rc = check_block(f, fi, r, st, len, lent);
		if (rc == 0)
			(*counted)++;
	}
	return rc < 0 ? rc : 0;
}

int fsck_pass5(struct fsck *f)
{
	uint64_t counted = 0, n;
	struct fsck_walk w = {.f = f, .arg = &counted};
	int rc;

	/* the count of the snapshot the walk reads (pass 7 compares them) */
	f->unwritten_bad = kv_unwritten_get(f->txn, &f->unwritten) != 0;
	for (enum kv_db db = KV_DB_EXTENT; db <= KV_DB_LEND; db++)
		if (kv_db_count(f->txn, db, &n) == 0)
			f->prog_total += n; /* share.c walks them too */
	rc = fsck_share_begin(f);
	if (!rc)
		rc = fsck_walk(&w, KV_DB_DATA, PR_BLOCK_BAD_KEY, block_record);
	if (!rc) /* the inodes past the last block */
		rc = settle_counts(&w, &counted, 0, 1);
	fsck_info(f, "  %llu blocks (%llu unwritten, %llu compressed: %llu bytes of data in "
		  "frames of %llu, ratio %.2f), %llu bytes verified",
		  (unsigned long long)f->n_blocks, (unsigned long long)f->n_unwritten,
		  (unsigned long long)f->n_zblocks, (unsigned long long)f->n_zdata,
		  (unsigned long long)f->n_zframes,
		  f->n_zframes ? (double)f->n_zdata / (double)f->n_zframes : 0,
		  (unsigned long long)f->n_bytes);
	if (!rc)
		rc = fsck_share_end(f);
	if (!rc) /* kvfs sets its bit with the first compressed block */
		rc = fsck_fix_feature(f, PR_COMPRESSED_FLAG, f->n_zblocks,
				      KV_FEATURE_INCOMPAT_COMPRESSED);
	fsck_share_free(f);
	return rc;
}
