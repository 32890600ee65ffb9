/*
 * inode.c - inode records, inode number allocation, the orphan list and the
 * superblock record.
 *
 * Invariants:
 *  1. Inode numbers come from one 64-bit counter and are never reused: the
 *     counter lives in memory in the writer and is stored in the superblock
 *     by the commit of any batch that moved it.
 *  2. kv_inode_get copies the fixed fields and hands out the inline data as a
 *     pointer into the engine's value in a read txn (LMDB: into the map):
 *     no allocation. In a write txn it copies the inline data to a slot of
 *     the writer's env->w.ibuf: a record found in a page the txn already
 *     changed moves when another record of that page is put or deleted, so
 *     a pointer into it would go stale within the op (seen: a symlink's
 *     target lost in a rename batched after an orphan's purge).
 */
#include <assert.h>
#include <errno.h>

#include "kv_int.h"

static kv_val ino_key(unsigned char buf[8], uint64_t ino)
{
	kv_put_be64(buf, ino);
	return (kv_val){8, buf};
}

int kv_inode_get(kv_txn *t, uint64_t ino, struct kv_inode *out)
{
	unsigned char kb[8];
	kv_val k = ino_key(kb, ino), v;
	int mrc, rc;

	assert(kv_txn_mine(t));
	mrc = kv_eget(t, KV_DB_INODE, &k, &v);
	if (mrc)
		return kv_err(t, mrc, "get inode");
	rc = kv_inode_decode(ino, v.data, v.size, out);
	if (rc == 0 && t->write && out->inline_len && t->env->w.ibuf) {
		unsigned char *slot = t->env->w.ibuf +
			(size_t)(t->inl_next++ % KV_INL_SLOTS) * KV_SYMLINK_MAX;
		memcpy(slot, out->inline_data, out->inline_len);
		out->inline_data = slot;
	}
	return rc;
}

void kv_inode_prefetch(kv_txn *t, uint64_t ino)
{
	unsigned char kb[8];
	kv_val k = ino_key(kb, ino);

	kv_eprefetch(t, KV_DB_INODE, &k);
}

int kv_inode_put(kv_txn *t, const struct kv_inode *in)
{
	unsigned char kb[8], inl[KV_SYMLINK_MAX];
	kv_val k = ino_key(kb, in->ino), v;
	int rc;

	kv_win_mark(t, in->ino); /* window.c invariant 3 */
	if (!t->write)
		return -EROFS;
	if (in->inline_len > KV_SYMLINK_MAX)
		return -ENAMETOOLONG;
	if (t->env->ic.slots)
		kv_icache_put(t->env, in); /* icache.c invariant 1: before it is told */
	/* inline_data may point into this record as kv_inode_get found it; a
	 * put of another size moves the records of a dirty page: copy first */
	if (in->inline_len)
		memcpy(inl, in->inline_data, in->inline_len);
	v.size = KV_INODE_LEN + in->inline_len;
	rc = kv_err(t, kv_eput(t, KV_DB_INODE, &k, &v, KV_PUT_RESERVE), "put inode");
	if (rc)
		return rc;
	kv_inode_encode(in, v.data);
	if (in->inline_len)
		memcpy((unsigned char *)v.data + KV_INODE_LEN, inl, in->inline_len);
	return 0;
}

int kv_ino_alloc(kv_txn *t, uint64_t *ino)
{
	if (!t->write)
		return -EROFS;
	assert(kv_role_mine(t->env)); /* kv_int.h invariant 2: next_ino */
	if (t->env->w.next_ino == UINT64_MAX)
		return -ENOSPC;
	*ino = t->env->w.next_ino++;
	return 0;
}

int kv_super_store(kv_txn *t, const struct kv_super *s)
{
	unsigned char sb[KV_SUPER_LEN];
	kv_val k = {strlen(KV_SUPER_KEY), KV_SUPER_KEY}, v = {sizeof(sb), sb};

	kv_super_encode(s, sb);
	return kv_err(t, kv_eput(t, KV_DB_META, &k, &v, 0), "put superblock");
}

int kv_super_lock(kv_env *e, kv_etxn *x)
{
	kv_val k = {strlen(KV_SUPER_KEY), KV_SUPER_KEY};
	int rc = kv_err(NULL, e->eng->lock(e, x), "take the writers' lock");

	if (rc == 0)
		e->eng->prefetch(e, x, KV_DB_META, &k);
	return rc;
}

