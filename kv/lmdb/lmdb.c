/*
 * lmdb.c - the LMDB engine: the records in one image file, eight named
 * databases of an LMDB environment (engine.h).
 *
 * Invariants:
 *  1. An image is trusted only after every check passed: a regular,
 *     non-empty file, an LMDB environment whose pages past the file's end,
 *     if any, are all free (tail.c), and the named databases (a version 1
 *     image lacks those of shared blocks: see upgrade). A refused open
 *     leaves the file as it was (a lock file it made is removed again).
 *  2. A read-write open holds flock(LOCK_EX) on the image for its lifetime
 *     (lock.c). create makes the image 0600 (or keeps the mode of the one it
 *     replaces) and LMDB's lock file is no more open than the image.
 *  3. A read transaction holds env->map_lock shared from read_begin to
 *     read_end; the map is resized only with it held exclusive
 *     (kv_map_resize), by a thread that holds no transaction.
 *  4. The engine's codes are LMDB's: KV_E* and the cursor operations and
 *     flags of engine.h have LMDB's values (checked below), so a call's
 *     result passes through as it is, and kv_val is an MDB_val.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lmdb_int.h"

_Static_assert(KV_ENOTFOUND == MDB_NOTFOUND && KV_EKEYEXIST == MDB_KEYEXIST &&
		       KV_EMAP_FULL == MDB_MAP_FULL && KV_ETXN_FULL == MDB_TXN_FULL &&
		       KV_EREADERS_FULL == MDB_READERS_FULL && KV_EINVAL == MDB_INVALID &&
		       KV_EVERSION == MDB_VERSION_MISMATCH && KV_EMAP_RESIZED == MDB_MAP_RESIZED,
	       "engine codes are LMDB's");
_Static_assert((int)KV_FIRST == MDB_FIRST && (int)KV_GET_CURRENT == MDB_GET_CURRENT &&
		       (int)KV_LAST == MDB_LAST && (int)KV_NEXT == MDB_NEXT &&
		       (int)KV_PREV == MDB_PREV && (int)KV_SET_KEY == MDB_SET_KEY &&
		       (int)KV_SET_RANGE == MDB_SET_RANGE,
	       "cursor operations are LMDB's");
_Static_assert(KV_PUT_NOOVERWRITE == MDB_NOOVERWRITE && KV_PUT_RESERVE == MDB_RESERVE &&
		       KV_TXN_RDONLY == MDB_RDONLY,
	       "flags are LMDB's");
_Static_assert(sizeof(kv_val) == sizeof(MDB_val) &&
		       offsetof(kv_val, size) == offsetof(MDB_val, mv_size) &&
		       offsetof(kv_val, data) == offsetof(MDB_val, mv_data),
	       "a kv_val is an MDB_val");

#define KV_MAP_INITIAL (64ULL << 20)
#define KV_MAXREADERS 512

#define MV(v) ((MDB_val *)(v))

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

/* LMDB's words for a code of its own (MDB_CORRUPTED, ...): the KV_E* codes
 * have kvfs's (kv_strerror). */
static const char *lmdb_strerror(int code)
{
	return mdb_strerror(code);
}

/* -------------------------------------------------------------- create -- */

/* The new image's file, made here so a failure below can tell it is ours:
 * private to its owner (it holds every file of the filesystem), or with
 * the owner and mode of the image it replaces. The umask does not narrow
 * either: the mode is set, not asked for. */
static int create_file(const char *path, const struct stat *old, char *err, size_t errlen)
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
static int clear_path(const char *path, int force, struct stat *old, int *replacing, int *old_fd,
		      char *err, size_t errlen)
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

/* The databases and init's records, in the file create_file made. */
static int create_env(kv_env *e, int (*init)(kv_env *e, kv_etxn *x, void *arg), void *arg,
		      char *err, size_t errlen)
{
	struct kv_lmdb *l = kv_lmdb(e);
	MDB_txn *txn = NULL;
	int mrc, rc;

	mrc = mdb_env_create(&l->env);
	if (!mrc)
		mrc = mdb_env_set_maxdbs(l->env, KV_NDB);
	if (!mrc)
		mrc = mdb_env_set_mapsize(l->env, 1 << 20);
	if (!mrc)
		mrc = mdb_env_open(l->env, e->path, MDB_NOSUBDIR, 0600);
	if (mrc) {
		kv_seterr(err, errlen, "cannot create '%s': %s", e->path, mdb_strerror(mrc));
		goto out;
	}
	mrc = mdb_txn_begin(l->env, NULL, 0, &txn);
	for (int i = 0; !mrc && i < KV_NDB; i++)
		mrc = mdb_dbi_open(txn, kv_db_names[i], MDB_CREATE, &l->dbi[i]);
	if (!mrc) {
		rc = init(e, (kv_etxn *)txn, arg);
		if (rc) {
			mdb_txn_abort(txn);
			kv_seterr(err, errlen, "cannot write the new filesystem: %s",
				  strerror(-rc));
			mdb_env_close(l->env);
			return rc;
		}
		mrc = mdb_txn_commit(txn);
	} else if (txn) {
		mdb_txn_abort(txn);
	}
	if (mrc)
		kv_seterr(err, errlen, "cannot write the new filesystem: %s", mdb_strerror(mrc));
out:
	if (l->env)
		mdb_env_close(l->env);
	l->env = NULL;
	return kv_err(NULL, mrc, NULL);
}

