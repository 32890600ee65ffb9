/*
 * test_env.c - kv/env.c: kv_mkfs (a fresh image, its refusals), kv_open and
 * kv_close (everything survives a reopen, read-only opens), the refusals of
 * kv_open (foreign, empty, truncated, newer or incompatible images; a second
 * read-write open) which leave the file as it was, a file that ends short
 * of pages that are all free (opened: LMDB leaves it so), the wait for a lock
 * holder on its way out, a map at its maximum
 * (-ENOSPC, nothing lost), the recycling of per-thread read
 * transactions across many calls and many short-lived threads, and the
 * debug builds' checks that a read transaction is used only by its thread
 * while it is active.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <dirent.h>

#include "lmdb_int.h"
#include "testutil.h"

static struct tu_image *image_of(void **state)
{
	return *state;
}

/* ------------------------------------------------------------- mkfs -- */

static void mkfs_fresh(void **state)
{
	struct tu_image *im = image_of(state);
	struct kv_mkfs_opts o = {.label = "scratch",
	                         .root_uid = 1234,
	                         .root_gid = 99,
	                         .root_mode = 01777 | 040000,
	                         .block_size = 8168,
	                         .force = 1};
	struct kv_super s;
	struct kv_inode root;
	struct kv_usage u;

	assert_int_equal(kv_mkfs(im->path, &o, im->err, sizeof(im->err)), 0);
	assert_int_equal(tu_image_open(im, NULL), 0);
	kv_super_get(im->env, &s);
	assert_int_equal(s.version, KV_FORMAT_VERSION);
	assert_int_equal(s.block_size, 8168);
	assert_int_equal(kv_block_size(im->env), 8168);
	assert_string_equal(s.label, "scratch");
	assert_true(s.next_ino == KV_ROOT_INO + 1);
	assert_int_equal(s.uuid[6] >> 4, 4); /* random (version 4) uuid */
	assert_int_equal(s.uuid[8] & 0xc0, 0x80);
	assert_true(s.feature_incompat == 0 && s.feature_ro_compat == 0);
	assert_true(s.created_ns > 1600000000LL * 1000000000LL);
	assert_int_equal(kv_is_readonly(im->env), 0);

	assert_int_equal(tu_getattr(im->env, KV_ROOT_INO, &root), 0);
	assert_int_equal(root.mode, 040000 | 01777); /* permission bits only from root_mode */
	assert_int_equal(root.uid, 1234);
	assert_int_equal(root.gid, 99);
	assert_int_equal(root.nlink, 2);
	assert_true(root.parent == KV_ROOT_INO);
	assert_true(root.size == 0 && root.nblocks == 0);
	assert_true(root.mtime_ns == s.created_ns && root.btime_ns == s.created_ns);

	assert_int_equal(kv_usage_get(im->env, &u), 0);
	assert_true(u.inodes == 1 && u.blocks == 0 && u.dirents == 0 && u.xattrs == 0 &&
	            u.orphans == 0);
	assert_true(u.file_bytes > 0 && u.used_bytes <= u.file_bytes);
	assert_true(u.map_bytes >= u.file_bytes);
	assert_int_equal(u.page_size, sysconf(_SC_PAGESIZE));
	assert_int_equal(kv_sync(im->env), 0);
}

static void mkfs_refusals(void **state)
{
	struct tu_image *im = image_of(state);
	struct kv_mkfs_opts o = {.root_mode = 0755};
	char label[KV_LABEL_MAX + 2], other[PATH_MAX];
	unsigned char *before, *after;
	size_t blen, alen;
	struct kv_super s1, s2;

	before = tu_slurp(im->path, &blen);
	assert_non_null(before);
	im->err[0] = '\0';
	assert_int_equal(kv_mkfs(im->path, &o, im->err, sizeof(im->err)), -EEXIST);
	assert_true(im->err[0] != '\0');
	after = tu_slurp(im->path, &alen);
	assert_non_null(after);
	assert_int_equal(alen, blen);
	assert_memory_equal(after, before, blen);
	free(before);
	free(after);

	tu_image_file(im, "other", other);
	o.block_size = KV_BLOCK_SIZE_MIN - 1;
	assert_int_equal(kv_mkfs(other, &o, im->err, sizeof(im->err)), -EINVAL);
	o.block_size = KV_BLOCK_SIZE_MAX + 1;
	assert_int_equal(kv_mkfs(other, &o, im->err, sizeof(im->err)), -EINVAL);
	o.block_size = 0;
	memset(label, 'l', sizeof(label));
	label[KV_LABEL_MAX + 1] = '\0';
	o.label = label;
	assert_int_equal(kv_mkfs(other, &o, im->err, sizeof(im->err)), -EINVAL);
	assert_int_equal(access(other, F_OK), -1); /* nothing was created */
	o.label = NULL;
	assert_int_equal(kv_mkfs(im->dir, &o, im->err, sizeof(im->err)), -EEXIST);
	tu_image_file(im, "no/such/dir", other);
	assert_int_equal(kv_mkfs(other, &o, im->err, sizeof(im->err)), -ENOENT);

	/* force replaces the image; not while it is open */
	assert_int_equal(tu_image_open(im, NULL), 0);
	kv_super_get(im->env, &s1);
	o.force = 1;
	assert_int_equal(kv_mkfs(im->path, &o, im->err, sizeof(im->err)), -EBUSY);
	tu_image_close(im);
	assert_int_equal(kv_mkfs(im->path, &o, im->err, sizeof(im->err)), 0);
	assert_int_equal(tu_image_open(im, NULL), 0);
	kv_super_get(im->env, &s2);
	assert_memory_not_equal(s1.uuid, s2.uuid, 16);
}

