/*
 * raw.c - raw access to the databases for fsck, dump and tests: the
 * databases by name, cursors over whole records, and puts and deletes of
 * whole records that bypass the record-level rules (fsck's repairs). The
 * records read this way are decoded by codec.c.
 *
 * Invariants:
 *  1. Iterators never trust what they read: they hand keys and values over
 *     as they are, and the caller's decoders report what is malformed;
 *     nothing here asserts on disk data.
 *  2. Raw writes go through the writer's transaction like every other
 *     write; they bypass the record-level rules, so only repair code uses
 *     them.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "kv_int.h"

struct kv_iter {
	kv_txn *t;
	kv_ecur *c;
	enum kv_cop next_op; /* KV_FIRST, KV_GET_CURRENT after a seek, KV_NEXT */
	int at_end;
};

const char *kv_db_name(enum kv_db db)
{
	return db < KV_NDB ? kv_db_names[db] : "?";
}

int kv_db_lookup(const char *name, enum kv_db *db)
{
	for (int i = 0; i < KV_NDB; i++)
		if (strcmp(name, kv_db_names[i]) == 0) {
			*db = (enum kv_db)i;
			return 0;
		}
	return -ENOENT;
}

int kv_db_count(kv_txn *t, enum kv_db db, uint64_t *count)
{
	*count = 0;
	if ((t->env->missing_dbs >> db) & 1)
		return 0;
	return kv_err(t, t->env->eng->count(t->env, t->txn, db, count), "count");
}

int kv_iter_open(kv_txn *t, enum kv_db db, kv_iter **out)
{
	kv_iter *it = calloc(1, sizeof(*it));
	int rc;

	if (!it)
		return -ENOMEM;
	it->t = t;
	if ((t->env->missing_dbs >> db) & 1) { /* a version 1 image: read as empty */
		it->at_end = 1;
		*out = it;
		return 0;
	}
	rc = kv_err(t, t->env->eng->cur_open(t->env, t->txn, db, &it->c), "open cursor");
	if (rc) {
		free(it);
		return rc;
	}
	it->t = t;
	it->next_op = KV_FIRST;
	*out = it;
	return 0;
}

int kv_iter_seek(kv_iter *it, const void *key, size_t klen)
{
	kv_val k = {klen, (void *)key}, v;
	int mrc = it->c ? kv_cget(it->t, it->c, &k, &v, KV_SET_RANGE) : KV_ENOTFOUND;

	if (mrc == KV_ENOTFOUND) {
		it->at_end = 1;
		return -ENOENT;
	}
	if (mrc)
		return kv_err(it->t, mrc, "seek");
	it->at_end = 0;
	it->next_op = KV_GET_CURRENT;
	return 0;
}

int kv_iter_next(kv_iter *it, const void **key, size_t *klen, const void **val, size_t *vlen)
{
	kv_val k, v;
	int mrc;

	if (it->at_end)
		return -ENOENT;
	/* the caller is done with the values of the last call (kv.h) */
	it->t->env->eng->cur_forget(it->t->env, it->c);
	mrc = kv_cget(it->t, it->c, &k, &v, it->next_op);
	it->next_op = KV_NEXT;
	if (mrc == KV_ENOTFOUND) {
		it->at_end = 1;
		return -ENOENT;
	}
	if (mrc)
		return kv_err(it->t, mrc, "next");
	*key = k.data;
	*klen = k.size;
	*val = v.data;
	*vlen = v.size;
	return 0;
}

void kv_iter_close(kv_iter *it)
{
	if (!it)
		return;
	if (it->c)
		it->t->env->eng->cur_close(it->t->env, it->c);
	free(it);
}

int kv_raw_put(kv_txn *t, enum kv_db db, const void *key, size_t klen, const void *val,
	       size_t vlen)
{
	kv_val k = {klen, (void *)key}, v = {vlen, (void *)val};

	if (!t->write)
		return -EROFS;
	return kv_err(t, kv_eput(t, db, &k, &v, 0), "raw put");
}

int kv_raw_del(kv_txn *t, enum kv_db db, const void *key, size_t klen)
{
	kv_val k = {klen, (void *)key}, v;
	int unwritten = 0, rc;

	if (!t->write)
		return -EROFS;
	/* data.c invariant 5: an unwritten block leaves the count */
	if (db == KV_DB_DATA && kv_eget(t, db, &k, &v) == 0)
		unwritten = kv_block_unwritten(&v);
	rc = kv_err(t, kv_edel(t, db, &k), "raw delete");
	return rc || !unwritten ? rc : kv_unwritten_add(t, -1);
}

int kv_ino_counter_raise(kv_txn *t, uint64_t next)
{
	if (!t->write)
		return -EROFS;
	assert(kv_role_mine(t->env)); /* kv_int.h invariant 2: next_ino */
	if (t->env->w.next_ino < next)
		t->env->w.next_ino = next; /* stored by the batch's commit */
	return 0;
}
