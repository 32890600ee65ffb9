/*
 * codec.c - the records of docs/FORMAT.md as bytes: the database names, the
 * superblock and inode records, the entries of a dirent list, the
 * keys of every database, and the check of a data block's value.
 *
 * Invariants:
 *  1. This file, the key builders of inode.c, dirent.c, data.c and xattr.c,
 *     and docs/FORMAT.md describe the same bytes; they change together.
 *  2. Decoders never trust lengths read from disk: a record shorter than its
 *     fixed part, or with fields out of range, is -EIO (or the refusal its
 *     comment names), never a crash, and nothing here asserts on it.
 */
#include <errno.h>
#include <string.h>

#include <zstd.h>

#include "kv_int.h"

const char *const kv_db_names[KV_NDB] = {"meta", "inode", "dirent", "data", "xattr", "orphan",
					     "extent", "lend"};

/* ---------------------------------------------------------- superblock -- */

void kv_super_encode(const struct kv_super *s, unsigned char out[KV_SUPER_LEN])
{
	memset(out, 0, KV_SUPER_LEN);
	memcpy(out, KV_MAGIC, 8);
	kv_put_le32(out + 8, s->version);
	kv_put_le32(out + 12, s->block_size);
	kv_put_le64(out + 16, s->feature_compat);
	kv_put_le64(out + 24, s->feature_ro_compat);
	kv_put_le64(out + 32, s->feature_incompat);
	memcpy(out + 40, s->uuid, 16);
	kv_put_le64(out + 56, s->next_ino);
	kv_put_le64(out + 64, (uint64_t)s->created_ns);
	memcpy(out + 72, s->label, strnlen(s->label, KV_LABEL_MAX));
}

int kv_super_decode(const void *buf, size_t len, struct kv_super *s)
{
	const unsigned char *p = buf;

	memset(s, 0, sizeof(*s));
	if (len < 12 || memcmp(p, KV_MAGIC, 8) != 0)
		return -EINVAL;
	s->version = kv_get_le32(p + 8);
	if (s->version > KV_FORMAT_VERSION)
		return -EPROTONOSUPPORT;
	if (s->version == 0 || len < KV_SUPER_LEN)
		return -EIO;
	s->block_size = kv_get_le32(p + 12);
	s->feature_compat = kv_get_le64(p + 16);
	s->feature_ro_compat = kv_get_le64(p + 24);
	s->feature_incompat = kv_get_le64(p + 32);
	memcpy(s->uuid, p + 40, 16);
	s->next_ino = kv_get_le64(p + 56);
	s->created_ns = (int64_t)kv_get_le64(p + 64);
	memcpy(s->label, p + 72, KV_LABEL_MAX);
	s->label[KV_LABEL_MAX] = '\0';
	if (s->block_size < KV_BLOCK_SIZE_MIN || s->block_size > KV_BLOCK_SIZE_MAX ||
	    s->next_ino <= KV_ROOT_INO)
		return -EIO;
	return 0;
}

int kv_decode_super(const void *val, size_t vlen, struct kv_super *out)
{
	return kv_super_decode(val, vlen, out);
}

/* -------------------------------------------------------------- inodes -- */

void kv_inode_encode(const struct kv_inode *in, unsigned char *out)
{
	kv_put_le32(out + 0, in->mode);
	kv_put_le32(out + 4, in->uid);
	kv_put_le32(out + 8, in->gid);
	kv_put_le32(out + 12, in->nlink);
	kv_put_le64(out + 16, in->size);
	kv_put_le64(out + 24, in->rdev);
	kv_put_le64(out + 32, in->flags);
	kv_put_le64(out + 40, in->nblocks);
	kv_put_le64(out + 48, (uint64_t)in->atime_ns);
	kv_put_le64(out + 56, (uint64_t)in->mtime_ns);
	kv_put_le64(out + 64, (uint64_t)in->ctime_ns);
	kv_put_le64(out + 72, (uint64_t)in->btime_ns);
	kv_put_le64(out + 80, in->parent);
}

int kv_inode_decode(uint64_t ino, const void *buf, size_t len, struct kv_inode *out)
{
	const unsigned char *p = buf;

	if (len < KV_INODE_LEN || len > KV_INODE_LEN + KV_SYMLINK_MAX) {
		kv_log("inode %llu: record of %zu bytes", (unsigned long long)ino, len);
		return -EIO;
	}
	out->ino = ino;
	out->mode = kv_get_le32(p + 0);
	out->uid = kv_get_le32(p + 4);
	out->gid = kv_get_le32(p + 8);
	out->nlink = kv_get_le32(p + 12);
	out->size = kv_get_le64(p + 16);
	out->rdev = kv_get_le64(p + 24);
	out->flags = kv_get_le64(p + 32);
	out->nblocks = kv_get_le64(p + 40);
	out->atime_ns = (int64_t)kv_get_le64(p + 48);
	out->mtime_ns = (int64_t)kv_get_le64(p + 56);
	out->ctime_ns = (int64_t)kv_get_le64(p + 64);
	out->btime_ns = (int64_t)kv_get_le64(p + 72);
	out->parent = kv_get_le64(p + 80);
	out->inline_len = (uint32_t)(len - KV_INODE_LEN);
	out->inline_data = out->inline_len ? p + KV_INODE_LEN : NULL;
	return 0;
}