/* ----------------------------------------------------------- reopen -- */

struct populated {
	uint64_t dir, file, link, orphan, max_ino;
	unsigned char data[10000];
};

static int populate_apply(kv_txn *t, void *p)
{
	struct populated *pp = p;
	struct kv_inode in = {.mode = 040750, .nlink = 2, .parent = KV_ROOT_INO, .uid = 7};
	int rc;

	if ((rc = kv_ino_alloc(t, &pp->dir)) || (rc = kv_ino_alloc(t, &pp->file)) ||
	    (rc = kv_ino_alloc(t, &pp->link)) || (rc = kv_ino_alloc(t, &pp->orphan)))
		return rc;
	in.ino = pp->dir;
	in.mtime_ns = 1234567890123456789LL;
	if ((rc = kv_inode_put(t, &in)) ||
	    (rc = kv_dirent_add(t, KV_ROOT_INO, "dir", 3, pp->dir, DT_DIR)))
		return rc;
	in = (struct kv_inode){.ino = pp->file, .mode = 0100600, .nlink = 1, .gid = 8};
	if ((rc = kv_data_write(t, &in, 3, pp->data, sizeof(pp->data))) ||
	    (rc = kv_inode_put(t, &in)) ||
	    (rc = kv_dirent_add(t, pp->dir, "file", 4, pp->file, DT_REG)) ||
	    (rc = kv_xattr_set(t, pp->file, "user.k", "v1", 2, 0)))
		return rc;
	in = (struct kv_inode){.ino = pp->link,
	                       .mode = 0120777,
	                       .nlink = 1,
	                       .size = 11,
	                       .inline_data = "target/path",
	                       .inline_len = 11};
	if ((rc = kv_inode_put(t, &in)) ||
	    (rc = kv_dirent_add(t, KV_ROOT_INO, "link", 4, pp->link, DT_LNK)))
		return rc;
	in = (struct kv_inode){.ino = pp->orphan, .mode = 0100644};
	if ((rc = kv_inode_put(t, &in)) || (rc = kv_orphan_add(t, pp->orphan)))
		return rc;
	for (int i = 0; i < 10; i++) /* numbers given out, never stored */
		if ((rc = kv_ino_alloc(t, &pp->max_ino)))
			return rc;
	return 0;
}

static uint64_t lookup(kv_txn *t, uint64_t dir, const char *name)
{
	struct kv_dirent de;

	assert_int_equal(kv_dirent_lookup(t, dir, name, strlen(name), &de), 0);
	return de.ino;
}

static void check_populated(kv_env *e, const struct populated *pp)
{
	unsigned char got[sizeof(pp->data) + 3];
	struct kv_inode in;
	const void *val;
	size_t len;
	uint64_t o;
	kv_txn *t;

	assert_int_equal(kv_read_begin(e, &t), 0);
	assert_true(lookup(t, KV_ROOT_INO, "dir") == pp->dir);
	assert_true(lookup(t, pp->dir, "file") == pp->file);
	assert_true(lookup(t, KV_ROOT_INO, "link") == pp->link);
	assert_int_equal(kv_inode_get(t, pp->dir, &in), 0);
	assert_int_equal(in.mode, 040750);
	assert_int_equal(in.uid, 7);
	assert_true(in.mtime_ns == 1234567890123456789LL);
	assert_int_equal(kv_inode_get(t, pp->file, &in), 0);
	assert_true(in.size == sizeof(pp->data) + 3 && in.nblocks == 3);
	assert_int_equal(in.gid, 8);
	assert_int_equal(kv_inode_get(t, pp->link, &in), 0);
	assert_int_equal(in.inline_len, 11);
	assert_memory_equal(in.inline_data, "target/path", 11);
	assert_int_equal(kv_xattr_get(t, pp->file, "user.k", &val, &len), 0);
	assert_int_equal(len, 2);
	assert_memory_equal(val, "v1", 2);
	assert_int_equal(kv_orphan_next(t, 0, &o), 0);
	assert_true(o == pp->orphan);
	assert_int_equal(kv_orphan_next(t, o, &o), -ENOENT);
	kv_read_end(t);
	assert_int_equal(tu_pread(e, pp->file, 0, sizeof(got), got), sizeof(got));
	assert_memory_equal(got, "\0\0\0", 3);
	assert_memory_equal(got + 3, pp->data, sizeof(pp->data));
}

