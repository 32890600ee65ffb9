/*
 * walk.c - one database of a snapshot, record by record, or the records
 * of one inode (walk.h).
 */
#include <errno.h>
#include <string.h>

#include "walk.h"

int walk_records(kv_txn *txn, enum kv_db db, const void *from, size_t fromlen, walk_fn fn,
		 void *arg)
{
	const void *k, *v;
	size_t kl, vl;
	kv_iter *it;
	int rc;

	rc = kv_iter_open(txn, db, &it);
	if (rc)
		return rc;
	if (from && (rc = kv_iter_seek(it, from, fromlen)) == -ENOENT)
		rc = WALK_DONE; /* no key at or past from */
	while (rc == 0) {
		rc = kv_iter_next(it, &k, &kl, &v, &vl);
		if (rc == 0)
			rc = fn(arg, k, kl, v, vl);
		else if (rc == -ENOENT)
			rc = WALK_DONE; /* the end of the database */
	}
	kv_iter_close(it);
	return rc == WALK_DONE ? 0 : rc;
}

struct inode_walk {
	unsigned char pfx[KV_KEY_MAX];
	size_t plen;
	walk_fn fn;
	void *arg;
};

static int inode_record(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct inode_walk *w = arg;

	if (kl < w->plen || memcmp(k, w->pfx, w->plen) != 0)
		return WALK_DONE; /* past the inode's keys */
	return w->fn(w->arg, k, kl, v, vl);
}

int walk_inode(kv_txn *txn, enum kv_db db, uint64_t ino, walk_fn fn, void *arg)
{
	struct inode_walk w = {.fn = fn, .arg = arg};

	w.plen = kv_key_prefix(ino, w.pfx);
	return walk_records(txn, db, w.pfx, w.plen, inode_record, &w);
}
