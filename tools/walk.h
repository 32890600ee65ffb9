/*
 * walk.h - the records of one database of a snapshot, in key order: the
 * loop that fsck.kvfs's passes and kvfs-dump's views run over the image.
 *
 * Invariants:
 *  1. The iterator lives only inside walk_records: no caller can leak it
 *     or use it past its transaction.
 *  2. The end of the database is not an error: -ENOENT from the iterator
 *     ends the walk with 0; a value the callback returns is passed up as
 *     it is (WALK_DONE becomes 0).
 *  3. walk_inode tells an inode's records by the bytes kv_key_prefix gives,
 *     never by a key length or offset: the key format stays behind kv.h.
 */
#ifndef KVFS_WALK_H
#define KVFS_WALK_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "kv.h"

/* A callback's "stop here, all is well": walk_records then returns 0. */
#define WALK_DONE INT_MAX

/* Called for each record: 0 to go on; WALK_DONE or any other value to stop
 * the walk, which returns that value (0 for WALK_DONE). The key and value
 * point into the snapshot: valid until the callback returns. */
typedef int (*walk_fn)(void *arg, const void *key, size_t klen, const void *val, size_t vlen);

/* Call fn for each record of db in txn, in key order, from the first key
 * >= from (fromlen bytes), or from the first key when from is NULL.
 * Returns 0 at the end of the records, fn's value when it stopped the
 * walk, or a negative errno reading the image. */
int walk_records(kv_txn *txn, enum kv_db db, const void *from, size_t fromlen, walk_fn fn,
		 void *arg);
/* walk_records over the records of inode ino in a database keyed by inode
 * first (inode, dirent, data, xattr, orphan; extent by the borrower, lend
 * by the home): those whose key starts with ino's prefix (kv_key_prefix),
 * malformed keys included. */
int walk_inode(kv_txn *txn, enum kv_db db, uint64_t ino, walk_fn fn, void *arg);

#endif