static int alloc_apply(kv_txn *t, void *p)
{
	return kv_ino_alloc(t, p);
}

static void reopen_keeps_everything(void **state)
{
	struct tu_image *im = image_of(state);
	struct populated *pp = calloc(1, sizeof(*pp));
	struct kv_open_opts ro = {.readonly = 1}, full = {.durability = KV_DURABLE_FULL};
	struct kv_super s1, s2;
	struct kv_op op = {0};
	uint64_t ino = 0;

	assert_non_null(pp);
	tu_fill(pp->data, sizeof(pp->data), 5);
	assert_int_equal(kv_write(im->env, populate_apply, pp, KV_OP_SYNC), 0);
	assert_true(pp->max_ino > pp->orphan);
	check_populated(im->env, pp);
	kv_super_get(im->env, &s1);
	assert_true(s1.next_ino == pp->max_ino + 1);
	tu_image_close(im);

	assert_int_equal(tu_image_open(im, &ro), 0);
	assert_int_equal(kv_is_readonly(im->env), 1);
	check_populated(im->env, pp);
	assert_int_equal(kv_submit(im->env, &op), -EROFS);
	assert_int_equal(kv_write(im->env, alloc_apply, &ino, 0), -EROFS);
	tu_image_close(im);

	assert_int_equal(tu_image_open(im, &full), 0);
	check_populated(im->env, pp);
	kv_super_get(im->env, &s2);
	assert_memory_equal(s2.uuid, s1.uuid, 16);
	assert_true(s2.created_ns == s1.created_ns);
	assert_int_equal(kv_write(im->env, alloc_apply, &ino, 0), 0);
	assert_true(ino > pp->max_ino);
	tu_image_close(im);
	/* the number given out just now is not given again either */
	assert_int_equal(tu_image_open(im, NULL), 0);
	uint64_t ino2 = 0;
	assert_int_equal(kv_write(im->env, alloc_apply, &ino2, 0), 0);
	assert_true(ino2 > ino);
	free(pp);
}

/* ---------------------------------------------------------- inodes -- */

struct inode_arg {
	int step;
	int rc[8];
	struct kv_inode got;
	char inline_copy[16];
};

/* Read-modify-write of an inode inside one transaction, the inline data
 * handed from kv_inode_get straight back to kv_inode_put. */
static int inode_rmw_apply(kv_txn *t, void *p)
{
	struct inode_arg *a = p;
	struct kv_inode in = {
	        .ino = 50, .mode = 0120777, .nlink = 1, .inline_data = "abcdef", .inline_len = 6};
	struct kv_inode other = {.ino = 51, .mode = 0100644};
	int rc;

	if ((rc = kv_inode_put(t, &in)) || (rc = kv_inode_put(t, &other)))
		return rc;
	if ((rc = kv_inode_get(t, 50, &in)))
		return rc;
	in.mode = 0120700;
	if ((rc = kv_inode_put(t, &in)) || (rc = kv_inode_get(t, 50, &in)))
		return rc;
	in.inline_len = 2; /* keep a prefix: the record shrinks */
	if ((rc = kv_inode_put(t, &in)) || (rc = kv_inode_get(t, 50, &a->got)))
		return rc;
	memcpy(a->inline_copy, a->got.inline_data, a->got.inline_len);
	return 0;
}

static int inode_limits_apply(kv_txn *t, void *p)
{
	static char target[KV_SYMLINK_MAX + 1];
	struct inode_arg *a = p;
	struct kv_inode in = {.ino = 60, .mode = 0120777, .inline_data = target};
	uint64_t o;

	memset(target, 't', sizeof(target));
	in.inline_len = KV_SYMLINK_MAX + 1;
	a->rc[0] = kv_inode_put(t, &in);
	in.inline_len = KV_SYMLINK_MAX;
	a->rc[1] = kv_inode_put(t, &in);
	a->rc[2] = kv_orphan_add(t, 60);
	a->rc[3] = kv_orphan_add(t, 7);
	a->rc[4] = kv_orphan_remove(t, 8);
	a->rc[5] = kv_orphan_next(t, 7, &o) == 0 && o == 60 ? 0 : -1;
	a->rc[6] = kv_orphan_remove(t, 7);
	return 0;
}