int kv_decode_inode(uint64_t ino, const void *val, size_t vlen, struct kv_inode *out)
{
	return kv_inode_decode(ino, val, vlen, out);
}

/* ------------------------------------------------------- dirent lists -- */

int kv_decode_dirent(const void *val, size_t vlen, size_t *off, struct kv_dirent *out,
		     uint8_t *slot)
{
	const unsigned char *p = val;

	if (*off == vlen)
		return 1;
	if (*off > vlen || vlen - *off < KV_DIRENT_HDR)
		return -EIO;
	out->type = p[*off + 1];
	out->namelen = p[*off + 2];
	out->ino = kv_get_le64(p + *off + 3);
	if (out->namelen == 0 || vlen - *off - KV_DIRENT_HDR < out->namelen)
		return -EIO;
	out->name = (const char *)p + *off + KV_DIRENT_HDR;
	if (slot)
		*slot = p[*off];
	*off += KV_DIRENT_HDR + out->namelen;
	return 0;
}

size_t kv_encode_dirent(void *buf, uint8_t slot, const struct kv_dirent *de)
{
	unsigned char *p = buf;

	p[0] = slot;
	p[1] = de->type;
	p[2] = de->namelen;
	kv_put_le64(p + 3, de->ino);
	memcpy(p + KV_DIRENT_HDR, de->name, de->namelen);
	return KV_DIRENT_HDR + (size_t)de->namelen;
}

/* -------------------------------------------------------------- blocks -- */

enum kv_block_fault kv_block_verify(uint32_t bs, uint64_t ino, uint64_t idx, const void *val,
				    size_t vlen, size_t *len)
{
	const unsigned char *p = val;

	unsigned long long zlen;

	*len = kv_block_len(vlen);
	/* no bytes: an unwritten block (data.c), checksummed all the same */
	if (vlen < KV_CSUM_LEN || vlen > bs + KV_CSUM_LEN)
		return KV_BLOCK_BAD_LEN;
	if (kv_block_csum(ino, idx, p, *len) == kv_get_le64(p + *len))
		return KV_BLOCK_OK;
	/* a zstd frame under its own checksum (zstd.c) */
	if (*len < 4 || kv_get_le32(p) != ZSTD_MAGICNUMBER ||
	    kv_block_zcsum(ino, idx, p, *len) != kv_get_le64(p + *len))
		return KV_BLOCK_BAD_SUM;
	zlen = ZSTD_getFrameContentSize(p, *len);
	if (zlen == ZSTD_CONTENTSIZE_ERROR || zlen == ZSTD_CONTENTSIZE_UNKNOWN || zlen == 0 ||
	    zlen > bs)
		return KV_BLOCK_BAD_LEN;
	*len = (size_t)zlen;
	return KV_BLOCK_ZSTD;
}

int kv_block_unpack(const void *val, size_t vlen, void *out, size_t len)
{
	static __thread ZSTD_DCtx *dctx; /* one a thread, kept: tools unpack many */
	size_t got;

	if (vlen < KV_CSUM_LEN)
		return -EIO;
	if (!dctx && !(dctx = ZSTD_createDCtx()))
		return -ENOMEM;
	got = ZSTD_decompressDCtx(dctx, out, len, val, vlen - KV_CSUM_LEN);
	return ZSTD_isError(got) || got != len ? -EIO : 0;
}

int kv_check_block(kv_env *e, uint64_t ino, uint64_t idx, const void *val, size_t vlen,
		   size_t *len)
{
	switch (kv_block_verify(e->super.block_size, ino, idx, val, vlen, len)) {
	case KV_BLOCK_OK:
		return 0;
	case KV_BLOCK_ZSTD:
		return 1;
	default:
		return -EIO;
	}
}

/* ---------------------------------------------------------------- keys -- */

