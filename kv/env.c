/*
 * env.c - creating, opening and closing images; the map and its growth;
 * the per-thread recycled read transactions.
 *
 * Invariants:
 *  1. An image is trusted only after every check passed: a regular non-empty
 *     file, an LMDB environment whose pages past the file's end, if any, are
 *     all free (tail.c), the six
 *     named databases, and a superblock of a known version. A refused open
 *     leaves the file as it was (a lock file it created is removed again).
 *  2. A read-write open holds flock(LOCK_EX) on the image for its lifetime
 *     (lock.c). mkfs makes the image 0600 (or keeps the mode of the one it
 *     replaces) and LMDB's lock file is no more open than the image.
 *  3. Each thread has at most one kv_reader per env, kept in env->readers and
 *     freed by the thread-exit destructor or by kv_close, whichever is first.
 *  4. A reader holds env->map_lock shared while active; the map is resized
 *     only with it held exclusive (kv_map_resize), by a thread that holds no
 *     transaction: the writer's role between batches, or a reader adopting
 *     another process's growth before it begins.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "kv_int.h"
#include "writer.h"

#define KV_MAP_INITIAL (64ULL << 20)
#define KV_MAP_LIMIT (64ULL << 40) /* address space reserved at most */
#define KV_MAXREADERS 512

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static char *lock_path(const char *path)
{
	size_t n = strlen(path);
	char *p = malloc(n + sizeof("-lock"));
	if (p) {
		memcpy(p, path, n);
		memcpy(p + n, "-lock", sizeof("-lock"));
	}
	return p;
}

/* ---------------------------------------------------------------- mkfs -- */

static int mkfs_write(MDB_env *menv, const struct kv_mkfs_opts *o, uint32_t bs, char *err,
		      size_t errlen)
{
	MDB_txn *txn;
	MDB_dbi dbi[KV_NDB];
	struct kv_super s = {0};
	struct kv_inode root = {0};
	unsigned char sb[KV_SUPER_LEN], ib[KV_INODE_LEN], key[8];
	MDB_val k, v;
	int mrc;

	mrc = mdb_txn_begin(menv, NULL, 0, &txn);
	if (mrc)
		goto fail;
	for (int i = 0; i < KV_NDB; i++) {
		mrc = mdb_dbi_open(txn, kv_db_names[i], MDB_CREATE, &dbi[i]);
		if (mrc)
			goto txn_abort;
	}
	s.version = KV_FORMAT_VERSION;
	s.block_size = bs;
	s.next_ino = KV_ROOT_INO + 1;
	s.created_ns = now_ns();
	if (getrandom(s.uuid, sizeof(s.uuid), 0) != sizeof(s.uuid)) {
		for (size_t i = 0; i < sizeof(s.uuid); i++)
			s.uuid[i] = (uint8_t)(rand() ^ (s.created_ns >> (i % 8)));
	}
	s.uuid[6] = (uint8_t)((s.uuid[6] & 0x0f) | 0x40); /* RFC 4122 version 4 */
	s.uuid[8] = (uint8_t)((s.uuid[8] & 0x3f) | 0x80);
	if (o->label)
		snprintf(s.label, sizeof(s.label), "%s", o->label);
	kv_super_encode(&s, sb);
	k = (MDB_val){strlen(KV_SUPER_KEY), KV_SUPER_KEY};
	v = (MDB_val){sizeof(sb), sb};
	mrc = mdb_put(txn, dbi[KV_DB_META], &k, &v, 0);
	if (mrc)
		goto txn_abort;

	root.mode = 040000 | (o->root_mode & 07777);
	root.uid = o->root_uid;
	root.gid = o->root_gid;
	root.nlink = 2;
	root.atime_ns = root.mtime_ns = root.ctime_ns = root.btime_ns = s.created_ns;
	root.parent = KV_ROOT_INO;
	kv_inode_encode(&root, ib);
	kv_put_be64(key, KV_ROOT_INO);
	k = (MDB_val){8, key};
	v = (MDB_val){sizeof(ib), ib};
	mrc = mdb_put(txn, dbi[KV_DB_INODE], &k, &v, 0);
	if (mrc)
		goto txn_abort;
	mrc = mdb_txn_commit(txn);
	if (mrc)
		goto fail;
	return 0;

txn_abort:
	mdb_txn_abort(txn);
fail:
	kv_seterr(err, errlen, "cannot write the new filesystem: %s", mdb_strerror(mrc));
	return kv_err(NULL, mrc, NULL);
}