static void inode_records(void **state)
{
	kv_env *e = image_of(state)->env;
	struct inode_arg a = {0};
	struct kv_inode in;
	uint64_t o;
	kv_txn *t;

	assert_int_equal(kv_write(e, inode_rmw_apply, &a, 0), 0);
	assert_int_equal(a.got.mode, 0120700);
	assert_int_equal(a.got.inline_len, 2);
	assert_memory_equal(a.inline_copy, "ab", 2);
	assert_int_equal(kv_write(e, inode_limits_apply, &a, 0), 0);
	assert_int_equal(a.rc[0], -ENAMETOOLONG);
	assert_int_equal(a.rc[1], 0);
	assert_int_equal(a.rc[2], 0);
	assert_int_equal(a.rc[3], 0);
	assert_int_equal(a.rc[4], -ENOENT);
	assert_int_equal(a.rc[5], 0);
	assert_int_equal(a.rc[6], 0);

	assert_int_equal(kv_read_begin(e, &t), 0);
	assert_int_equal(kv_inode_get(t, 60, &in), 0);
	assert_int_equal(in.inline_len, KV_SYMLINK_MAX);
	assert_int_equal(((const char *)in.inline_data)[KV_SYMLINK_MAX - 1], 't');
	assert_int_equal(kv_inode_get(t, 61, &in), -ENOENT);
	assert_int_equal(kv_orphan_next(t, 0, &o), 0);
	assert_true(o == 60);
	assert_int_equal(kv_orphan_next(t, 60, &o), -ENOENT);
	assert_int_equal(kv_orphan_next(t, UINT64_MAX, &o), -ENOENT);
	/* a read transaction refuses writes */
	assert_int_equal(kv_inode_put(t, &in), -EROFS);
	assert_int_equal(kv_ino_alloc(t, &o), -EROFS);
	assert_int_equal(kv_orphan_add(t, 5), -EROFS);
	assert_int_equal(kv_inode_purge(t, 60), -EROFS);
	kv_read_end(t);
}

/* --------------------------------------------------------- refusals -- */

/* kv_open of path fails with want and a message, and leaves the file's
 * bytes (and the absence of a lock file) as they were. */
static void expect_refused(const char *path, int readonly, int want)
{
	struct kv_open_opts o = {.readonly = readonly};
	unsigned char *before, *after;
	size_t blen = 0, alen = 0;
	char lock[PATH_MAX + 8], err[512] = "";
	int had_lock;
	kv_env *e = NULL;

	snprintf(lock, sizeof(lock), "%s-lock", path);
	had_lock = access(lock, F_OK) == 0;
	before = tu_slurp(path, &blen);
	assert_int_equal(kv_open(path, &o, &e, err, sizeof(err)), want);
	assert_null(e);
	if (err[0] == '\0')
		fail_msg("no message for '%s'", path);
	after = tu_slurp(path, &alen);
	assert_true((before == NULL) == (after == NULL));
	assert_int_equal(alen, blen);
	if (blen)
		assert_memory_equal(after, before, blen);
	assert_int_equal(access(lock, F_OK) == 0, had_lock);
	free(before);
	free(after);
}

static void refuse_foreign(void **state)
{
	struct tu_image *im = image_of(state);
	char path[PATH_MAX], line[80];
	size_t len = 64 << 10, n;
	unsigned char *junk = malloc(len);
	char *text = malloc(len);

	assert_non_null(junk);
	assert_non_null(text);
	tu_fill(junk, len, 11);
	assert_int_equal(tu_spit(tu_image_file(im, "random", path), junk, len), 0);
	expect_refused(path, 0, -EINVAL);
	expect_refused(path, 1, -EINVAL);

	for (n = 0; n + sizeof(line) < len;) {
		int k = snprintf(line, sizeof(line), "line %zu of a text file, not an image\n", n);
		memcpy(text + n, line, (size_t)k);
		n += (size_t)k;
	}
	assert_int_equal(tu_spit(tu_image_file(im, "big.txt", path), text, n), 0);
	expect_refused(path, 0, -EINVAL);
	assert_int_equal(tu_spit(tu_image_file(im, "small.txt", path), "hello\n", 6), 0);
	expect_refused(path, 0, -EINVAL);
	expect_refused(path, 1, -EINVAL);
	assert_int_equal(tu_spit(tu_image_file(im, "empty", path), "", 0), 0);
	expect_refused(path, 0, -EINVAL);
	expect_refused(path, 1, -EINVAL);
	expect_refused(tu_image_file(im, "missing", path), 0, -ENOENT);
	expect_refused(im->dir, 1, -EINVAL);
	free(junk);
	free(text);
}

