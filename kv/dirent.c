/*
 * dirent.c - directory entries: key = parent ino + 54-bit name hash, value =
 * the list of entries whose names share that hash (almost always one).
 *
 * Each entry of a list carries a slot number (0-255), unique within its list,
 * kept for the entry's lifetime; lists are ordered by slot. The readdir
 * cookie of an entry is ((hash << 8) | slot) + KV_COOKIE_FIRST, so it is
 * unique within the directory, stable while other entries come and go, and
 * ordered as the cursor walks.
 *
 * Invariants:
 *  1. A name appears at most once per directory.
 *  2. A list is never empty: the last entry's removal deletes the key.
 *  3. A list whose bytes do not parse is -EIO, never a crash.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "kv_int.h"

#define SLOTS 256

struct ent {
	struct kv_dirent de;
	uint8_t slot;
	size_t off, len; /* position of the whole entry in the list */
};

static kv_val dirent_key(unsigned char buf[16], uint64_t dir, uint64_t hash)
{
	kv_put_be64(buf, dir);
	kv_put_be64(buf + 8, hash);
	return (kv_val){16, buf};
}

/* Parse the entry at *off of list v (codec.c); -EIO if malformed, 1 at the
 * end. */
static int next_ent(const kv_val *v, size_t *off, struct ent *e)
{
	size_t at = *off;
	int rc = kv_decode_dirent(v->data, v->size, off, &e->de, &e->slot);

	if (rc)
		return rc;
	e->off = at;
	e->len = *off - at;
	return 0;
}

static int corrupt(uint64_t dir)
{
	kv_log("directory %llu: malformed dirent list", (unsigned long long)dir);
	return -EIO;
}

/* Find name in list v: 0 and *e, -ENOENT, or -EIO. */
static int find_ent(uint64_t dir, const kv_val *v, const char *name, size_t len, struct ent *e)
{
	size_t off = 0;
	int rc;

	while ((rc = next_ent(v, &off, e)) == 0)
		if (e->de.namelen == len && memcmp(e->de.name, name, len) == 0)
			return 0;
	return rc < 0 ? corrupt(dir) : -ENOENT;
}

static void write_ent(unsigned char *p, uint8_t slot, uint8_t type, const char *name,
		      size_t len, uint64_t ino)
{
	kv_encode_dirent(p, slot,
			 &(struct kv_dirent){.ino = ino, .type = type, .namelen = (uint8_t)len,
					     .name = name});
}

static int check_name(const char *name, size_t len)
{
	(void)name;
	if (len == 0)
		return -ENOENT;
	if (len > KV_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

void kv_dirent_prefetch(kv_txn *t, uint64_t dir, const char *name, size_t len)
{
	unsigned char kb[16];
	kv_val k;

	if (check_name(name, len))
		return;
	k = dirent_key(kb, dir, kv_name_hash(name, len));
	kv_eprefetch(t, KV_DB_DIRENT, &k);
}

int kv_dirent_lookup(kv_txn *t, uint64_t dir, const char *name, size_t len,
		     struct kv_dirent *out)
{
	unsigned char kb[16];
	kv_val k, v;
	struct ent e;
	int mrc, rc = check_name(name, len);

	if (rc)
		return rc;
	assert(kv_txn_mine(t));
	k = dirent_key(kb, dir, kv_name_hash(name, len));
	mrc = kv_eget(t, KV_DB_DIRENT, &k, &v);
	if (mrc)
		return kv_err(t, mrc, "get dirent");
	rc = find_ent(dir, &v, name, len, &e);
	if (rc)
		return rc;
	*out = e.de;
	return 0;
}

int kv_dirent_add(kv_txn *t, uint64_t dir, const char *name, size_t len, uint64_t ino,
		  uint8_t type)
{
	unsigned char kb[16], one[KV_DIRENT_HDR + KV_NAME_MAX];
	unsigned char *buf;
	kv_val k, v, nv;
	struct ent e;
	size_t off = 0, ins;
	int rc = check_name(name, len), mrc, slot;

	kv_win_mark(t, dir); /* window.c invariant 3 */
	if (t->env->eng->shared && t->write)
		kv_change_name(t->env, dir, name, len); /* change.c */
	if (rc)
		return rc;
	if (!t->write)
		return -EROFS;
	k = dirent_key(kb, dir, kv_name_hash(name, len));
	mrc = kv_eget(t, KV_DB_DIRENT, &k, &v);
	if (mrc == KV_ENOTFOUND) {
		write_ent(one, 0, type, name, len, ino);
		nv = (kv_val){KV_DIRENT_HDR + len, one};
		return kv_err(t, kv_eput(t, KV_DB_DIRENT, &k, &nv, 0), "add dirent");
	}
	if (mrc)
		return kv_err(t, mrc, "get dirent");

	/* a hash collision: the name must be new, and takes the lowest free slot */
	slot = 0;
	ins = v.size;
	while ((rc = next_ent(&v, &off, &e)) == 0) {
		if (e.de.namelen == len && memcmp(e.de.name, name, len) == 0)
			return -EEXIST;
		if (ins == v.size) {
			if (e.slot == slot)
				slot++;
			else
				ins = e.off;
		}
	}
	if (rc < 0)
		return corrupt(dir);
	if (slot >= SLOTS)
		return -ENOSPC;
	buf = malloc(v.size + KV_DIRENT_HDR + len);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, v.data, ins);
	write_ent(buf + ins, (uint8_t)slot, type, name, len, ino);
	memcpy(buf + ins + KV_DIRENT_HDR + len, (unsigned char *)v.data + ins, v.size - ins);
	nv = (kv_val){v.size + KV_DIRENT_HDR + len, buf};
	rc = kv_err(t, kv_eput(t, KV_DB_DIRENT, &k, &nv, 0), "add dirent");
	free(buf);
	return rc;
}

/* The record holding dir's entry name (key in kb) and the entry in it, in a
 * write transaction: the start of every change to an existing entry. */
static int locate_ent(kv_txn *t, uint64_t dir, const char *name, size_t len,
		      unsigned char kb[16], kv_val *k, kv_val *v, struct ent *e)
{
	int rc = check_name(name, len);

	if (rc)
		return rc;
	if (!t->write)
		return -EROFS;
	*k = dirent_key(kb, dir, kv_name_hash(name, len));
	rc = kv_err(t, kv_eget(t, KV_DB_DIRENT, k, v), "get dirent");
	if (rc)
		return rc;
	return find_ent(dir, v, name, len, e);
}

/* Store the list at k as v with its bytes [off, off + cut) replaced by the
 * inslen bytes at ins (none: taken out); no list left: the key goes. */
static int list_splice(kv_txn *t, kv_val *k, const kv_val *v, size_t off, size_t cut,
		       const void *ins, size_t inslen)
{
	size_t n = v->size - cut + inslen;
	unsigned char *buf;
	kv_val nv;
	int rc;

	if (n == 0)
		return kv_err(t, kv_edel(t, KV_DB_DIRENT, k), "del dirent");
	buf = malloc(n);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, v->data, off);
	if (inslen)
		memcpy(buf + off, ins, inslen);
	memcpy(buf + off + inslen, (const unsigned char *)v->data + off + cut,
	       v->size - off - cut);
	nv = (kv_val){n, buf};
	rc = kv_err(t, kv_eput(t, KV_DB_DIRENT, k, &nv, 0), "put dirent");
	free(buf);
	return rc;
}