/* The new image's file, made here so a failure below can tell it is ours:
 * private to its owner (it holds every file of the filesystem), or with
 * the owner and mode of the image it replaces. The umask does not narrow
 * either: the mode is set, not asked for. */
static int mkfs_create(const char *path, const struct stat *old, char *err, size_t errlen)
{
	mode_t mode = old ? old->st_mode & 0777 : 0600;
	int fd, rc = 0;

	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		kv_seterr(err, errlen, "cannot create '%s': %s", path, strerror(-rc));
		return rc;
	}
	/* another owner's image: kept where allowed (root), else it is ours */
	if (old && (old->st_uid != geteuid() || old->st_gid != getegid()))
		(void)!fchown(fd, old->st_uid, old->st_gid);
	if (fchmod(fd, mode) != 0) {
		rc = -errno;
		kv_seterr(err, errlen, "cannot set the mode of '%s': %s", path, strerror(-rc));
		unlink(path);
	}
	close(fd);
	return rc;
}

/* Make way for a new image at path: nothing there, or an image to replace
 * (force), which is locked (*old_fd: held until the new file is made, so
 * nobody opens the old one read-write in between) and removed; *old then
 * holds what it was, and *replacing is 1. */
static int mkfs_clear_path(const char *path, int force, struct stat *old, int *replacing,
			   int *old_fd, char *err, size_t errlen)
{
	int rc;

	if (stat(path, old) != 0) {
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		kv_seterr(err, errlen, "'%s': %s", path, strerror(-rc));
		return rc;
	}
	if (!S_ISREG(old->st_mode)) {
		kv_seterr(err, errlen, "'%s' exists and is not a regular file", path);
		return -EEXIST;
	}
	if (!force) {
		kv_seterr(err, errlen, "'%s' exists (use -f to overwrite it)", path);
		return -EEXIST;
	}
	*old_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*old_fd >= 0) {
		rc = kv_image_lock(*old_fd, path, err, errlen);
		if (rc)
			return rc;
	}
	if (unlink(path) != 0) {
		rc = -errno;
		kv_seterr(err, errlen, "cannot remove '%s': %s", path, strerror(-rc));
		return rc;
	}
	*replacing = 1;
	return 0;
}

/* Write the new filesystem into the file mkfs_create made at path. */
static int mkfs_env(const char *path, const struct kv_mkfs_opts *o, uint32_t bs, char *err,
		    size_t errlen)
{
	MDB_env *menv = NULL;
	int mrc, rc;

	mrc = mdb_env_create(&menv);
	if (!mrc)
		mrc = mdb_env_set_maxdbs(menv, KV_NDB);
	if (!mrc)
		mrc = mdb_env_set_mapsize(menv, 1 << 20);
	if (!mrc)
		mrc = mdb_env_open(menv, path, MDB_NOSUBDIR, 0600);
	if (mrc) {
		kv_seterr(err, errlen, "cannot create '%s': %s", path, mdb_strerror(mrc));
		rc = kv_err(NULL, mrc, NULL);
	} else {
		rc = mkfs_write(menv, o, bs, err, errlen);
	}
	if (menv)
		mdb_env_close(menv);
	return rc;
}