static int lmdb_create(kv_env *e, int force, int (*init)(kv_env *e, kv_etxn *x, void *arg),
		       void *arg, char *err, size_t errlen)
{
	struct kv_lmdb l = {0};
	struct stat st;
	char *lpath = NULL;
	int rc, old_fd = -1, replacing = 0;

	rc = clear_path(e->path, force, &st, &replacing, &old_fd, err, errlen);
	if (rc)
		goto close_old;
	lpath = lock_path(e->path);
	if (!lpath) {
		rc = -ENOMEM;
		goto close_old;
	}
	unlink(lpath);
	rc = create_file(e->path, replacing ? &st : NULL, err, errlen);
	if (rc)
		goto out;
	e->eng_priv = &l;
	rc = create_env(e, init, arg, err, errlen);
	e->eng_priv = NULL;
	if (rc)
		unlink(e->path);
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
static int env_create(struct kv_lmdb *l, uint64_t map)
{
	int mrc = mdb_env_create(&l->env);

	if (!mrc)
		mrc = mdb_env_set_maxdbs(l->env, KV_NDB);
	if (!mrc)
		mrc = mdb_env_set_maxreaders(l->env, KV_MAXREADERS);
	if (!mrc)
		mrc = mdb_env_set_mapsize(l->env, map);
	return mrc;
}

static int env_open(kv_env *e, uint64_t file_size, char *err, size_t errlen)
{
	struct kv_lmdb *l = kv_lmdb(e);
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

	mrc = env_create(l, map);
	if (!mrc)
		mrc = mdb_env_open(l->env, e->path, flags, image_mode(e));
	if (e->readonly && (mrc == EACCES || mrc == EROFS)) {
		/* no lock file can be made beside a read-only image; nobody can be
		 * writing it either */
		mdb_env_close(l->env);
		l->env = NULL;
		mrc = env_create(l, map);
		if (!mrc)
			mrc = mdb_env_open(l->env, e->path, flags | MDB_NOLOCK, image_mode(e));
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

/* A version 1 image (no databases of shared blocks) opened read-write
 * becomes version 2: the databases are added (empty) and the superblock
 * says so, in one commit, with a word in the log. Read-only, a version 1
 * image reads them as empty (e->missing_dbs). */
static int upgrade_v1(kv_env *e, char *err, size_t errlen)
{
	struct kv_lmdb *l = kv_lmdb(e);
	unsigned char sb[KV_SUPER_LEN];
	MDB_val k = {strlen(KV_SUPER_KEY), KV_SUPER_KEY}, v;
	struct kv_super s;
	MDB_txn *txn;
	int mrc;

	mrc = mdb_txn_begin(l->env, NULL, 0, &txn);
	if (mrc)
		goto fail;
	mrc = mdb_get(txn, l->dbi[KV_DB_META], &k, &v);
	if (mrc || kv_super_decode(v.mv_data, v.mv_size, &s) != 0) {
		mdb_txn_abort(txn);
		return 0; /* the record layer says what is wrong with it */
	}
	if (s.version >= 2) {
		mdb_txn_abort(txn);
		return 0; /* a database missing: the record layer refuses it */
	}
	for (int i = KV_DB_EXTENT; !mrc && i < KV_NDB; i++)
		mrc = mdb_dbi_open(txn, kv_db_names[i], MDB_CREATE, &l->dbi[i]);
	if (!mrc) {
		s.version = KV_FORMAT_VERSION;
		kv_super_encode(&s, sb);
		v = (MDB_val){sizeof(sb), sb};
		mrc = mdb_put(txn, l->dbi[KV_DB_META], &k, &v, 0);
	}
	if (!mrc)
		mrc = mdb_txn_commit(txn);
	else
		mdb_txn_abort(txn);
	if (mrc)
		goto fail;
	e->missing_dbs = 0;
	kv_log("%s: upgraded from format version 1 to %d (adds shared blocks; a kvfs older "
	       "than this one no longer opens it)", e->path, KV_FORMAT_VERSION);
	return 0;
fail:
	kv_seterr(err, errlen, "'%s': cannot upgrade format version 1 to %d: %s", e->path,
		  KV_FORMAT_VERSION, mdb_strerror(mrc));
	return kv_err(NULL, mrc, NULL);
}

/* The named databases: those missing are e->missing_dbs (the record layer
 * decides whether the superblock's version allows it). */
static int open_dbs(kv_env *e, char *err, size_t errlen)
{
	struct kv_lmdb *l = kv_lmdb(e);
	MDB_txn *txn;
	int mrc;

	mrc = mdb_txn_begin(l->env, NULL, MDB_RDONLY, &txn);
	if (mrc) {
		kv_seterr(err, errlen, "'%s': %s", e->path, mdb_strerror(mrc));
		return kv_err(NULL, mrc, NULL);
	}
	if (mdb_dbi_open(txn, kv_db_names[KV_DB_META], 0, &l->dbi[KV_DB_META]) != 0) {
		kv_seterr(err, errlen,
		          "'%s' is not a kvfs image (an LMDB file without kvfs databases)",
		          e->path);
		mdb_txn_abort(txn);
		return -EINVAL;
	}
	for (int i = KV_DB_META + 1; i < KV_NDB; i++)
		if (mdb_dbi_open(txn, kv_db_names[i], 0, &l->dbi[i]) != 0)
			e->missing_dbs |= 1u << i;
	mrc = mdb_txn_commit(txn);
	if (mrc) {
		kv_seterr(err, errlen, "'%s': %s", e->path, mdb_strerror(mrc));
		return kv_err(NULL, mrc, NULL);
	}
	return e->missing_dbs && !e->readonly ? upgrade_v1(e, err, errlen) : 0;
}

/* The LMDB environment of the open file, checked (invariant 1): a refusal
 * closes it again and removes the lock file LMDB made for it. */
static int open_env(kv_env *e, char *err, size_t errlen)
{
	struct kv_lmdb *l = kv_lmdb(e);
	struct stat st;
	char *lpath = lock_path(e->path);
	int lock_existed, rc;

	if (!lpath)
		return -ENOMEM;
	fstat(e->lock_fd, &st);
	lock_existed = access(lpath, F_OK) == 0;
	rc = env_open(e, (uint64_t)st.st_size, err, errlen);
	if (!rc)
		rc = kv_tail_check(e, e->lock_fd, err, errlen);
	if (!rc)
		rc = open_dbs(e, err, errlen);
	if (rc) {
		if (l->env)
			mdb_env_close(l->env);
		l->env = NULL;
		if (!lock_existed)
			unlink(lpath);
	}
	free(lpath);
	return rc;
}

static int lmdb_open(kv_env *e, char *err, size_t errlen)
{
	int rc;

	e->eng_priv = calloc(1, sizeof(struct kv_lmdb));
	if (!e->eng_priv)
		return -ENOMEM;
	rc = open_file(e, err, errlen);
	if (!rc)
		rc = open_env(e, err, errlen);
	if (rc) {
		if (e->lock_fd >= 0) {
			kv_image_unlock(e->lock_fd);
			close(e->lock_fd);
			e->lock_fd = -1;
		}
		free(e->eng_priv);
		e->eng_priv = NULL;
	}
	return rc;
}

static void lmdb_close(kv_env *e)
{
	struct kv_lmdb *l = kv_lmdb(e);

	if (!l)
		return;
	mdb_env_close(l->env);
	kv_image_unlock(e->lock_fd);
	close(e->lock_fd);
	e->lock_fd = -1;
	free(l);
	e->eng_priv = NULL;
}

int kv_map_resize(kv_env *e, uint64_t bytes)
{
	int mrc;

	/* invariant 3: a txn of our own would deadlock here or be moved away */
	assert(!kv_reading(e) && !(kv_role_mine(e) && (e->w.txn || e->win.txn)));
	pthread_rwlock_wrlock(&e->map_lock);
	mrc = mdb_env_set_mapsize(kv_lmdb(e)->env, bytes);
	pthread_rwlock_unlock(&e->map_lock);
	return kv_err(NULL, mrc, bytes ? "resize map" : "adopt map size");
}

/* -------------------------------------------------------- transactions -- */

static int lmdb_txn_begin(kv_env *e, kv_etxn *parent, unsigned flags, kv_etxn **out)
{
	return mdb_txn_begin(kv_lmdb(e)->env, kv_mtxn(parent), flags & KV_TXN_RDONLY,
			     (MDB_txn **)out);
}

static int lmdb_txn_commit(kv_env *e, kv_etxn *x)
{
	(void)e;
	return mdb_txn_commit(kv_mtxn(x));
}

static void lmdb_txn_abort(kv_env *e, kv_etxn *x)
{
	(void)e;
	mdb_txn_abort(kv_mtxn(x));
}

static int lmdb_read_begin(kv_env *e, kv_etxn **x)
{
	MDB_txn **txn = (MDB_txn **)x;
	int mrc, rc;

	for (;;) {
		pthread_rwlock_rdlock(&e->map_lock);
		if (*txn)
			mrc = mdb_txn_renew(*txn);
		else
			mrc = mdb_txn_begin(kv_lmdb(e)->env, NULL, MDB_RDONLY, txn);
		if (mrc != MDB_MAP_RESIZED)
			break;
		/* another process grew the map: adopt its size */
		pthread_rwlock_unlock(&e->map_lock);
		if (*txn)
			mdb_txn_abort(*txn);
		*txn = NULL;
		rc = kv_map_resize(e, 0);
		if (rc)
			return rc;
	}
	if (mrc) {
		pthread_rwlock_unlock(&e->map_lock);
		if (*txn && mrc != MDB_READERS_FULL) {
			mdb_txn_abort(*txn);
			*txn = NULL;
		}
	}
	return mrc;
}

static void lmdb_read_end(kv_env *e, kv_etxn *x)
{
	mdb_txn_reset(kv_mtxn(x));
	pthread_rwlock_unlock(&e->map_lock);
}

static void lmdb_read_free(kv_env *e, kv_etxn *x)
{
	(void)e;
	mdb_txn_abort(kv_mtxn(x));
}

/* ------------------------------------------------------------- records -- */

static int lmdb_get(kv_env *e, kv_etxn *x, enum kv_db db, const kv_val *k, kv_val *v)
{
	return mdb_get(kv_mtxn(x), kv_lmdb(e)->dbi[db], MV(k), MV(v));
}

/* A get here is a walk down the map, no wait to share with others: an
 * op's hints cost the call and nothing more. */
static void lmdb_prefetch(kv_env *e, kv_etxn *x, enum kv_db db, const kv_val *k)
{
	(void)e;
	(void)x;
	(void)db;
	(void)k;
}

static int lmdb_put(kv_env *e, kv_etxn *x, enum kv_db db, const kv_val *k, kv_val *v,
		    unsigned flags)
{
	return mdb_put(kv_mtxn(x), kv_lmdb(e)->dbi[db], MV(k), MV(v), flags);
}

static int lmdb_del(kv_env *e, kv_etxn *x, enum kv_db db, const kv_val *k)
{
	return mdb_del(kv_mtxn(x), kv_lmdb(e)->dbi[db], MV(k), NULL);
}

static int lmdb_count(kv_env *e, kv_etxn *x, enum kv_db db, uint64_t *n)
{
	MDB_stat ms;
	int mrc = mdb_stat(kv_mtxn(x), kv_lmdb(e)->dbi[db], &ms);

	*n = mrc ? 0 : ms.ms_entries;
	return mrc;
}

static int lmdb_cur_open(kv_env *e, kv_etxn *x, enum kv_db db, kv_ecur **out)
{
	return mdb_cursor_open(kv_mtxn(x), kv_lmdb(e)->dbi[db], (MDB_cursor **)out);
}

static int lmdb_cur_renew(kv_env *e, kv_etxn *x, kv_ecur *c)
{
	(void)e;
	return mdb_cursor_renew(kv_mtxn(x), (MDB_cursor *)c);
}

static void lmdb_cur_close(kv_env *e, kv_ecur *c)
{
	(void)e;
	mdb_cursor_close((MDB_cursor *)c);
}

static int lmdb_cur_get(kv_env *e, kv_ecur *c, kv_val *k, kv_val *v, enum kv_cop op)
{
	(void)e;
	return mdb_cursor_get((MDB_cursor *)c, MV(k), MV(v), (MDB_cursor_op)op);
}

static int lmdb_cur_del(kv_env *e, kv_ecur *c)
{
	(void)e;
	return mdb_cursor_del((MDB_cursor *)c, 0);
}

static void lmdb_cur_forget(kv_env *e, kv_ecur *c)
{
	(void)e;
	(void)c; /* values point into the map: nothing is held for them */
}

/* ------------------------------------------------------- store as a whole -- */

static int lmdb_sync(kv_env *e)
{
	return mdb_env_sync(kv_lmdb(e)->env, 1);
}

static int lmdb_usage(kv_env *e, struct kv_usage *u)
{
	struct kv_room room;
	MDB_envinfo info;
	MDB_cursor *c;
	MDB_val k, v;
	struct stat st;
	kv_etxn *x = NULL;
	uint64_t free_pages = 0;
	int mrc;

	mrc = lmdb_read_begin(e, &x);
	if (mrc)
		return mrc;
	mdb_env_info(kv_lmdb(e)->env, &info);
	u->map_bytes = info.me_mapsize;
	u->used_bytes = ((uint64_t)info.me_last_pgno + 1) * e->page_size;
	u->extent_bytes = u->used_bytes;
	/* pages on LMDB's freelist (database 0) are free for reuse */
	if (mdb_cursor_open(kv_mtxn(x), 0, &c) == 0) {
		const unsigned char *ids;
		long cnt;

		while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0)
			if ((cnt = kv_freelist_record((kv_val *)&v, &ids)) > 0)
				free_pages += (uint64_t)cnt;
		mdb_cursor_close(c);
	}
	lmdb_read_end(e, x);
	lmdb_read_free(e, x);
	if (free_pages * e->page_size < u->used_bytes)
		u->used_bytes -= free_pages * e->page_size;
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
	return 0;
}

/* The hot backup: a compacted, consistent copy taken while the image is
 * mounted and in use (kvfs-dump backup). The copy comes from one read
 * transaction inside LMDB, so it holds one commit's state whatever the
 * writer does meanwhile; a failed backup leaves no file behind, and a
 * backup never replaces a file that exists. */
static int lmdb_backup(kv_env *e, const char *dest, char *err, size_t errlen)
{
	struct stat st;
	int fd, mrc, rc;

	if (stat(dest, &st) == 0) {
		snprintf(err, errlen, "'%s' exists", dest);
		return -EEXIST;
	}
	/* a backup is an image, and whoever reads an image reads every file
	 * in it: 0600 whatever the umask, as kv_mkfs makes them */
	fd = open(dest, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create '%s': %s", dest, strerror(-rc));
		return rc;
	}
	mrc = 0;
	if (fchmod(fd, 0600) != 0) {
		rc = -errno;
	} else {
		mrc = mdb_env_copyfd2(kv_lmdb(e)->env, fd, MDB_CP_COMPACT);
		rc = kv_err(NULL, mrc, NULL);
	}
	if (rc == 0 && fsync(fd) != 0)
		rc = -errno;
	close(fd);
	if (rc) {
		unlink(dest);
		snprintf(err, errlen, "backup to '%s': %s", dest,
			 mrc ? mdb_strerror(mrc) : strerror(-rc));
		return rc;
	}
	return 0;
}

const struct kv_engine kv_engine_lmdb = {
	.name = "lmdb",
	.create = lmdb_create,
	.open = lmdb_open,
	.close = lmdb_close,
	.txn_begin = lmdb_txn_begin,
	.txn_commit = lmdb_txn_commit,
	.txn_abort = lmdb_txn_abort,
	.read_begin = lmdb_read_begin,
	.read_end = lmdb_read_end,
	.read_free = lmdb_read_free,
	.get = lmdb_get,
	.prefetch = lmdb_prefetch,
	.put = lmdb_put,
	.del = lmdb_del,
	.count = lmdb_count,
	.cur_open = lmdb_cur_open,
	.cur_renew = lmdb_cur_renew,
	.cur_close = lmdb_cur_close,
	.cur_get = lmdb_cur_get,
	.cur_del = lmdb_cur_del,
	.cur_forget = lmdb_cur_forget,
	.sync = lmdb_sync,
	.usage = lmdb_usage,
	.backup = lmdb_backup,
	.strerror = lmdb_strerror,
	.room_update = kv_room_update,
	.room_check = kv_room_check,
	.room_over = kv_room_over,
	.room_avail = kv_room_avail_in,
	.room_promise = kv_room_promise_check,
	.room_window = kv_room_window,
	.map_grow = kv_map_grow,
	.flusher_start = kv_flusher_start,
	.flusher_kick = kv_flusher_kick,
	.flusher_stop = kv_flusher_stop,
	.room_close = kv_room_close,
	.any_thread = 0,
};
