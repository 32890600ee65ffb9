/*
 * xattr.c - extended attributes. The kernel checks namespace permissions
 * (trusted.* needs CAP_SYS_ADMIN, user.* only on files and directories) but
 * passes FUSE every name of 1 to 255 bytes; kvfs applies the name rule a
 * local filesystem's handler table applies (kv_xattr_name_check, the table
 * in kv/xattr.c): a name in no namespace kvfs implements is EOPNOTSUPP
 * ("foo.bar", "system.*"), a namespace prefix alone EINVAL ("user.").
 *
 * Invariants:
 *  1. setxattr never stores a name the rule refuses.
 *  2. A refused name an image already holds (kvfs once stored any name) is
 *     served like any other by getxattr, listxattr and removexattr, so a
 *     user can see and remove it; where none is stored they answer the
 *     rule's errno, as ext4 and tmpfs do.
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

struct xattr_args {
	uint64_t ino;
	const char *name;
	const char *value;
	size_t size;
	int flags;
	int refused; /* removexattr: the rule's errno for name, or 0 */
};

static int apply_setxattr(kv_txn *t, void *arg)
{
	struct xattr_args *a = arg;
	struct kv_inode in;
	int rc = kv_inode_get(t, a->ino, &in);

	if (!rc)
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
	if (rc == -ENODATA && a->refused)
		rc = a->refused;
	if (rc)
		return rc;
	in.ctime_ns = fs_now_ns();
	return kv_inode_put(t, &in);
}

void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		    size_t size, int flags)
{
	struct xattr_args a = {.ino = ino, .name = name, .value = value, .size = size,
			       .flags = flags};
	int rc = name_refused(name);

	fs_itable_xattr_changing(ino); /* before the change: no stale "none" */
	if (!rc)
		rc = fs_write(apply_setxattr, &a, 0);
	fuse_reply_err(req, -rc);
}

void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct xattr_args a = {.ino = ino, .name = name, .refused = name_refused(name)};
	int rc = -ERANGE;

	fs_itable_xattr_changing(ino);
	if (a.refused != -ERANGE)
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

	if (refused == -ERANGE) {
		fuse_reply_err(req, ERANGE);
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

void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	static __thread char buf[65536]; /* XATTR_LIST_MAX */
	struct kv_inode in;
	ssize_t n;
	kv_txn *t;

	if (fs_read_inode_for(req, ino, &t, &in))
		return;
	n = kv_xattr_list(t, ino, size ? buf : NULL, size > sizeof(buf) ? sizeof(buf) : size);
	fs_read_end(t);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}
