/*
 * pass4.c - pass 4: link counts, from the names pass 3 counted (in memory,
 * no database walk).
 *
 * A directory has 2 + its subdirectories ("." and its name, and each
 * child's ".."); any other inode as many links as entries name it. An inode
 * with no name is skipped: a true orphan has 0 already (pass 3 checked), and
 * one pass 3 left unreachable (its repair needs -y) would get its count from
 * the name in /lost+found it does not have yet.
 *
 * Invariants:
 *  1. The expected count is computed from counters that already reflect the
 *     repairs queued by passes 2 and 3 (fsck.h, 2).
 */
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fsck.h"

static uint32_t expected(struct fsck *f, const struct fino *fi)
{
	uint64_t n;

	if (!S_ISDIR(fi->mode))
		return fi->links;
	n = 2 + (uint64_t)fino_dir(f, fi)->subdirs;
	return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

int fsck_pass4(struct fsck *f)
{
	if (!f->tree_checked)
		return 0; /* no root: no names were counted */
	for (size_t i = 0; i < f->nino; i++) {
		struct fino *fi = &f->ino[i];
		struct pctx p = {.ino = fi->ino};
		uint32_t want;
		int rc;

		fsck_tick(f, 1);
		if (!fino_live(fi) || (fi->flags & (F_BAD | F_UNREACH)))
			continue;
		if (fi->links == 0 && fi->ino != KV_ROOT_INO)
			continue; /* an orphan (its count is 0), or left unreachable */
		want = expected(f, fi);
		if (fi->nlink == want)
			continue;
		p.num = fi->nlink;
		p.num2 = want;
		if ((rc = fsck_fix_field(f, PR_NLINK, &p, fi, SET_NLINK, want)) != 0)
			return rc;
	}
	return 0;
}