int kv_mkfs(const char *path, const struct kv_mkfs_opts *o, char *err, size_t errlen)
{
	uint32_t bs = o->block_size ? o->block_size : KV_BLOCK_SIZE_DEFAULT;
	struct stat st;
	char *lpath = NULL;
	int rc, old_fd = -1, replacing = 0;

	if (bs < KV_BLOCK_SIZE_MIN || bs > KV_BLOCK_SIZE_MAX) {
		kv_seterr(err, errlen, "block size %u out of range (%u to %u)", bs,
		          KV_BLOCK_SIZE_MIN, KV_BLOCK_SIZE_MAX);
		return -EINVAL;
	}
	if (o->label && strlen(o->label) > KV_LABEL_MAX) {
		kv_seterr(err, errlen, "label longer than %d bytes", KV_LABEL_MAX);
		return -EINVAL;
	}
	rc = mkfs_clear_path(path, o->force, &st, &replacing, &old_fd, err, errlen);
	if (rc)
		goto close_old;
	lpath = lock_path(path);
	if (!lpath) {
		rc = -ENOMEM;
		goto close_old;
	}
	unlink(lpath);
	rc = mkfs_create(path, replacing ? &st : NULL, err, errlen);
	if (rc)
		goto out;
	rc = mkfs_env(path, o, bs, err, errlen);
	if (rc)
		unlink(path);
	unlink(lpath); /* holds no state; nobody else has the new image open */
out:
	free(lpath);
close_old:
	if (old_fd >= 0) {
		kv_image_unlock(old_fd);
		close(old_fd);
	}
	return rc;
}

/* ---------------------------------------------------------------- open -- */

/* The superblock, read in txn: a kvfs one of a version and features this
 * build knows. */
static int open_super(kv_env *e, MDB_txn *txn, char *err, size_t errlen)
{
	MDB_val k = {strlen(KV_SUPER_KEY), KV_SUPER_KEY}, v;
	int rc;

	if (mdb_get(txn, e->dbi[KV_DB_META], &k, &v) != 0) {
		kv_seterr(err, errlen, "'%s' is not a kvfs image (no superblock)", e->path);
		return -EINVAL;
	}
	rc = kv_super_decode(v.mv_data, v.mv_size, &e->super);
	if (rc == -EINVAL) {
		kv_seterr(err, errlen, "'%s' is not a kvfs image (bad magic)", e->path);
		return rc;
	}
	if (rc == -EPROTONOSUPPORT) {
		kv_seterr(err, errlen,
		          "'%s' has format version %u; this kvfs reads version %d (upgrade kvfs)",
		          e->path, e->super.version, KV_FORMAT_VERSION);
		return rc;
	}
	if (rc) {
		kv_seterr(err, errlen, "'%s': damaged superblock", e->path);
		return rc;
	}
	if ((e->super.feature_incompat & ~KV_FEATURE_INCOMPAT_KNOWN) ||
	    (!e->readonly && e->super.feature_ro_compat)) {
		kv_seterr(err, errlen, "'%s' uses features this kvfs does not know (incompat %#llx, "
			"ro_compat %#llx)%s", e->path, (unsigned long long)e->super.feature_incompat,
		       (unsigned long long)e->super.feature_ro_compat, e->super.feature_incompat ? ""
		       : "; it can be used read-only: mount it with -o ro, check it with fsck.kvfs -n");
		return -EPROTONOSUPPORT;
	}
	return 0;
}

/* A version 1 image opened read-write becomes version 2: the databases of
 * shared blocks are added (empty) and the superblock says so, in one
 * commit, with a word in the log. Read-only, a version 1 image reads them
 * as empty (e->missing_dbs). */
