/*
 * walk.c - one database of a snapshot, record by record (walk.h).
 */
#include <errno.h>

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