/* An LMDB file that is not a kvfs image. */
static void refuse_plain_lmdb(void **state)
{
	struct tu_image *im = image_of(state);
	char path[PATH_MAX];
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k = {5, "hello"}, v = {5, "world"};

	tu_image_file(im, "plain.mdb", path);
	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_open(env, path, MDB_NOSUBDIR, 0644), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
	assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	expect_refused(path, 0, -EINVAL);
	expect_refused(path, 1, -EINVAL);
}

static void refuse_truncated(void **state)
{
	struct tu_image *im = image_of(state);
	size_t len = 4 << 20;
	unsigned char *data = malloc(len);
	uint64_t ino;
	struct stat st;

	assert_non_null(data);
	tu_fill(data, len, 12);
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "big", 0100644, &ino), 0);
	assert_int_equal(tu_pwrite(im->env, ino, 0, data, len), 0);
	tu_image_close(im);
	assert_int_equal(stat(im->path, &st), 0);
	assert_true(st.st_size > (off_t)len);
	assert_int_equal(truncate(im->path, st.st_size / 2), 0);
	expect_refused(im->path, 0, -EIO);
	expect_refused(im->path, 1, -EIO);
	free(data);
}

/* One LMDB transaction on the closed image that puts values big enough for
 * overflow pages past the file's end and deletes them again: LMDB writes
 * none of those pages (they are freed, never flushed), yet its meta page
 * counts them, so the file ends short of the last page the meta names.
 * Every commit that takes pages past the end and frees them can leave an
 * image so; a crash (or power loss) right after it keeps it. */
static void leave_free_tail(const char *path, struct stat *st, uint64_t *need)
{
	static unsigned char big[3000];
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_envinfo info;
	MDB_stat ms;

	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_set_maxdbs(env, KV_NDB), 0);
	assert_int_equal(mdb_env_open(env, path, MDB_NOSUBDIR, 0600), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, kv_db_names[KV_DB_XATTR], 0, &dbi), 0);
	for (int i = 0; i < 50; i++) {
		char key[32];
		MDB_val k = {(size_t)snprintf(key, sizeof(key), "scratch-%02d", i), key};
		MDB_val v = {sizeof(big), big};
		assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
	}
	for (int i = 0; i < 50; i++) {
		char key[32];
		MDB_val k = {(size_t)snprintf(key, sizeof(key), "scratch-%02d", i), key};
		assert_int_equal(mdb_del(txn, dbi, &k, NULL), 0);
	}
	assert_int_equal(mdb_txn_commit(txn), 0);
	assert_int_equal(mdb_env_info(env, &info), 0);
	assert_int_equal(mdb_env_stat(env, &ms), 0);
	mdb_env_close(env);
	*need = ((uint64_t)info.me_last_pgno + 1) * ms.ms_psize;
	assert_int_equal(stat(path, st), 0);
}

/* An image whose file ends short of its last page, every missing page free
 * (leave_free_tail): sound, so it opens, read-write and read-only, and
 * keeps what it held. */
static void open_free_tail(void **state)
{
	struct tu_image *im = image_of(state);
	struct kv_open_opts ro = {.readonly = 1};
	unsigned char data[20000], got[sizeof(data)];
	uint64_t ino, need;
	struct stat st;

	tu_fill(data, sizeof(data), 5);
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "kept", 0100644, &ino), 0);
	assert_int_equal(tu_pwrite(im->env, ino, 0, data, sizeof(data)), 0);
	tu_image_close(im);
	leave_free_tail(im->path, &st, &need);
	assert_true((uint64_t)st.st_size < need); /* the case under test */
	for (int readonly = 1; readonly >= 0; readonly--) {
		if (tu_image_open(im, readonly ? &ro : NULL) != 0)
			fail_msg("open (%s): %s", readonly ? "read-only" : "read-write", im->err);
		assert_int_equal(tu_pread(im->env, ino, 0, sizeof(got), got), (ssize_t)sizeof(got));
		assert_memory_equal(got, data, sizeof(data));
		tu_image_close(im);
	}
}

static void set_le(unsigned char *val, size_t len, void *arg)
{
	const uint64_t *at_value = arg; /* {offset, value, width} */

	assert_true(at_value[0] + at_value[2] <= len);
	for (uint64_t i = 0; i < at_value[2]; i++)
		val[at_value[0] + i] = (unsigned char)(at_value[1] >> (8 * i));
}