static int upgrade_v1(kv_env *e, char *err, size_t errlen)
{
	unsigned char sb[KV_SUPER_LEN];
	MDB_val k = {strlen(KV_SUPER_KEY), KV_SUPER_KEY}, v = {sizeof(sb), sb};
	MDB_txn *txn;
	int mrc;

	mrc = mdb_txn_begin(e->env, NULL, 0, &txn);
	for (int i = KV_DB_EXTENT; !mrc && i < KV_NDB; i++)
		mrc = mdb_dbi_open(txn, kv_db_names[i], MDB_CREATE, &e->dbi[i]);
	if (!mrc) {
		e->super.version = KV_FORMAT_VERSION;
		kv_super_encode(&e->super, sb);
		mrc = mdb_put(txn, e->dbi[KV_DB_META], &k, &v, 0);
	}
	if (!mrc) {
		mrc = mdb_txn_commit(txn);
	} else {
		mdb_txn_abort(txn);
	}
	if (mrc) {
		kv_seterr(err, errlen, "'%s': cannot upgrade format version 1 to %d: %s", e->path,
			  KV_FORMAT_VERSION, mdb_strerror(mrc));
		return kv_err(NULL, mrc, NULL);
	}
	e->missing_dbs = 0;
	kv_log("%s: upgraded from format version 1 to %d (adds shared blocks; a kvfs older "
	       "than this one no longer opens it)", e->path, KV_FORMAT_VERSION);
	return 0;
}

/* The named databases and the superblock. A database or superblock that is
 * not there is the image's fault (-EINVAL, -EIO), whatever LMDB's code. */
static int open_dbs(kv_env *e, char *err, size_t errlen)
{
	MDB_txn *txn;
	int mrc, rc;

	mrc = mdb_txn_begin(e->env, NULL, MDB_RDONLY, &txn);
	if (mrc) {
		kv_seterr(err, errlen, "'%s': %s", e->path, mdb_strerror(mrc));
		return kv_err(NULL, mrc, NULL);
	}
	if (mdb_dbi_open(txn, kv_db_names[KV_DB_META], 0, &e->dbi[KV_DB_META]) != 0) {
		kv_seterr(err, errlen,
		          "'%s' is not a kvfs image (an LMDB file without kvfs databases)",
		          e->path);
		rc = -EINVAL;
		goto txn_abort;
	}
	rc = open_super(e, txn, err, errlen);
	if (rc)
		goto txn_abort;
	for (int i = KV_DB_META + 1; i < KV_NDB; i++) {
		if (mdb_dbi_open(txn, kv_db_names[i], 0, &e->dbi[i]) == 0)
			continue;
		if (e->super.version < 2 && i >= KV_DB_EXTENT) {
			e->missing_dbs |= 1u << i; /* version 2's: upgrade_v1 adds them */
			continue;
		}
		kv_seterr(err, errlen, "'%s': damaged image (database '%s' missing)",
		          e->path, kv_db_names[i]);
		rc = -EIO;
		goto txn_abort;
	}
	atomic_store(&e->features, e->super.feature_incompat);
	{
		uint64_t n;

		if (kv_unwritten_read(e, txn, &n) == -EIO)
			kv_log("%s: damaged count of unwritten blocks (fsck.kvfs sets it right)",
			       e->path);
		atomic_store(&e->unwritten, n);
	}
	mrc = mdb_txn_commit(txn);
	if (mrc) {
		kv_seterr(err, errlen, "'%s': %s", e->path, mdb_strerror(mrc));
		return kv_err(NULL, mrc, NULL);
	}
	return e->missing_dbs && !e->readonly ? upgrade_v1(e, err, errlen) : 0;

txn_abort:
	mdb_txn_abort(txn);
	return rc;
}

static int check_file(kv_env *e, int fd, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		kv_seterr(err, errlen, "'%s' is not a regular file", e->path);
		return -EINVAL;
	}
	if (st.st_size == 0) {
		kv_seterr(err, errlen, "'%s' is empty, not a kvfs image", e->path);
		return -EINVAL;
	}
	if (st.st_size < 2 * 4096) {
		kv_seterr(err, errlen, "'%s' is too small to be a kvfs image", e->path);
		return -EINVAL;
	}
	return 0;
}

/* The lock file LMDB makes beside the image: no more open than the image. */
static mode_t image_mode(kv_env *e)
{
	struct stat st;

	return fstat(e->lock_fd, &st) == 0 ? st.st_mode & 0666 : 0600;
}

