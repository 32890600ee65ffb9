/*
 * lmdb_int.h - the LMDB engine's state, for its files alone (lmdb.c and the
 * image file's management: room.c, tail.c). The record layer never sees it.
 */
#ifndef KVFS_LMDB_INT_H
#define KVFS_LMDB_INT_H

#include <lmdb.h>

#include "kv_int.h"

struct kv_lmdb {
	MDB_env *env;
	MDB_dbi dbi[KV_NDB];
};

static inline struct kv_lmdb *kv_lmdb(const kv_env *e)
{
	return e->eng_priv;
}

static inline MDB_txn *kv_mtxn(kv_etxn *x)
{
	return (MDB_txn *)x;
}

#endif