static void patch_super(struct tu_image *im, uint64_t off, uint64_t value, uint64_t width)
{
	uint64_t arg[3] = {off, value, width};

	tu_image_close(im);
	assert_int_equal(tu_raw_edit(im->path, kv_db_names[KV_DB_META], KV_SUPER_KEY,
	                             strlen(KV_SUPER_KEY), set_le, arg),
	                 0);
}

static void refuse_newer_version(void **state)
{
	struct tu_image *im = image_of(state);
	char err[512];
	kv_env *e;

	patch_super(im, 8, KV_FORMAT_VERSION + 1, 4);
	expect_refused(im->path, 0, -EPROTONOSUPPORT);
	expect_refused(im->path, 1, -EPROTONOSUPPORT);
	assert_int_equal(kv_open(im->path, NULL, &e, err, sizeof(err)), -EPROTONOSUPPORT);
	assert_non_null(strstr(err, "version 3"));
}

static const char *upgrade_log;
static void keep_upgrade_line(const char *line)
{
	if (strstr(line, "upgraded"))
		upgrade_log = "upgraded";
}

/* A version 1 image (no databases of shared blocks): read-only it opens as
 * it is; read-write it is upgraded to version 2, with a word in the log,
 * and keeps what it held. */
static void upgrade_version_1(void **state)
{
	struct tu_image *im = image_of(state);
	struct kv_open_opts ro = {.readonly = 1};
	unsigned char data[9000], got[sizeof(data)];
	struct kv_super s;
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	kv_iter *it;
	kv_txn *t;
	uint64_t ino, n;
	struct stat st;
	const void *k, *v;
	size_t kl, vl;

	tu_fill(data, sizeof(data), 9);
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "old", 0100644, &ino), 0);
	assert_int_equal(tu_pwrite(im->env, ino, 0, data, sizeof(data)), 0);
	tu_image_close(im);
	assert_int_equal(mdb_env_create(&env), 0);
	assert_int_equal(mdb_env_set_maxdbs(env, KV_NDB), 0);
	assert_int_equal(mdb_env_open(env, im->path, MDB_NOSUBDIR, 0600), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	for (int i = KV_DB_EXTENT; i <= KV_DB_LEND; i++) {
		assert_int_equal(mdb_dbi_open(txn, kv_db_names[i], 0, &dbi), 0);
		assert_int_equal(mdb_drop(txn, dbi, 1), 0);
	}
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	patch_super(im, 8, 1, 4);
	assert_int_equal(stat(im->path, &st), 0);

	if (tu_image_open(im, &ro) != 0)
		fail_msg("read-only open of version 1: %s", im->err);
	kv_super_get(im->env, &s);
	assert_int_equal(s.version, 1);
	assert_int_equal(tu_pread(im->env, ino, 0, sizeof(got), got), (ssize_t)sizeof(got));
	assert_memory_equal(got, data, sizeof(data));
	assert_int_equal(kv_read_begin(im->env, &t), 0);
	assert_int_equal(kv_db_count(t, KV_DB_EXTENT, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(kv_iter_open(t, KV_DB_LEND, &it), 0);
	assert_int_equal(kv_iter_next(it, &k, &kl, &v, &vl), -ENOENT);
	kv_iter_close(it);
	kv_read_end(t);
	tu_image_close(im);

	upgrade_log = NULL;
	kv_set_log(keep_upgrade_line);
	assert_int_equal(tu_image_open(im, NULL), 0);
	kv_set_log(NULL);
	assert_non_null(upgrade_log);
	kv_super_get(im->env, &s);
	assert_int_equal(s.version, KV_FORMAT_VERSION);
	assert_int_equal(tu_pread(im->env, ino, 0, sizeof(got), got), (ssize_t)sizeof(got));
	assert_memory_equal(got, data, sizeof(data));
	tu_image_close(im);
	assert_int_equal(tu_image_open(im, &ro), 0); /* stored: version 2 now */
	kv_super_get(im->env, &s);
	assert_int_equal(s.version, KV_FORMAT_VERSION);
	assert_int_equal(kv_read_begin(im->env, &t), 0);
	assert_int_equal(kv_db_count(t, KV_DB_EXTENT, &n), 0);
	kv_read_end(t);
}

static void refuse_features(void **state)
{
	struct tu_image *im = image_of(state);

	patch_super(im, 32, 8, 8); /* an incompatible feature this build lacks */
	expect_refused(im->path, 0, -EPROTONOSUPPORT);
	expect_refused(im->path, 1, -EPROTONOSUPPORT);
	patch_super(im, 32, KV_FEATURE_INCOMPAT_UNWRITTEN, 8); /* one it has */
	assert_int_equal(tu_image_open(im, NULL), 0);
	tu_image_close(im);
	patch_super(im, 32, 0, 8);
	patch_super(im, 24, 4, 8); /* read-only compatible: read-only opens only */
	expect_refused(im->path, 0, -EPROTONOSUPPORT);
	assert_int_equal(tu_image_open(im, &(struct kv_open_opts){.readonly = 1}), 0);
	tu_image_close(im);
	patch_super(im, 24, 0, 8);
	assert_int_equal(tu_image_open(im, NULL), 0);
}

static void refuse_second_open(void **state)
{
	struct tu_image *im = image_of(state);
	uint64_t ino;

	expect_refused(im->path, 0, -EBUSY);
	/* the first open is unharmed */
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "f", 0100644, &ino), 0);
	tu_image_close(im);
	assert_int_equal(tu_image_open(im, NULL), 0);
	expect_refused(im->path, 0, -EBUSY);
}

