/*
 * format.c - encoders and decoders of the records in docs/FORMAT.md, the
 * name hash and block checksum, and the LMDB-to-errno mapping.
 *
 * Invariants:
 *  1. Decoders never trust lengths read from disk: a record shorter than its
 *     fixed part, or with fields out of range, is -EIO, never a crash.
 *  2. Every LMDB return code becomes an errno here and nowhere else.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "kv_int.h"

const char *const kv_db_names[KV_NDB] = {"meta", "inode", "dirent", "data", "xattr", "orphan"};

static kv_log_fn log_fn;

void kv_set_log(kv_log_fn fn)
{
	log_fn = fn;
}

void kv_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

void kv_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (log_fn)
		log_fn(line);
	else
		fprintf(stderr, "kvfs: %s\n", line);
}

int kv_err(kv_txn *txn, int rc, const char *what)
{
	switch (rc) {
	case 0:
		return 0;
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_KEYEXIST:
		return -EEXIST;
	case MDB_MAP_FULL:
		if (txn)
			txn->map_full = 1;
		return -ENOSPC;
	case MDB_TXN_FULL:
		if (txn)
			txn->txn_full = 1;
		return -ENOSPC;
	case MDB_READERS_FULL:
		kv_log("%s: reader table full", what);
		return -EAGAIN;
	case ENOMEM:
		return -ENOMEM;
	case ENOSPC:
		return -ENOSPC;
	case EACCES:
	case EROFS:
	case EPERM:
		return -rc;
	default:
		kv_log("%s: %s", what, mdb_strerror(rc));
		return -EIO;
	}
}

uint64_t kv_name_hash_xxh3(const char *name, size_t len)
{
	return XXH3_64bits(name, len) >> (64 - KV_HASH_BITS);
}

uint64_t (*kv_name_hash)(const char *name, size_t len) = kv_name_hash_xxh3;

uint64_t kv_block_csum(uint64_t ino, uint64_t idx, const void *data, size_t len)
{
	return XXH3_64bits_withSeed(data, len, ino * 0x9E3779B97F4A7C15ULL + idx);
}

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
