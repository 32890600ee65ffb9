/*
 * xattr.c - extended attributes: key = ino + name bytes, value = the raw
 * attribute value (0 to KV_XATTR_SIZE_MAX bytes), and the name rule the
 * daemon, mkfs and fsck share (kv_xattr_name_check).
 *
 * The rule is Linux's. Measured on Linux 6.18 with ext4 (a loop-mounted
 * image) and tmpfs, which answer alike, for set, get and remove ("nobody":
 * where an unprivileged user gets another answer; "FUSE": whether the
 * request reaches a FUSE daemon at all):
 *
 *   name                   root            nobody                   FUSE
 *   "", or 256 bytes       ERANGE                                   no
 *   "foo.bar" "x" "user"   EOPNOTSUPP                               yes
 *   "USER.a" ".user.a"     EOPNOTSUPP                               yes
 *   "system." "system.a"   EOPNOTSUPP                               yes
 *   "user."                EINVAL                                   yes
 *   "trusted."             EINVAL          set, remove EPERM;       root
 *                                          get ENODATA
 *   "security."            EINVAL          set, remove EPERM        get; root
 *   "user.a", 255 bytes    stored, listed                           yes
 *   "trusted.a"            stored, listed  set, remove EPERM; get   root
 *                                          ENODATA; not listed
 *   "security.a"           stored, listed  set, remove EPERM        get; root
 *
 * The VFS itself refuses no name for want of a known prefix: the syscall
 * takes 1 to 255 bytes, and xattr_permission() checks trusted.*
 * (CAP_SYS_ADMIN), user.* (regular files and directories only; sticky
 * directories) and the inode's read or write permission for every name but
 * security.* and system.*. The refusals above come from the filesystem's
 * handler table (xattr_resolve_name(): no handler's prefix matches,
 * EOPNOTSUPP; a prefix with nothing after it, EINVAL). FUSE registers one
 * handler for every name, so kvfs must answer them itself: here. Of the
 * system.* names only the two POSIX ACLs are kept (KV_ACL_ACCESS and
 * KV_ACL_DEFAULT, whose values kv/acl.c checks): ext4 and tmpfs answer the
 * others EOPNOTSUPP, and with `-o noacl` the daemon answers those two so.
 *
 * Invariants:
 *  1. Names are 1..KV_XATTR_NAME_MAX bytes without NUL; the key order is the
 *     byte order of the names, which is the order kv_xattr_list gives.
 *  2. kv_xattr_set stores only names kv_xattr_name_check accepts; get,
 *     remove and list serve every well-formed name an image holds, so one
 *     stored before the rule can still be read and removed.
 */
#include <assert.h>
#include <errno.h>
#include <sys/xattr.h>

#include "kv_int.h"

#define XKEY_MAX (8 + KV_XATTR_NAME_MAX)

int kv_xattr_name_check(const char *name, size_t len)
{
	static const char *const ns[] = {"user.", "trusted.", "security."};

	if (len == 0 || len > KV_XATTR_NAME_MAX || memchr(name, '\0', len))
		return -ERANGE;
	if (kv_acl_type(name, len))
		return 0;
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		size_t n = strlen(ns[i]);

		if (len >= n && memcmp(name, ns[i], n) == 0)
			return len > n ? 0 : -EINVAL;
	}
	return -EOPNOTSUPP;
}

/* The key of any well-formed name (invariant 2: not only those the rule
 * lets kv_xattr_set store). */
static int xattr_key(unsigned char *buf, uint64_t ino, const char *name, kv_val *k)
{
	size_t n = strlen(name);

	if (kv_xattr_name_check(name, n) == -ERANGE)
		return -ERANGE;
	kv_put_be64(buf, ino);
	memcpy(buf + 8, name, n);
	*k = (kv_val){8 + n, buf};
	return 0;
}

