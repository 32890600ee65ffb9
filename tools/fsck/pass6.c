/*
 * pass6.c - pass 6: extended attributes. One walk of the xattr database in
 * key order (ino, then name), in step with the index.
 *
 * Per attribute: a key of an ino and a name of 1 to 255 bytes with no NUL;
 * a value of at most 64 KiB; an owner that exists. The name rule is the
 * daemon's (kv_xattr_name_check): a malformed name (-ERANGE) is damage; a
 * well-formed one the rule refuses (outside user., trusted. and security.,
 * or a prefix alone) is a warning, kept in every mode: an older kvfs stored
 * such names, and the daemon still reads and removes them.
 *
 * Invariants:
 *  1. An attribute whose owner is missing and that is left in place raises
 *     the counter's floor (f->max_key): a new inode must not inherit it.
 *  2. Only a name the daemon cannot serve is ever dropped for its name.
 */
#include <errno.h>
#include <string.h>

#include "fsck.h"

static int xattr_record(struct fsck_walk *w, const struct fsck_rec *r)
{
	struct fsck *f = w->f;
	uint64_t ino = r->key.ino;
	const struct fino *fi = fsck_merge(w, ino);
	struct pctx p = {.ino = ino, .name = r->key.name, .namelen = r->key.namelen, .num = r->vl,
			 .num2 = KV_XATTR_SIZE_MAX};
	int rule = kv_xattr_name_check(r->key.name, r->key.namelen);
	enum fsck_pr code;
	struct pend *pr;

	f->n_xattrs++;
	if (!fi || !fino_live(fi))
		code = PR_XATTR_NO_OWNER;
	else if (rule == -ERANGE)
		code = PR_XATTR_BAD_NAME;
	else if (r->vl > KV_XATTR_SIZE_MAX)
		code = PR_XATTR_TOO_BIG;
	else if (rule) {
		code = PR_XATTR_OLD_NAME;
		p.str = rule == -EINVAL ? "is a namespace prefix with nothing after it"
					: "is in no namespace kvfs implements";
	} else
		return 0;
	pr = fsck_problem(f, code, &p);
	if (pr)
		return fsck_fix_del(f, KV_DB_XATTR, r->k, r->kl, ino, pr);
	if (code == PR_XATTR_NO_OWNER && ino > f->max_key)
		f->max_key = ino;
	return 0;
}

int fsck_pass6(struct fsck *f)
{
	struct fsck_walk w = {.f = f};
	int rc;

	rc = fsck_walk(&w, KV_DB_XATTR, PR_XATTR_BAD_KEY, xattr_record);
	fsck_info(f, "  %llu extended attributes", (unsigned long long)f->n_xattrs);
	return rc;
}
