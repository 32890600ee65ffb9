/*
 * raw.c - raw access to the databases for fsck, dump and tests: iterators,
 * puts and deletes of whole records, the decoders of records read that way,
 * and the hot backup.
 *
 * Invariants:
 *  1. Iterators and decoders never trust what they read: malformed records
 *     are -EIO to the caller, which reports them; nothing here asserts on
 *     disk data.
 *  2. Raw writes go through the writer's transaction like every other
 *     write; they bypass the record-level rules, so only repair code uses
 *     them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kv_int.h"

struct kv_iter {
	kv_txn *t;
	MDB_cursor *c;
	MDB_cursor_op next_op; /* MDB_FIRST, MDB_GET_CURRENT after a seek, MDB_NEXT */
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
	MDB_stat ms;
	int rc = mdb_stat(t->txn, t->env->dbi[db], &ms);

	if (rc)
		return kv_err(t, rc, "stat");
	*count = ms.ms_entries;
	return 0;
}

int kv_iter_open(kv_txn *t, enum kv_db db, kv_iter **out)
{
	kv_iter *it = calloc(1, sizeof(*it));
	int rc;

	if (!it)
		return -ENOMEM;
	rc = mdb_cursor_open(t->txn, t->env->dbi[db], &it->c);
	if (rc) {
		free(it);
		return kv_err(t, rc, "open cursor");
	}
	it->t = t;
	it->next_op = MDB_FIRST;
	*out = it;
	return 0;
}

int kv_iter_seek(kv_iter *it, const void *key, size_t klen)
{
	MDB_val k = {klen, (void *)key}, v;
	int rc = mdb_cursor_get(it->c, &k, &v, MDB_SET_RANGE);

	if (rc == MDB_NOTFOUND) {
		it->at_end = 1;
		return -ENOENT;
	}
	if (rc)
		return kv_err(it->t, rc, "seek");
	it->at_end = 0;
	it->next_op = MDB_GET_CURRENT;
	return 0;
}

int kv_iter_next(kv_iter *it, const void **key, size_t *klen, const void **val, size_t *vlen)
{
	MDB_val k, v;
	int rc;

	if (it->at_end)
		return -ENOENT;
	rc = mdb_cursor_get(it->c, &k, &v, it->next_op);
	it->next_op = MDB_NEXT;
	if (rc == MDB_NOTFOUND) {
		it->at_end = 1;
		return -ENOENT;
	}
	if (rc)
		return kv_err(it->t, rc, "next");
	*key = k.mv_data;
	*klen = k.mv_size;
	*val = v.mv_data;
	*vlen = v.mv_size;
	return 0;
}

void kv_iter_close(kv_iter *it)
{
	if (!it)
		return;
	mdb_cursor_close(it->c);
	free(it);
}

int kv_raw_put(kv_txn *t, enum kv_db db, const void *key, size_t klen, const void *val,
	       size_t vlen)
{
	MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};

	if (!t->write)
		return -EROFS;
	return kv_err(t, mdb_put(t->txn, t->env->dbi[db], &k, &v, 0), "raw put");
}

int kv_raw_del(kv_txn *t, enum kv_db db, const void *key, size_t klen)
{
	MDB_val k = {klen, (void *)key};

	if (!t->write)
		return -EROFS;
	return kv_err(t, mdb_del(t->txn, t->env->dbi[db], &k, NULL), "raw delete");
}

int kv_decode_inode(uint64_t ino, const void *val, size_t vlen, struct kv_inode *out)
{
	return kv_inode_decode(ino, val, vlen, out);
}

int kv_decode_super(const void *val, size_t vlen, struct kv_super *out)
{
	return kv_super_decode(val, vlen, out);
}

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

int kv_check_block(kv_env *e, uint64_t ino, uint64_t idx, const void *val, size_t vlen,
		   size_t *len)
{
	const unsigned char *p = val;

	if (vlen <= KV_CSUM_LEN || vlen > e->super.block_size + KV_CSUM_LEN)
		return -EIO;
	*len = vlen - KV_CSUM_LEN;
	if (kv_block_csum(ino, idx, p, *len) != kv_get_le64(p + *len))
		return -EIO;
	return 0;
}

uint64_t kv_dirent_hash(const char *name, size_t len)
{
	return kv_name_hash(name, len);
}

uint64_t kv_key_u64(const void *p)
{
	return kv_get_be64(p);
}

void kv_key_put_u64(void *p, uint64_t v)
{
	kv_put_be64(p, v);
}

int kv_ino_counter_raise(kv_txn *t, uint64_t next)
{
	if (!t->write)
		return -EROFS;
	if (t->env->next_ino < next)
		t->env->next_ino = next; /* stored by the batch's commit */
	return 0;
}

int kv_backup(kv_env *e, const char *dest, char *err, size_t errlen)
{
	struct stat st;
	int fd, rc;

	if (stat(dest, &st) == 0) {
		snprintf(err, errlen, "'%s' exists", dest);
		return -EEXIST;
	}
	fd = open(dest, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create '%s': %s", dest, strerror(-rc));
		return rc;
	}
	/* one read transaction inside LMDB: a consistent snapshot, compacted */
	rc = mdb_env_copyfd2(e->env, fd, MDB_CP_COMPACT);
	if (rc == 0 && fsync(fd) != 0)
		rc = errno;
	close(fd);
	if (rc) {
		unlink(dest);
		snprintf(err, errlen, "backup to '%s': %s", dest, mdb_strerror(rc));
		return rc > 0 ? -rc : -EIO;
	}
	return 0;
}
