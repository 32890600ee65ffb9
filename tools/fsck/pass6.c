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
 * The two POSIX ACLs (kv/acl.c) are checked as the kernel would: a value
 * kv_acl_check refuses is damage (-y drops it, as e2fsck clears a damaged
 * ACL: kv/acl.c's rules cannot tell what it granted); an ACL the kernel
 * never sets (any on a symlink, a default ACL on a non-directory) grants
 * nothing and cannot be removed through a mount, so -p drops it. Left
 * alone, as e2fsck leaves them: an access ACL whose owner, group class or
 * other entry disagrees with the mode (kvfs keeps them in step, but a
 * chmod under -o noacl does not rewrite the ACL, as ext4's does not; the
 * next chmod or setfacl with ACLs on brings them together), and an access
 * ACL the mode says all of (kvfs stores none, but one stored grants what
 * the mode does).
 *
 * Invariants:
 *  1. An attribute whose owner is missing and that is left in place raises
 *     the counter's floor (f->max_key): a new inode must not inherit it.
 *  2. Only a name the daemon cannot serve, or an ACL the kernel could not
 *     have set, is ever dropped for its name.
 */
#include <errno.h>
#include <sys/stat.h>

#include "fsck.h"

/* An ACL of inode fi (mode known) the kernel would never have set. */
static int acl_misplaced(const struct fino *fi, int type)
{
	return S_ISLNK(fi->mode) || (type == KV_ACL_TYPE_DEFAULT && !S_ISDIR(fi->mode));
}

_Static_assert(KV_ACL_ENTRIES_MAX == 511, "the message below names the limit");

static int xattr_record(struct fsck_walk *w, const struct fsck_rec *r)
{
	struct fsck *f = w->f;
	uint64_t ino = r->key.ino;
	const struct fino *fi = fsck_merge(w, ino);
	struct pctx p = {.ino = ino, .name = r->key.name, .namelen = r->key.namelen, .num = r->vl,
			 .num2 = KV_XATTR_SIZE_MAX};
	int rule = kv_xattr_name_check(r->key.name, r->key.namelen);
	int acl = kv_acl_type(r->key.name, r->key.namelen), bad;
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
	} else if (acl && !(fi->flags & F_BAD) && acl_misplaced(fi, acl)) {
		code = PR_XATTR_ACL_PLACE;
		p.str = fsck_type_name(fi->mode);
	} else if (acl && (bad = kv_acl_check(r->v, r->vl)) != 0) {
		code = PR_XATTR_ACL_BAD;
		p.str = bad == -E2BIG ? "more than 511 entries, the most the kernel reads back"
				      : "not an ACL the kernel accepts";
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