static double secs_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* A process that holds the lock for hold_ms, then exits; returns once it
 * holds it. */
static pid_t hold_lock(const char *path, int hold_ms)
{
	int p[2], fd;
	char c;
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		fd = open(path, O_RDONLY);
		if (fd < 0 || flock(fd, LOCK_EX) != 0 || write(p[1], "x", 1) != 1)
			_exit(1);
		usleep((useconds_t)hold_ms * 1000);
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);
	return pid;
}

/* A holder with no mount of the image (a daemon on its way out) is waited
 * for; this process's own lock is refused at once, never waited for. */
static void lock_waits_for_a_leaving_holder(void **state)
{
	struct tu_image *im = image_of(state);
	struct kv_mkfs_opts force = {.force = 1, .root_mode = 0755};
	struct timespec t0;
	pid_t pid;
	int status;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(kv_mkfs(im->path, &force, im->err, sizeof(im->err)), -EBUSY);
	assert_true(secs_since(&t0) < 0.5);
	assert_non_null(strstr(im->err, "in use"));
	tu_image_close(im);

	pid = hold_lock(im->path, 300);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(tu_image_open(im, NULL), 0);
	assert_true(secs_since(&t0) >= 0.25 && secs_since(&t0) < 3);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	tu_image_close(im);

	pid = hold_lock(im->path, 300);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(kv_mkfs(im->path, &force, im->err, sizeof(im->err)), 0);
	assert_true(secs_since(&t0) >= 0.25 && secs_since(&t0) < 3);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(tu_image_open(im, NULL), 0);
}

/* --------------------------------------------------------- map full -- */

static void map_full(void **state)
{
	struct tu_image *im = image_of(state);
	struct kv_open_opts capped = {.max_size = 1 << 20};
	uint64_t bs, ino, n = 0;
	unsigned char *blk, *got;
	struct kv_inode in;
	int rc;

	assert_int_equal(tu_image_open(im, &capped), 0);
	bs = kv_block_size(im->env);
	blk = malloc(bs);
	got = malloc(bs);
	assert_non_null(blk);
	assert_non_null(got);
	assert_int_equal(tu_mkfile(im->env, KV_ROOT_INO, "f", 0100644, &ino), 0);
	for (;;) {
		tu_fill(blk, bs, n);
		rc = tu_pwrite(im->env, ino, n * bs, blk, bs);
		if (rc)
			break;
		n++;
		assert_true(n < 1000);
	}
	assert_int_equal(rc, -ENOSPC);
	assert_true(n > 20);
	for (int pass = 0; pass < 2; pass++) {
		assert_int_equal(tu_getattr(im->env, ino, &in), 0);
		assert_true(in.size == n * bs && in.nblocks == n);
		for (uint64_t i = 0; i < n; i++) {
			tu_fill(blk, bs, i);
			assert_int_equal(tu_pread(im->env, ino, i * bs, bs, got), (ssize_t)bs);
			assert_memory_equal(got, blk, bs);
		}
		tu_image_close(im);
		assert_int_equal(tu_image_open(im, NULL), 0);
	}
	/* without the cap the map grows: the write that failed now succeeds */
	tu_fill(blk, bs, n);
	assert_int_equal(tu_pwrite(im->env, ino, n * bs, blk, bs), 0);
	assert_int_equal(tu_pread(im->env, ino, n * bs, bs, got), (ssize_t)bs);
	assert_memory_equal(got, blk, bs);
	free(blk);
	free(got);
}

/* ------------------------------------------------------- read txns -- */

struct reader_arg {
	kv_env *env;
	int loops;
	int rc;
};

/* loops times: begin, read the root inode, end. */
static void *reader_main(void *p)
{
	struct reader_arg *a = p;
	struct kv_inode in;
	kv_txn *t;

	for (int i = 0; i < a->loops && !a->rc; i++) {
		a->rc = kv_read_begin(a->env, &t);
		if (a->rc)
			break;
		a->rc = kv_inode_get(t, KV_ROOT_INO, &in);
		if (!a->rc && in.mode != (040000 | 0755))
			a->rc = -EPROTO;
		kv_read_end(t);
	}
	return NULL;
}