/* A new LMDB environment for e with a map of map bytes; an LMDB code. */
static int env_create(kv_env *e, uint64_t map)
{
	int mrc = mdb_env_create(&e->env);

	if (!mrc)
		mrc = mdb_env_set_maxdbs(e->env, KV_NDB);
	if (!mrc)
		mrc = mdb_env_set_maxreaders(e->env, KV_MAXREADERS);
	if (!mrc)
		mrc = mdb_env_set_mapsize(e->env, map);
	return mrc;
}

static int env_open_lmdb(kv_env *e, uint64_t file_size, char *err, size_t errlen)
{
	unsigned flags = MDB_NOSUBDIR | MDB_NOTLS;
	uint64_t map = file_size * 2;
	int mrc;

	if (map < KV_MAP_INITIAL)
		map = KV_MAP_INITIAL;
	if (e->max_size && map > e->max_size)
		map = e->max_size;
	if (map < file_size)
		map = file_size;
	map = (map + 4095) & ~4095ULL;
	if (e->readonly)
		flags |= MDB_RDONLY;
	else if (e->durability == KV_DURABLE_NORMAL)
		flags |= MDB_NOMETASYNC;
	else if (e->durability == KV_DURABLE_NONE)
		flags |= MDB_NOSYNC;

	mrc = env_create(e, map);
	if (!mrc)
		mrc = mdb_env_open(e->env, e->path, flags, image_mode(e));
	if (e->readonly && (mrc == EACCES || mrc == EROFS)) {
		/* no lock file can be made beside a read-only image; nobody can be
		 * writing it either */
		mdb_env_close(e->env);
		e->env = NULL;
		mrc = env_create(e, map);
		if (!mrc)
			mrc = mdb_env_open(e->env, e->path, flags | MDB_NOLOCK, image_mode(e));
	}
	if (!mrc)
		return 0;
	if (mrc == MDB_INVALID)
		kv_seterr(err, errlen, "'%s' is not a kvfs image", e->path);
	else if (mrc == MDB_VERSION_MISMATCH)
		kv_seterr(err, errlen, "'%s': LMDB version mismatch", e->path);
	else
		kv_seterr(err, errlen, "'%s': %s", e->path, mdb_strerror(mrc));
	return kv_err(NULL, mrc, NULL);
}

static void reader_free(void *p);

/* Open the image's file (e->lock_fd), check that it can be one, and take
 * its lock for a read-write open (invariant 2). */