int kv_key_decode(enum kv_db db, const void *key, size_t klen, struct kv_key *out)
{
	const unsigned char *p = key;

	memset(out, 0, sizeof(*out));
	if (db >= KV_NDB)
		return -EINVAL;
	if (db == KV_DB_META) {
		out->name = key;
		out->namelen = klen;
		out->super = klen == strlen(KV_SUPER_KEY) && memcmp(key, KV_SUPER_KEY, klen) == 0;
		return 0;
	}
	if (klen < 8)
		return -EIO;
	out->ino = kv_get_be64(p); /* every other database is keyed by inode first */
	switch (db) {
	case KV_DB_INODE:
	case KV_DB_ORPHAN:
		return klen == 8 ? 0 : -EIO;
	case KV_DB_LEND:
		if (klen != 32)
			return -EIO;
		out->idx = kv_get_be64(p + 8);
		out->ino2 = kv_get_be64(p + 16);
		out->idx2 = kv_get_be64(p + 24);
		return 0;
	case KV_DB_DIRENT:
	case KV_DB_DATA:
	case KV_DB_EXTENT:
		if (klen != 16)
			return -EIO;
		if (db == KV_DB_DIRENT)
			out->hash = kv_get_be64(p + 8);
		else
			out->idx = kv_get_be64(p + 8);
		return 0;
	default: /* KV_DB_XATTR */
		out->name = (const char *)p + 8;
		out->namelen = klen - 8;
		return klen > 8 ? 0 : -EIO;
	}
}

int kv_decode_extent(enum kv_db db, const void *key, size_t klen, const void *val,
		     size_t vlen, struct kv_extent *x)
{
	const unsigned char *k = key, *v = val;

	memset(x, 0, sizeof(*x));
	if (db == KV_DB_EXTENT) {
		if (klen != 16 || vlen != KV_EXTENT_VLEN)
			return -EIO;
		x->ino = kv_get_be64(k);
		x->first = kv_get_be64(k + 8);
		x->home = kv_get_le64(v);
		x->hfirst = kv_get_le64(v + 8);
		x->count = kv_get_le64(v + 16);
	} else if (db == KV_DB_LEND) {
		if (klen != 32 || vlen != KV_LEND_VLEN)
			return -EIO;
		x->home = kv_get_be64(k);
		x->hfirst = kv_get_be64(k + 8);
		x->ino = kv_get_be64(k + 16);
		x->first = kv_get_be64(k + 24);
		x->count = kv_get_le64(v);
	} else {
		return -EIO;
	}
	if (x->count == 0 || x->count > KV_EXTENT_MAX || x->first > UINT64_MAX - x->count ||
	    x->hfirst > UINT64_MAX - x->count)
		return -EIO;
	return 0;
}

void kv_encode_extent(enum kv_db db, const struct kv_extent *x, void *key, size_t *klen,
		      void *val, size_t *vlen)
{
	unsigned char *k = key, *v = val;

	if (db == KV_DB_EXTENT) {
		kv_put_be64(k, x->ino);
		kv_put_be64(k + 8, x->first);
		kv_put_le64(v, x->home);
		kv_put_le64(v + 8, x->hfirst);
		kv_put_le64(v + 16, x->count);
		*klen = 16;
		*vlen = KV_EXTENT_VLEN;
		return;
	}
	kv_put_be64(k, x->home);
	kv_put_be64(k + 8, x->hfirst);
	kv_put_be64(k + 16, x->ino);
	kv_put_be64(k + 24, x->first);
	kv_put_le64(v, x->count);
	*klen = 32;
	*vlen = KV_LEND_VLEN;
}

size_t kv_key_encode(enum kv_db db, const struct kv_key *k, void *buf)
{
	unsigned char *p = buf;

	switch (db) {
	case KV_DB_META:
		if (k->super) {
			memcpy(p, KV_SUPER_KEY, strlen(KV_SUPER_KEY));
			return strlen(KV_SUPER_KEY);
		}
		memcpy(p, k->name, k->namelen);
		return k->namelen;
	case KV_DB_DIRENT:
	case KV_DB_DATA:
	case KV_DB_EXTENT:
		kv_put_be64(p, k->ino);
		kv_put_be64(p + 8, db == KV_DB_DIRENT ? k->hash : k->idx);
		return 16;
	case KV_DB_LEND:
		kv_put_be64(p, k->ino);
		kv_put_be64(p + 8, k->idx);
		kv_put_be64(p + 16, k->ino2);
		kv_put_be64(p + 24, k->idx2);
		return 32;
	case KV_DB_XATTR:
		kv_put_be64(p, k->ino);
		memcpy(p + 8, k->name, k->namelen);
		return 8 + k->namelen;
	default: /* inode, orphan */
		kv_put_be64(p, k->ino);
		return 8;
	}
}

size_t kv_key_prefix(uint64_t ino, void *buf)
{
	kv_put_be64(buf, ino);
	return 8;
}

size_t kv_block_len(size_t vlen)
{
	return vlen > KV_CSUM_LEN ? vlen - KV_CSUM_LEN : 0;
}