static int readers_listed(kv_env *e)
{
	int n = 0;

	pthread_mutex_lock(&e->readers.lock);
	for (struct kv_reader *r = e->readers.list; r; r = r->next)
		n++;
	pthread_mutex_unlock(&e->readers.lock);
	return n;
}

static void read_recycle(void **state)
{
	kv_env *e = image_of(state)->env;
	struct reader_arg one = {e, 10000, 0}, many[4];
	pthread_t th[4];
	MDB_envinfo info;

	reader_main(&one);
	assert_int_equal(one.rc, 0);
	assert_int_equal(readers_listed(e), 1);

	/* a few at once */
	for (int i = 0; i < 4; i++) {
		many[i] = (struct reader_arg){e, 2000, 0};
		assert_int_equal(pthread_create(&th[i], NULL, reader_main, &many[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(many[i].rc, 0);
	}
	/* more threads in sequence than LMDB has reader slots */
	for (int i = 0; i < 600; i++) {
		struct reader_arg a = {e, 3, 0};
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, reader_main, &a), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		if (a.rc)
			fail_msg("thread %d: %d", i, a.rc);
	}
	assert_int_equal(readers_listed(e), 1); /* exited threads freed theirs */
	assert_int_equal(mdb_env_info(kv_lmdb(e)->env, &info), 0);
	assert_in_range(info.me_numreaders, 1, 8); /* slots were reused */
	/* writes still work alongside */
	uint64_t ino;
	assert_int_equal(tu_mkfile(e, KV_ROOT_INO, "after", 0100644, &ino), 0);
}

/* ------------------------------------------------ invariant checks -- */

#ifndef NDEBUG
static void read_after_end(kv_env *e)
{
	struct kv_inode in;
	kv_txn *t;

	if (kv_read_begin(e, &t) == 0) {
		kv_read_end(t);
		kv_inode_get(t, KV_ROOT_INO, &in);
	}
}

static void read_nested(kv_env *e)
{
	kv_txn *t, *u;

	if (kv_read_begin(e, &t) == 0)
		kv_read_begin(e, &u);
}

static void *get_root(void *arg)
{
	struct kv_inode in;

	kv_inode_get(arg, KV_ROOT_INO, &in);
	return NULL;
}

static void read_on_other_thread(kv_env *e)
{
	pthread_t th;
	kv_txn *t;

	if (kv_read_begin(e, &t) == 0 && pthread_create(&th, NULL, get_root, t) == 0)
		pthread_join(th, NULL);
}

/* Debug and sanitizer builds check kv_int.h's invariant 4 with assert: a
 * read transaction used after kv_read_end, begun twice on one thread, or
 * used by another thread aborts there, naming the check. Release builds
 * compile the checks out. */
static void read_invariants_checked(void **state)
{
	struct tu_image *im = image_of(state);

	tu_image_close(im);
	assert_int_equal(tu_aborts(im, read_after_end, "kv_txn_mine(t)"), 1);
	assert_int_equal(tu_aborts(im, read_nested, "!r->active"), 1);
	assert_int_equal(tu_aborts(im, read_on_other_thread, "kv_txn_mine(t)"), 1);
	assert_int_equal(tu_image_open(im, NULL), 0);
}
#else
static void read_invariants_checked(void **state)
{
	(void)state;
	skip(); /* NDEBUG: the checks are compiled out */
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(mkfs_fresh, tu_setup_closed, tu_teardown),
	        cmocka_unit_test_setup_teardown(mkfs_refusals, tu_setup_closed, tu_teardown),
	        cmocka_unit_test_setup_teardown(reopen_keeps_everything, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(inode_records, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(refuse_foreign, tu_setup_closed, tu_teardown),
	        cmocka_unit_test_setup_teardown(refuse_plain_lmdb, tu_setup_closed, tu_teardown),
	        cmocka_unit_test_setup_teardown(refuse_truncated, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(open_free_tail, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(refuse_newer_version, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(refuse_features, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(upgrade_version_1, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(refuse_second_open, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(lock_waits_for_a_leaving_holder, tu_setup,
	                                        tu_teardown),
	        cmocka_unit_test_setup_teardown(map_full, tu_setup_closed, tu_teardown),
	        cmocka_unit_test_setup_teardown(read_recycle, tu_setup, tu_teardown),
	        cmocka_unit_test_setup_teardown(read_invariants_checked, tu_setup, tu_teardown),
	};

	return cmocka_run_group_tests_name("env", tests, NULL, NULL);
}