static int open_file(kv_env *e, char *err, size_t errlen)
{
	int rc;

	e->lock_fd = open(e->path, (e->readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (e->lock_fd < 0) {
		rc = -errno;
		kv_seterr(err, errlen, "cannot open '%s': %s", e->path, strerror(-rc));
		return rc;
	}
	rc = check_file(e, e->lock_fd, err, errlen);
	if (rc || e->readonly)
		return rc;
	rc = kv_image_lock(e->lock_fd, e->path, err, errlen);
	if (rc && rc != -EBUSY)
		kv_seterr(err, errlen, "cannot lock '%s': %s", e->path, strerror(-rc));
	return rc;
}

/* The LMDB environment of the open file, checked (invariant 1): a refusal
 * closes it again and removes the lock file LMDB made for it. */
static int open_lmdb(kv_env *e, char *err, size_t errlen)
{
	struct stat st;
	char *lpath = lock_path(e->path);
	int lock_existed, rc;

	if (!lpath)
		return -ENOMEM;
	fstat(e->lock_fd, &st);
	lock_existed = access(lpath, F_OK) == 0;
	rc = env_open_lmdb(e, (uint64_t)st.st_size, err, errlen);
	if (!rc)
		rc = kv_tail_check(e, e->lock_fd, err, errlen);
	if (!rc)
		rc = open_dbs(e, err, errlen);
	if (rc) {
		if (e->env)
			mdb_env_close(e->env);
		e->env = NULL;
		if (!lock_existed)
			unlink(lpath);
	}
	free(lpath);
	return rc;
}

static void init_locks(kv_env *e)
{
	pthread_rwlockattr_t a;

	pthread_key_create(&e->tls, reader_free);
	pthread_mutex_init(&e->readers_lock, NULL);
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&e->map_lock, &a);
	pthread_rwlockattr_destroy(&a);
}

int kv_open(const char *path, const struct kv_open_opts *o, kv_env **out, char *err,
	    size_t errlen)
{
	static const struct kv_open_opts defaults;
	kv_env *e;
	int rc;

	if (!o)
		o = &defaults;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->lock_fd = -1;
	e->readonly = o->readonly;
	e->durability = o->durability;
	e->max_size = o->max_size & ~4095ULL;
	e->sync_interval_ms = o->sync_interval_ms;
	if (!e->readonly && e->durability != KV_DURABLE_FULL)
		e->window_ms = o->window_ms;
	e->path = strdup(path);
	rc = e->path ? open_file(e, err, errlen) : -ENOMEM;
	if (!rc)
		rc = open_lmdb(e, err, errlen);
	if (rc)
		goto free_env;

	e->next_ino = e->super.next_ino;
	init_locks(e);
	if (!e->readonly) {
		rc = kv_writer_start(e);
		if (rc) {
			kv_seterr(err, errlen, "cannot start the writer: %s", strerror(-rc));
			kv_close(e);
			return rc;
		}
	}
	*out = e;
	return 0;

free_env:
	if (e->lock_fd >= 0) {
		kv_image_unlock(e->lock_fd);
		close(e->lock_fd);
	}
	free(e->path);
	free(e);
	return rc;
}

void kv_close(kv_env *e)
{
	if (!e)
		return;
	if (e->writer_running)
		kv_writer_stop(e);
	pthread_key_delete(e->tls);
	pthread_mutex_lock(&e->readers_lock);
	while (e->readers) {
		struct kv_reader *r = e->readers;
		e->readers = r->next;
		kv_txn_close_cursors(&r->t);
		if (r->t.txn)
			mdb_txn_abort(r->t.txn);
		kv_z_free(&r->z);
		free(r);
	}
	pthread_mutex_unlock(&e->readers_lock);
	kv_z_free(&e->wz);
	mdb_env_close(e->env);
	pthread_rwlock_destroy(&e->map_lock);
	pthread_mutex_destroy(&e->readers_lock);
	kv_image_unlock(e->lock_fd);
	close(e->lock_fd);
	free(e->path);
	free(e);
}

void kv_super_get(kv_env *e, struct kv_super *out)
{
	*out = e->super;
}

uint32_t kv_block_size(kv_env *e)
{
	return e->super.block_size;
}

int kv_is_readonly(kv_env *e)
{
	return e->readonly;
}

int kv_sync(kv_env *e)
{
	/* KV_DURABLE_FULL: every commit was durable before it was answered
	 * (data synced, then the meta page written O_DSYNC), so there is
	 * nothing left to sync; a forced sync would still cost a flush of the
	 * disk's cache per fsync(2) (bench: random write + fsync). */
	if (e->readonly || e->durability == KV_DURABLE_FULL)
		return 0;
	if (e->window_ms) /* the window's commit, then its sync (window.c) */
		return kv_write(e, kv_apply_nothing, NULL, KV_OP_SYNC);
	return kv_err(NULL, mdb_env_sync(e->env, 1), "sync");
}

int kv_usage_get(kv_env *e, struct kv_usage *u)
{
	static const enum kv_db counted[] = {KV_DB_INODE, KV_DB_DATA, KV_DB_DIRENT, KV_DB_XATTR,
					     KV_DB_ORPHAN};
	uint64_t *dst[] = {&u->inodes, &u->blocks, &u->dirents, &u->xattrs, &u->orphans};
	struct kv_room room;
	MDB_envinfo info;
	struct stat st;
	kv_txn *t;
	int rc;

	memset(u, 0, sizeof(*u));
	rc = kv_read_begin(e, &t);
	if (rc)
		return rc;
	for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++) {
		rc = kv_db_count(t, counted[i], dst[i]);
		if (rc)
			goto read_end;
	}
	if (kv_unwritten_read(e, t->txn, &u->unwritten) == -EIO)
		u->unwritten = 0; /* damaged: fsck says so */
	mdb_env_info(e->env, &info);
	u->map_bytes = info.me_mapsize;
	u->used_bytes = ((uint64_t)info.me_last_pgno + 1) * e->page_size;
	u->extent_bytes = u->used_bytes;
	{
		/* pages on LMDB's freelist (database 0) are free for reuse */
		const unsigned char *ids;
		MDB_cursor *c;
		MDB_val k, v;
		uint64_t free_pages = 0;
		long cnt;

		if (mdb_cursor_open(t->txn, 0, &c) == 0) {
			while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0)
				if ((cnt = kv_freelist_record(&v, &ids)) > 0)
					free_pages += (uint64_t)cnt;
			mdb_cursor_close(c);
		}
		if (free_pages * e->page_size < u->used_bytes)
			u->used_bytes -= free_pages * e->page_size;
	}
