/*
 * xattr.c - extended attributes. The kernel checks namespace permissions
 * (trusted.* needs CAP_SYS_ADMIN, user.* only on files and directories) but
 * passes FUSE every name of 1 to 255 bytes; kvfs applies the name rule a
 * local filesystem's handler table applies (kv_xattr_name_check, the table
 * in kv/xattr.c): a name in no namespace kvfs implements is EOPNOTSUPP
 * ("foo.bar", "system.*" but the two ACLs), a namespace prefix alone EINVAL
 * ("user.").
 *
 * POSIX ACLs are two of these xattrs (kv/acl.c). With FUSE_CAP_POSIX_ACL
 * the kernel checks the value setfacl gives, sends it in its own encoding,
 * enforces what getxattr returns and caches it; the rest is the
 * filesystem's: setting an access ACL sets the mode's permission bits, and
 * one the mode says all of is not stored (ext4 and tmpfs do both).
 *
 * Invariants:
 *  1. setxattr never stores a name the rule refuses.
 *  2. A refused name an image already holds (kvfs once stored any name) is
 *     served like any other by getxattr, listxattr and removexattr, so a
 *     user can see and remove it; where none is stored they answer the
 *     rule's errno, as ext4 and tmpfs do.
 *  3. With -o noacl the two ACL names are EOPNOTSUPP to every request and
 *     left out of listings, stored or not, as ext4 mounted noacl answers.
 */
#include <errno.h>
#include <string.h>
#include <sys/xattr.h>

#include "fs.h"

/* The rule's errno for name, or 0; for a lookup or removal that found
 * nothing (-ENODATA), it is the answer (invariant 2). */
static int name_refused(const char *name)
{
	return kv_xattr_name_check(name, strlen(name));
}

/* Invariant 3. */
static int acl_off(const char *name)
{
	return !fs.cfg.acl && kv_acl_name(name);
}

struct xattr_args {
	uint64_t ino;
	const char *name;
	const char *value;
	size_t size;
	int flags;
	int refused; /* removexattr: the rule's errno for name, or 0 */
	const struct fs_cred *cred; /* setxattr */
};

int fs_acl_get(kv_txn *t, uint64_t ino, const char *name, unsigned char *buf, size_t *len)
{
	const void *val;
	int rc = fs.cfg.acl ? kv_xattr_get(t, ino, name, &val, len) : -ENODATA;

	if (rc)
		return rc;
	if (kv_acl_check(val, *len)) {
		fs_log("inode %llu: a damaged %s (fsck.kvfs repairs it)", (unsigned long long)ino,
		       name);
		return -EIO;
	}
	memcpy(buf, val, *len); /* out of the map: the caller changes pages */
	return 0;
}

/* setfacl's access ACL: the mode's permission bits follow it; one the mode
 * says all of is not stored; the set-group-ID bit goes unless the caller
 * is in the file's group or root (the kernel would tell with
 * FUSE_SETXATTR_ACL_KILL_SGID, which libfuse 3.14 does not pass on). */
static int set_access_acl(kv_txn *t, const struct xattr_args *a, struct kv_inode *in)
{
	uint32_t mode = in->mode;
	int rc = kv_acl_mode(a->value, a->size, &mode);

	if (rc < 0)
		return rc;
	if (a->cred->uid != 0 && !fs_cred_in_group(a->cred, in->gid))
		mode &= ~(uint32_t)S_ISGID;
	in->mode = mode;
	if (rc == 0) {
		rc = kv_xattr_remove(t, in->ino, KV_ACL_ACCESS);
		return rc == -ENODATA ? 0 : rc;
	}
	return kv_xattr_set(t, in->ino, KV_ACL_ACCESS, a->value, a->size, a->flags);
}

static int apply_setxattr(kv_txn *t, void *arg)
{
	struct xattr_args *a = arg;
	struct kv_inode in;
	int acl = kv_acl_name(a->name), rc = kv_inode_get(t, a->ino, &in);

	if (rc)
		return rc;
	/* the kernel refuses these two before sending: for the cores' callers */
	if (acl && S_ISLNK(in.mode))
		return -EOPNOTSUPP;
	if (acl == KV_ACL_TYPE_DEFAULT && !S_ISDIR(in.mode))
		return -EACCES;
	if (acl == KV_ACL_TYPE_ACCESS)
		rc = set_access_acl(t, a, &in);
	else
		rc = kv_xattr_set(t, a->ino, a->name, a->value, a->size, a->flags);
	if (rc)
		return rc;
	in.ctime_ns = fs_now_ns();
	return kv_inode_put(t, &in);
}