int kv_dirent_remove(kv_txn *t, uint64_t dir, const char *name, size_t len)
{
	unsigned char kb[16];
	kv_val k, v;
	struct ent e;
	int rc = locate_ent(t, dir, name, len, kb, &k, &v, &e);

	kv_win_mark(t, dir); /* window.c invariant 3 */
	if (t->env->eng->shared && t->write)
		kv_change_name(t->env, dir, name, len); /* change.c */
	return rc ? rc : list_splice(t, &k, &v, e.off, e.len, NULL, 0);
}

int kv_dirent_replace(kv_txn *t, uint64_t dir, const char *name, size_t len, uint64_t ino,
		      uint8_t type)
{
	unsigned char kb[16], ent[KV_DIRENT_LEN(KV_NAME_MAX)];
	kv_val k, v;
	struct ent e;
	int rc = locate_ent(t, dir, name, len, kb, &k, &v, &e);

	kv_win_mark(t, dir); /* window.c invariant 3 */
	if (t->env->eng->shared && t->write)
		kv_change_name(t->env, dir, name, len); /* change.c */
	if (rc)
		return rc;
	e.de.ino = ino;
	e.de.type = type;
	/* the name from v, as it was; the same length */
	return list_splice(t, &k, &v, e.off, e.len, ent, kv_encode_dirent(ent, e.slot, &e.de));
}

int kv_dir_next(kv_txn *t, uint64_t dir, uint64_t *cookie, struct kv_dirent *out)
{
	unsigned char kb[16];
	kv_ecur *c;
	kv_val k, v;
	uint64_t hash = 0, h;
	int after = -1; /* resume after this slot within the hash's list */
	struct ent e;
	size_t off;
	int mrc, rc;

	if (*cookie >= KV_COOKIE_FIRST) {
		uint64_t x = *cookie - KV_COOKIE_FIRST;
		hash = x >> 8;
		after = (int)(x & 0xff);
	}
	c = kv_cursor(t, KV_DB_DIRENT, &rc);
	if (!c)
		return rc;
	k = dirent_key(kb, dir, hash);
	mrc = kv_cget(t, c, &k, &v, KV_SET_RANGE);
	for (; mrc == 0; mrc = kv_cget(t, c, &k, &v, KV_NEXT), after = -1) {
		if (k.size != 16)
			return corrupt(dir);
		if (kv_get_be64(k.data) != dir)
			return -ENOENT;
		h = kv_get_be64((unsigned char *)k.data + 8);
		if (h != hash)
			after = -1;
		off = 0;
		while ((rc = next_ent(&v, &off, &e)) == 0) {
			if (e.slot > after) {
				*out = e.de;
				*cookie = ((h << 8) | e.slot) + KV_COOKIE_FIRST;
				return 0;
			}
		}
		if (rc < 0)
			return corrupt(dir);
	}
	return kv_err(t, mrc, "readdir");
}