read_end:
	kv_read_end(t);
	u->max_bytes = e->max_size;
	u->page_size = e->page_size;
	if (fstat(e->lock_fd, &st) == 0) {
		u->file_bytes = (uint64_t)st.st_size;
		u->ahead_bytes = kv_bytes_past_end(&st);
	}
	kv_room_measure(e, &room);
	u->reserve_bytes = room.reserve;
	u->avail_bytes = room.use_max > u->used_bytes ? room.use_max - u->used_bytes : 0;
	u->promised_bytes = room.promised;
	return rc;
}

int kv_map_resize(kv_env *e, uint64_t bytes)
{
	int mrc;

	/* invariant 4: a txn of our own would deadlock here or be moved away */
	assert(!kv_reading(e) && !(kv_role_mine(e) && (e->w_txn || e->win)));
	pthread_rwlock_wrlock(&e->map_lock);
	mrc = mdb_env_set_mapsize(e->env, bytes);
	pthread_rwlock_unlock(&e->map_lock);
	return kv_err(NULL, mrc, bytes ? "resize map" : "adopt map size");
}

int kv_disk_full(kv_env *e)
{
	struct statvfs sv;

	if (fstatvfs(e->lock_fd, &sv) != 0)
		return 0;
	if ((uint64_t)sv.f_bavail * sv.f_frsize >= 1024 * 1024)
		return 0;
	kv_log("%s: the filesystem holding the image is full", e->path);
	return 1;
}

/* ------------------------------------------------------- read txns -- */

static void reader_free(void *p)
{
	struct kv_reader *r = p;
	kv_env *e = r->t.env;

	pthread_mutex_lock(&e->readers_lock);
	if (r->prev)
		r->prev->next = r->next;
	else
		e->readers = r->next;
	if (r->next)
		r->next->prev = r->prev;
	pthread_mutex_unlock(&e->readers_lock);
	kv_txn_close_cursors(&r->t);
	if (r->t.txn)
		mdb_txn_abort(r->t.txn);
	kv_z_free(&r->z);
	free(r);
}

static struct kv_reader *reader_get(kv_env *e)
{
	struct kv_reader *r = pthread_getspecific(e->tls);

	if (r)
		return r;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->t.env = e;
	pthread_mutex_lock(&e->readers_lock);
	r->next = e->readers;
	if (r->next)
		r->next->prev = r;
	e->readers = r;
	pthread_mutex_unlock(&e->readers_lock);
	pthread_setspecific(e->tls, r);
	return r;
}

