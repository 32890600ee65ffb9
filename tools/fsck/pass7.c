/*
 * pass7.c - pass 7: the orphan list, the count of unwritten blocks and the
 * inode counter.
 *
 * Orphans: each key is an ino (8 bytes) naming an inode with no links (an
 * inode unlinked while open or looked up). One on a mounted image is
 * normal, and after a crash the next mount frees it: so an orphan with no
 * links is a note, not an error; -p and -y free it (kv_inode_purge). An
 * orphan with links is taken off the list; one naming no inode too.
 * The counter: every ino in use (an inode record, or a record of another
 * database left with a missing owner) must lie below the superblock's next
 * inode number, or a new inode would reuse it.
 *
 * Invariants:
 *  1. Pass 4 has already set the link counts that stay (fsck.h, 2), so an
 *     orphan freed here has no name: never an inode still reachable.
 *  2. With -n the counter is the one of the snapshot (pass 1), compared with
 *     the inodes of the same snapshot; after repairs, the writer's.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fsck.h"

static int orphan_record(struct fsck_walk *w, const struct fsck_rec *r)
{
	struct fsck *f = w->f;
	uint64_t ino = r->key.ino;
	struct fino *fi = fsck_merge(w, ino);
	struct pctx p = {.ino = ino};
	struct pend *pr;

	f->n_orphans++;
	if (!fi || !fino_live(fi)) {
		pr = fsck_problem(f, PR_ORPHAN_MISSING, &p);
		if (pr)
			return fsck_fix_del(f, KV_DB_ORPHAN, r->k, r->kl, ino, pr);
		if (ino > f->max_key)
			f->max_key = ino; /* a new inode must not land on the list */
		return 0;
	}
	if (fi->flags & F_BAD)
		return 0;
	if (fi->nlink) {
		p.num = fi->nlink;
		pr = fsck_problem(f, PR_ORPHAN_LINKED, &p);
		if (pr && !fsck_fix(f, FX_ORPHAN_UNLIST, ino, pr))
			return -ENOMEM;
		if (pr)
			fi->flags &= (uint8_t)~F_ORPHAN;
		return 0;
	}
	if (!f->tree_checked || fi->links || (S_ISDIR(fi->mode) && f->dirs[fi->dir].entries))
		return 0; /* named, or not empty (a problem pass 3 or 4 left), or unknown */
	pr = fsck_problem(f, PR_ORPHAN_FREE, &p);
	if (pr) {
		if (!fsck_fix(f, FX_ORPHAN_FREE, ino, pr))
			return -ENOMEM;
		fi->flags |= F_GONE;
	}
	return 0;
}

static int check_counter(struct fsck *f)
{
	struct kv_super sb;
	struct pctx p;
	struct pend *pr;
	struct fix *x;

	fsck_super(f, &sb);
	if (sb.next_ino > f->max_key)
		return 0;
	p = (struct pctx){.num = sb.next_ino, .num2 = f->max_key, .ino2 = f->max_key + 1};
	pr = fsck_problem(f, PR_COUNTER, &p);
	if (!pr)
		return 0;
	x = fsck_fix(f, f->max_key == UINT64_MAX ? FX_NONE : FX_COUNTER, 0, pr);
	if (!x)
		return -ENOMEM;
	x->rc = f->max_key == UINT64_MAX ? -EOVERFLOW : 0;
	x->u.next = f->max_key + 1;
	return 0;
}

/* The count of unwritten blocks against those pass 5 found in the same
 * snapshot (a damaged record was reported by pass 1), and the feature bit
 * an image holding them must carry. The repair counts them again, in its
 * own transaction, and sets the bit. */
static int check_unwritten(struct fsck *f)
{
	struct pctx p = {.num = f->unwritten, .num2 = f->n_unwritten};
	struct kv_super sb;
	struct pend *pr;

	fsck_super(f, &sb);
	if (!f->unwritten_bad && f->unwritten != f->n_unwritten)
		pr = fsck_problem(f, PR_UNWRITTEN_COUNT, &p);
	else if (f->n_unwritten && !(sb.feature_incompat & KV_FEATURE_INCOMPAT_UNWRITTEN))
		pr = fsck_problem(f, PR_UNWRITTEN_FLAG, &p);
	else
		return 0;
	return pr && !fsck_fix(f, FX_UNWRITTEN, 0, pr) ? -ENOMEM : 0;
}

int fsck_pass7(struct fsck *f)
{
	struct fsck_walk w = {.f = f};
	int rc;

	rc = fsck_walk(&w, KV_DB_ORPHAN, PR_ORPHAN_BAD_KEY, orphan_record);
	if (rc)
		return rc;
	rc = check_unwritten(f);
	if (rc == 0)
		rc = check_counter(f);
	fsck_info(f, "  %llu orphans; inode counter %s", (unsigned long long)f->n_orphans,
		  rc ? "?" : "checked");
	return rc;
}
