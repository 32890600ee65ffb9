/*
 * xattr.c - extended attributes: key = ino + name bytes, value = the raw
 * attribute value (0 to KV_XATTR_SIZE_MAX bytes).
 *
 * Invariants:
 *  1. Names are 1..KV_XATTR_NAME_MAX bytes without NUL; the key order is the
 *     byte order of the names, which is the order kv_xattr_list gives.
 */
#include <errno.h>
#include <sys/xattr.h>

#include "kv_int.h"

#define XKEY_MAX (8 + KV_XATTR_NAME_MAX)

static int xattr_key(unsigned char *buf, uint64_t ino, const char *name, MDB_val *k)
{
	size_t n = strlen(name);

	if (n == 0 || n > KV_XATTR_NAME_MAX)
		return -ERANGE;
	kv_put_be64(buf, ino);
	memcpy(buf + 8, name, n);
	*k = (MDB_val){8 + n, buf};
	return 0;
}

int kv_xattr_get(kv_txn *t, uint64_t ino, const char *name, const void **val, size_t *len)
{
	unsigned char kb[XKEY_MAX];
	MDB_val k, v;
	int rc = xattr_key(kb, ino, name, &k);

	if (rc)
		return rc;
	rc = mdb_get(t->txn, t->env->dbi[KV_DB_XATTR], &k, &v);
	if (rc == MDB_NOTFOUND)
		return -ENODATA;
	if (rc)
		return kv_err(t, rc, "get xattr");
	*val = v.mv_data;
	*len = v.mv_size;
	return 0;
}

int kv_xattr_set(kv_txn *t, uint64_t ino, const char *name, const void *val, size_t len,
		 int flags)
{
	unsigned char kb[XKEY_MAX];
	MDB_val k, v;
	int rc = xattr_key(kb, ino, name, &k);

	if (rc)
		return rc;
	if (!t->write)
		return -EROFS;
	if (len > KV_XATTR_SIZE_MAX)
		return -E2BIG;
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
		return -EINVAL;
	if (flags) {
		rc = mdb_get(t->txn, t->env->dbi[KV_DB_XATTR], &k, &v);
		if (rc && rc != MDB_NOTFOUND)
			return kv_err(t, rc, "get xattr");
		if ((flags & XATTR_CREATE) && rc == 0)
			return -EEXIST;
		if ((flags & XATTR_REPLACE) && rc == MDB_NOTFOUND)
			return -ENODATA;
	}
	v = (MDB_val){len, (void *)val};
	return kv_err(t, mdb_put(t->txn, t->env->dbi[KV_DB_XATTR], &k, &v, 0), "put xattr");
}

int kv_xattr_remove(kv_txn *t, uint64_t ino, const char *name)
{
	unsigned char kb[XKEY_MAX];
	MDB_val k;
	int rc = xattr_key(kb, ino, name, &k);

	if (rc)
		return rc;
	if (!t->write)
		return -EROFS;
	rc = mdb_del(t->txn, t->env->dbi[KV_DB_XATTR], &k, NULL);
	if (rc == MDB_NOTFOUND)
		return -ENODATA;
	return kv_err(t, rc, "delete xattr");
}

ssize_t kv_xattr_list(kv_txn *t, uint64_t ino, char *buf, size_t size)
{
	unsigned char kb[8];
	MDB_cursor *c;
	MDB_val k, v;
	size_t need = 0;
	int rc;

	c = kv_cursor(t, KV_DB_XATTR, &rc);
	if (!c)
		return rc;
	kv_put_be64(kb, ino);
	k = (MDB_val){8, kb};
	for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		size_t n;

		if (k.mv_size < 8 || kv_get_be64(k.mv_data) != ino)
			break;
		n = k.mv_size - 8;
		if (n == 0 || n > KV_XATTR_NAME_MAX) {
			kv_log("inode %llu: malformed xattr key", (unsigned long long)ino);
			return -EIO;
		}
		if (size) {
			if (need + n + 1 > size)
				return -ERANGE;
			memcpy(buf + need, (char *)k.mv_data + 8, n);
			buf[need + n] = '\0';
		}
		need += n + 1;
	}
	if (rc && rc != MDB_NOTFOUND)
		return kv_err(t, rc, "list xattrs");
	return (ssize_t)need;
}