static int read_begin(kv_env *e, kv_txn **out)
{
	struct kv_reader *r = reader_get(e);
	int mrc, rc;

	if (!r)
		return -ENOMEM;
	assert(!r->active);
	for (;;) {
		pthread_rwlock_rdlock(&e->map_lock);
		if (r->t.txn)
			mrc = mdb_txn_renew(r->t.txn);
		else
			mrc = mdb_txn_begin(e->env, NULL, MDB_RDONLY, &r->t.txn);
		if (mrc != MDB_MAP_RESIZED)
			break;
		/* another process grew the map: adopt its size */
		pthread_rwlock_unlock(&e->map_lock);
		if (r->t.txn)
			mdb_txn_abort(r->t.txn);
		r->t.txn = NULL;
		rc = kv_map_resize(e, 0);
		if (rc)
			return rc;
	}
	if (mrc) {
		pthread_rwlock_unlock(&e->map_lock);
		if (r->t.txn && mrc != MDB_READERS_FULL) {
			mdb_txn_abort(r->t.txn);
			r->t.txn = NULL;
		}
		return kv_err(NULL, mrc, "begin read");
	}
	r->t.cur_stale = (1u << KV_NDB) - 1;
	r->active = 1;
	*out = &r->t;
	return 0;
}

int kv_read_begin(kv_env *e, kv_txn **out)
{
	/* window.c invariant 3: the count of commits as of before the snapshot */
	uint64_t gen = atomic_load_explicit(&e->win_gen, memory_order_acquire);
	int rc = read_begin(e, out);

	if (rc == 0)
		(*out)->gen = gen;
	return rc;
}

int kv_reader_on(kv_env *e, MDB_txn *w, kv_txn **out)
{
	struct kv_reader *r = reader_get(e);

	if (!r)
		return -ENOMEM; /* the role is the caller's to let go */
	assert(!r->active);
	r->t.snap = r->t.txn;
	r->t.txn = w;
	r->t.in_window = 1;
	r->active = 1;
	*out = &r->t;
	return 0;
}

void kv_read_end(kv_txn *t)
{
	struct kv_reader *r = (struct kv_reader *)t;
	int in_window = t->in_window;

	assert(!t->write && kv_txn_mine(t));
	if (in_window == 1) { /* the window, read with the role held */
		t->txn = t->snap;
		r->active = 0;
		kv_win_leave(t);
		return;
	}
	mdb_txn_reset(t->txn);
	r->active = 0;
	pthread_rwlock_unlock(&t->env->map_lock);
	if (in_window)
		kv_win_leave(t);
}

#ifndef NDEBUG
int kv_reading(kv_env *e)
{
	struct kv_reader *r = pthread_getspecific(e->tls);

	return r && r->active;
}

int kv_txn_mine(const kv_txn *t)
{
	if (t->write)
		return kv_role_mine(t->env);
	return pthread_getspecific(t->env->tls) == t && ((const struct kv_reader *)t)->active;
}
#endif

MDB_cursor *kv_cursor(kv_txn *t, enum kv_db db, int *rc)
{
	MDB_cursor *c = t->cur[db];

	assert(kv_txn_mine(t));
	*rc = 0;
	if (t->in_window == 1) { /* cursors on the window, closed with it */
		if (!t->wcur[db])
			*rc = kv_err(t, mdb_cursor_open(t->txn, t->env->dbi[db], &t->wcur[db]),
				     "open cursor");
		return t->wcur[db];
	}
	if (c && (t->cur_stale & (1u << db))) {
		*rc = kv_err(t, mdb_cursor_renew(t->txn, c), "renew cursor");
		if (*rc)
			return NULL;
	} else if (!c) {
		*rc = kv_err(t, mdb_cursor_open(t->txn, t->env->dbi[db], &c), "open cursor");
		if (*rc)
			return NULL;
		t->cur[db] = c;
	}
	t->cur_stale &= ~(1u << db);
	return c;
}

void kv_txn_close_cursors(kv_txn *t)
{
	for (int i = 0; i < KV_NDB; i++) {
		if (t->cur[i])
			mdb_cursor_close(t->cur[i]);
		t->cur[i] = NULL;
	}
}