void kv_xattr_prefetch(kv_txn *t, uint64_t ino, const char *name)
{
	unsigned char kb[XKEY_MAX];
	kv_val k;

	if (xattr_key(kb, ino, name, &k) == 0)
		kv_eprefetch(t, KV_DB_XATTR, &k);
}

int kv_xattr_get(kv_txn *t, uint64_t ino, const char *name, const void **val, size_t *len)
{
	unsigned char kb[XKEY_MAX];
	kv_val k, v;
	int mrc, rc = xattr_key(kb, ino, name, &k);

	if (rc)
		return rc;
	assert(kv_txn_mine(t));
	mrc = kv_eget(t, KV_DB_XATTR, &k, &v);
	if (mrc == KV_ENOTFOUND)
		return -ENODATA;
	if (mrc)
		return kv_err(t, mrc, "get xattr");
	*val = v.data;
	*len = v.size;
	return 0;
}

int kv_xattr_set(kv_txn *t, uint64_t ino, const char *name, const void *val, size_t len,
		 int flags)
{
	unsigned char kb[XKEY_MAX];
	kv_val k, v;
	int rc = kv_xattr_name_check(name, strlen(name));

	kv_win_mark(t, ino); /* window.c invariant 3 */
	if (!rc)
		rc = xattr_key(kb, ino, name, &k);
	if (rc)
		return rc;
	if (!t->write)
		return -EROFS;
	if (len > KV_XATTR_SIZE_MAX)
		return -E2BIG;
	if (kv_acl_name(name)) {
		rc = kv_acl_check(val, len);
		if (rc)
			return rc;
	}
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
		return -EINVAL;
	if (flags) {
		rc = kv_err(t, kv_eget(t, KV_DB_XATTR, &k, &v), "get xattr");
		if (rc && rc != -ENOENT)
			return rc;
		if ((flags & XATTR_CREATE) && rc == 0)
			return -EEXIST;
		if ((flags & XATTR_REPLACE) && rc == -ENOENT)
			return -ENODATA;
	}
	v = (kv_val){len, (void *)val};
	return kv_err(t, kv_eput(t, KV_DB_XATTR, &k, &v, 0), "put xattr");
}

int kv_xattr_remove(kv_txn *t, uint64_t ino, const char *name)
{
	unsigned char kb[XKEY_MAX];
	kv_val k;
	int rc = xattr_key(kb, ino, name, &k);

	kv_win_mark(t, ino); /* window.c invariant 3 */
	if (rc)
		return rc;
	if (!t->write)
		return -EROFS;
	rc = kv_err(t, kv_edel(t, KV_DB_XATTR, &k), "delete xattr");
	return rc == -ENOENT ? -ENODATA : rc;
}

ssize_t kv_xattr_list(kv_txn *t, uint64_t ino, char *buf, size_t size)
{
	unsigned char kb[8];
	kv_ecur *c;
	kv_val k, v;
	size_t need = 0;
	int mrc, rc;

	c = kv_cursor(t, KV_DB_XATTR, &rc);
	if (!c)
		return rc;
	kv_put_be64(kb, ino);
	k = (kv_val){8, kb};
	for (mrc = kv_cget(t, c, &k, &v, KV_SET_RANGE); mrc == 0;
	     mrc = kv_cget(t, c, &k, &v, KV_NEXT)) {
		size_t n;

		if (k.size < 8 || kv_get_be64(k.data) != ino)
			break;
		n = k.size - 8;
		if (kv_xattr_name_check((const char *)k.data + 8, n) == -ERANGE) {
			kv_log("inode %llu: malformed xattr key", (unsigned long long)ino);
			return -EIO;
		}
		if (size) {
			if (need + n + 1 > size)
				return -ERANGE;
			memcpy(buf + need, (char *)k.data + 8, n);
			buf[need + n] = '\0';
		}
		need += n + 1;
	}
	if (mrc && mrc != KV_ENOTFOUND)
		return kv_err(t, mrc, "list xattrs");
	return (ssize_t)need;
}