int kv_super_check(kv_env *e, kv_etxn *x)
{
	kv_val k = {strlen(KV_SUPER_KEY), KV_SUPER_KEY}, v;
	unsigned char ours[KV_SUPER_LEN];
	struct kv_super s;
	int rc;

	rc = kv_err(NULL, e->eng->get(e, x, KV_DB_META, &k, &v), "get superblock");
	if (rc)
		return rc;
	kv_super_encode(&e->super, ours);
	if (v.size == sizeof(ours) && !memcmp(v.data, ours, sizeof(ours)))
		return 1;
	rc = kv_super_decode(v.data, v.size, &s);
	if (rc)
		return rc;
	if (s.block_size != e->super.block_size) {
		kv_log("%s: the block size changed under this mount", e->path);
		return -EIO;
	}
	e->super = s;
	/* not below numbers a lost window gave out (window.c, invariant 5) */
	e->w.next_ino = s.next_ino > e->win.ino_floor ? s.next_ino : e->win.ino_floor;
	atomic_store(&e->features, s.feature_incompat);
	return 0;
}

int kv_super_reload(kv_env *e, kv_etxn *x)
{
	int rc = kv_err(NULL, e->eng->lock(e, x), "take the writers' lock");

	if (rc == 0)
		rc = kv_super_check(e, x);
	if (rc < 0)
		return rc;
	e->win.super_guess = rc; /* as env had it: the next window may guess so */
	return 0;
}

/* Delete every key of db that starts with the 8-byte ino prefix; count the
 * unwritten blocks among them in *unwritten (data.c), when not NULL. */
static int delete_prefix(kv_txn *t, enum kv_db db, uint64_t ino, int64_t *unwritten)
{
	unsigned char kb[8];
	kv_ecur *c;
	kv_val k, v;
	int mrc, rc;

	c = kv_cursor(t, db, &rc);
	if (!c)
		return rc;
	k = ino_key(kb, ino);
	mrc = kv_cget(t, c, &k, &v, KV_SET_RANGE);
	while (mrc == 0) {
		if (k.size < 8 || kv_get_be64(k.data) != ino)
			return 0;
		if (unwritten && kv_block_unwritten(&v))
			++*unwritten;
		mrc = kv_cdel(t, c);
		if (mrc)
			break;
		/* after a delete the cursor stands on the following key: KV_NEXT
		 * returns it rather than skipping it */
		mrc = kv_cget(t, c, &k, &v, KV_NEXT);
	}
	return mrc == KV_ENOTFOUND ? 0 : kv_err(t, mrc, "delete range");
}

/* The flags of ino's record (0 when it is missing or damaged). */
static uint64_t inode_flags(kv_txn *t, uint64_t ino)
{
	struct kv_inode in;

	return kv_inode_get(t, ino, &in) == 0 ? in.flags : 0;
}

int kv_inode_purge(kv_txn *t, uint64_t ino)
{
	unsigned char kb[8];
	kv_val k = ino_key(kb, ino);
	int64_t unwritten = 0;
	uint64_t flags;
	int mrc, rc;

	kv_win_mark(t, ino); /* window.c invariant 3 */
	if (!t->write)
		return -EROFS;
	if (t->env->ic.slots)
		kv_icache_del(t->env, ino);
	flags = inode_flags(t, ino);
	rc = kv_share_purge(t, ino, flags, &unwritten); /* extents; a lender's blocks */
	if (!rc && !(flags & KV_INODE_LENDS))
		rc = delete_prefix(t, KV_DB_DATA, ino, &unwritten);
	if (!rc)
		rc = kv_unwritten_add(t, -unwritten); /* data.c invariant 5 */
	if (!rc)
		rc = delete_prefix(t, KV_DB_XATTR, ino, NULL);
	if (rc)
		return rc;
	mrc = kv_edel(t, KV_DB_INODE, &k);
	if (mrc && mrc != KV_ENOTFOUND)
		return kv_err(t, mrc, "delete inode");
	mrc = kv_edel(t, KV_DB_ORPHAN, &k);
	if (mrc && mrc != KV_ENOTFOUND)
		return kv_err(t, mrc, "delete orphan");
	return 0;
}

int kv_orphan_add(kv_txn *t, uint64_t ino)
{
	unsigned char kb[8];
	kv_val k = ino_key(kb, ino), v = {0, ""};

	if (!t->write)
		return -EROFS;
	return kv_err(t, kv_eput(t, KV_DB_ORPHAN, &k, &v, 0), "add orphan");
}

int kv_orphan_remove(kv_txn *t, uint64_t ino)
{
	unsigned char kb[8];
	kv_val k = ino_key(kb, ino);

	if (!t->write)
		return -EROFS;
	return kv_err(t, kv_edel(t, KV_DB_ORPHAN, &k), "remove orphan");
}

int kv_orphan_next(kv_txn *t, uint64_t after, uint64_t *ino)
{
	unsigned char kb[8];
	kv_ecur *c;
	kv_val k, v;
	int rc;

	if (after == UINT64_MAX)
		return -ENOENT;
	c = kv_cursor(t, KV_DB_ORPHAN, &rc);
	if (!c)
		return rc;
	k = ino_key(kb, after + 1);
	rc = kv_err(t, kv_cget(t, c, &k, &v, KV_SET_RANGE), "next orphan");
	if (rc)
		return rc;
	if (k.size != 8)
		return -EIO;
	*ino = kv_get_be64(k.data);
	return 0;
}