static int apply_removexattr(kv_txn *t, void *arg)
{
	struct xattr_args *a = arg;
	struct kv_inode in;
	int rc = kv_inode_get(t, a->ino, &in);

	if (!rc)
		rc = kv_xattr_remove(t, a->ino, a->name);
	/* an ACL that is not there is removed already: ext4 and tmpfs
	 * answer 0 to its removexattr, and to a set of an empty one, which
	 * the kernel sends as a removal */
	if (rc == -ENODATA && kv_acl_name(a->name))
		rc = 0;
	if (rc == -ENODATA && a->refused)
		rc = a->refused;
	if (rc)
		return rc;
	in.ctime_ns = fs_now_ns();
	return kv_inode_put(t, &in);
}

int fs_do_setxattr(uint64_t ino, const char *name, const void *value, size_t size, int flags,
		   const struct fs_cred *c)
{
	struct xattr_args a = {.ino = ino, .name = name, .value = value, .size = size,
			       .flags = flags, .cred = c};
	int rc = acl_off(name) ? -EOPNOTSUPP : name_refused(name);
	uint32_t mode = 0;
	unsigned op_flags = 0;

	/* an access ACL the mode says all of (setfacl -b) removes the stored
	 * one: a delete, which works when full, as removexattr does */
	if (kv_acl_name(name) == KV_ACL_TYPE_ACCESS && kv_acl_mode(value, size, &mode) == 0)
		op_flags = KV_OP_RESERVE;
	fs_itable_xattr_changing(ino); /* before the change: no stale "none" */
	if (!rc)
		rc = fs_write(apply_setxattr, &a, op_flags);
	/* an access ACL set the mode: a LOOKUP or GETATTR answered from
	 * before it may reach the kernel after this reply, which only marks
	 * the attributes stale, and be cached for the whole timeout. The
	 * notification counts as a newer version of them, so the kernel
	 * drops such an answer (attributes only: never waits). */
	if (!rc && kv_acl_name(name) == KV_ACL_TYPE_ACCESS)
		fs_notify_inval(ino, -1, 0);
	return rc;
}

void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		    size_t size, int flags)
{
	gid_t groups[NGROUPS_KEEP];
	struct fs_cred c;

	fs_caller(req, kv_acl_name(name) == KV_ACL_TYPE_ACCESS, &c, groups);
	fuse_reply_err(req, -fs_do_setxattr(ino, name, value, size, flags, &c));
}

void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct xattr_args a = {.ino = ino, .name = name, .refused = name_refused(name)};
	int rc = -ERANGE;

	fs_itable_xattr_changing(ino);
	if (acl_off(name))
		rc = -EOPNOTSUPP;
	else if (a.refused != -ERANGE)
		rc = fs_write(apply_removexattr, &a, KV_OP_RESERVE); /* works when full */
	fuse_reply_err(req, -rc);
}

/* No core: the value is replied straight from the map, while the read
 * transaction still pins it, so the work and the reply are one. */
void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	int refused = name_refused(name), cap = strcmp(name, "security.capability") == 0;
	struct kv_inode in;
	const void *val;
	size_t len = 0;
	unsigned xgen = 0;
	kv_txn *t;
	int rc;

	if (refused == -ERANGE || acl_off(name)) {
		fuse_reply_err(req, refused == -ERANGE ? ERANGE : EOPNOTSUPP);
		return;
	}
	if (cap && fs_itable_nocap(ino, &xgen)) {
		fuse_reply_err(req, ENODATA); /* before every write(2): known */
		return;
	}
	if (fs_read_inode_for(req, ino, &t, &in))
		return;
	rc = kv_xattr_get(t, ino, name, &val, &len);
	if (rc == -ENODATA && cap)
		fs_itable_set_nocap(ino, xgen);
	if (rc == -ENODATA && refused)
		rc = refused;
	if (rc)
		fuse_reply_err(req, -rc);
	else if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, len); /* from the map, before the reset */
	fs_read_end(t);
}

/* The n bytes of NUL-separated names at buf without the ACL names: the
 * bytes left. */
static ssize_t drop_acl_names(char *buf, size_t n)
{
	size_t out = 0;

	for (size_t i = 0; i < n;) {
		size_t len = strlen(buf + i) + 1;

		if (!kv_acl_name(buf + i)) {
			memmove(buf + out, buf + i, len);
			out += len;
		}
		i += len;
	}
	return (ssize_t)out;
}

void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	static __thread char buf[65536]; /* XATTR_LIST_MAX */
	struct kv_inode in;
	ssize_t n;
	kv_txn *t;

	if (fs_read_inode_for(req, ino, &t, &in))
		return;
	if (fs.cfg.acl) {
		n = kv_xattr_list(t, ino, size ? buf : NULL,
				  size > sizeof(buf) ? sizeof(buf) : size);
	} else { /* invariant 3: listed in full, then the ACLs left out */
		n = kv_xattr_list(t, ino, buf, sizeof(buf));
		if (n >= 0)
			n = drop_acl_names(buf, (size_t)n);
		if (size && (size_t)n > size)
			n = -ERANGE;
	}
	fs_read_end(t);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}
