/*
 * env.c - creating, opening and closing images on their engine
 * (engine.h); the per-thread recycled read transactions and their cursors.
 *
 * Invariants:
 *  1. An image is trusted only after every check passed: the engine's own
 *     (lmdb.c, pg.c), every map there (a version 1 image lacks those of
 *     shared blocks), and a superblock of a known version and features.
 *  2. mkfs writes the superblock and the root directory in the store's
 *     first commit: a store without them was never made.
 *  3. Each thread has at most one kv_reader per env, kept in
 *     env->readers.list (under env->readers.lock) and freed by the
 *     thread-exit destructor or by kv_close, whichever is first.
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


static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---------------------------------------------------------------- mkfs -- */

struct mkfs_args {
	const struct kv_mkfs_opts *o;
	uint32_t bs;
};

/* The first records (invariant 2), in the engine's first write txn x. */
static int mkfs_init(kv_env *e, kv_etxn *x, void *arg)
{
	const struct mkfs_args *a = arg;
	const struct kv_mkfs_opts *o = a->o;
	struct kv_super s = {0};
	struct kv_inode root = {0};
	unsigned char sb[KV_SUPER_LEN], ib[KV_INODE_LEN], key[8];
	kv_val k, v;
	int rc;

	s.version = KV_FORMAT_VERSION;
	s.block_size = a->bs;
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
	k = (kv_val){strlen(KV_SUPER_KEY), KV_SUPER_KEY};
	v = (kv_val){sizeof(sb), sb};
	rc = kv_err(NULL, e->eng->put(e, x, KV_DB_META, &k, &v, 0), NULL);
	if (rc)
		return rc;

	root.mode = 040000 | (o->root_mode & 07777);
	root.uid = o->root_uid;
	root.gid = o->root_gid;
	root.nlink = 2;
	root.atime_ns = root.mtime_ns = root.ctime_ns = root.btime_ns = s.created_ns;
	root.parent = KV_ROOT_INO;
	kv_inode_encode(&root, ib);
	kv_put_be64(key, KV_ROOT_INO);
	k = (kv_val){8, key};
	v = (kv_val){sizeof(ib), ib};
	return kv_err(NULL, e->eng->put(e, x, KV_DB_INODE, &k, &v, 0), NULL);
}

int kv_mkfs(const char *path, const struct kv_mkfs_opts *o, char *err, size_t errlen)
{
	uint32_t bs = o->block_size ? o->block_size : KV_BLOCK_SIZE_DEFAULT;
	struct mkfs_args a = {o, bs};
	kv_env e = {.lock_fd = -1};

	if (bs < KV_BLOCK_SIZE_MIN || bs > KV_BLOCK_SIZE_MAX) {
		kv_seterr(err, errlen, "block size %u out of range (%u to %u)", bs,
		          KV_BLOCK_SIZE_MIN, KV_BLOCK_SIZE_MAX);
		return -EINVAL;
	}
	if (o->label && strlen(o->label) > KV_LABEL_MAX) {
		kv_seterr(err, errlen, "label longer than %d bytes", KV_LABEL_MAX);
		return -EINVAL;
	}
	e.eng = kv_engine_for(path);
	e.path = (char *)path;
	return e.eng->create(&e, o->force, mkfs_init, &a, err, errlen);
}

/* ---------------------------------------------------------------- open -- */

/* The superblock, read in txn: a kvfs one of a version and features this
 * build knows. */
static int open_super(kv_env *e, kv_etxn *txn, char *err, size_t errlen)
{
	kv_val k = {strlen(KV_SUPER_KEY), KV_SUPER_KEY}, v;
	int rc;

	if (e->eng->get(e, txn, KV_DB_META, &k, &v) != 0) {
		kv_seterr(err, errlen, "'%s' is not a kvfs image (no superblock)", e->path);
		return -EINVAL;
	}
	rc = kv_super_decode(v.data, v.size, &e->super);
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

/* The superblock and the maps, checked (invariant 1), read in one snapshot. */
static int open_records(kv_env *e, char *err, size_t errlen)
{
	kv_etxn *txn;
	uint64_t n;
	int mrc, rc;

	mrc = e->eng->txn_begin(e, NULL, KV_TXN_RDONLY, &txn);
	if (mrc) {
		kv_seterr(err, errlen, "'%s': %s", e->path, kv_strerror(mrc));
		return kv_err(NULL, mrc, NULL);
	}
	rc = open_super(e, txn, err, errlen);
	for (int i = KV_DB_META + 1; !rc && i < KV_NDB; i++) {
		if (!((e->missing_dbs >> i) & 1))
			continue;
		if (e->super.version < 2 && i >= KV_DB_EXTENT)
			continue; /* version 2's, read as empty (kv_int.h) */
		kv_seterr(err, errlen, "'%s': damaged image (database '%s' missing)",
		          e->path, kv_db_names[i]);
		rc = -EIO;
	}
	if (!rc) {
		atomic_store(&e->features, e->super.feature_incompat);
		if (kv_unwritten_read(e, txn, &n) == -EIO)
			kv_log("%s: damaged count of unwritten blocks (fsck.kvfs sets it right)",
			       e->path);
		atomic_store(&e->unwritten.count, n);
	}
	e->eng->txn_abort(e, txn);
	return rc;
}

static void reader_free(void *p);

static void init_locks(kv_env *e)
{
	pthread_rwlockattr_t a;

	pthread_key_create(&e->readers.key, reader_free);
	pthread_mutex_init(&e->readers.lock, NULL);
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
	e->mount = o->mount;
	e->durability = o->durability;
	e->max_size = o->max_size & ~4095ULL;
	e->w.sync_interval_ms = o->sync_interval_ms;
	e->eng = kv_engine_for(path);
	if (!e->readonly && e->durability != KV_DURABLE_FULL) {
		e->win.ms = o->window_ms;
		if (!e->win.ms && e->eng->lease && o->mount && o->alone_window_ms) {
			e->win.ms = o->alone_window_ms;
			e->win.alone_only = 1;
		}
	}
	e->path = strdup(path);
	rc = e->path ? e->eng->open(e, err, errlen) : -ENOMEM;
	if (rc)
		goto free_env;
	rc = open_records(e, err, errlen);
	if (rc) {
		e->eng->close(e);
		goto free_env;
	}

	e->w.next_ino = e->super.next_ino;
	kv_change_init(e);
	(void)kv_icache_init(e); /* without it (ENOMEM), every getattr reads */
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
	free(e->path);
	free(e);
	return rc;
}

void kv_close(kv_env *e)
{
	if (!e)
		return;
	if (e->w.running)
		kv_writer_stop(e);
	pthread_key_delete(e->readers.key);
	pthread_mutex_lock(&e->readers.lock);
	while (e->readers.list) {
		struct kv_reader *r = e->readers.list;
		e->readers.list = r->next;
		kv_txn_close_cursors(&r->t);
		if (r->t.txn)
			e->eng->read_free(e, r->t.txn);
		kv_z_free(&r->z);
		free(r);
	}
	pthread_mutex_unlock(&e->readers.lock);
	kv_z_free(&e->z.scratch);
	e->eng->close(e);
	kv_icache_free(e);
	free(e->chg.buf);
	free(e->lost.ino);
	pthread_rwlock_destroy(&e->map_lock);
	pthread_mutex_destroy(&e->readers.lock);
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
	if (e->win.ms) /* the window's commit, then its sync (window.c) */
		return kv_write(e, kv_apply_nothing, NULL, KV_OP_SYNC);
	return kv_err(NULL, e->eng->sync(e), "sync");
}

int kv_usage_get(kv_env *e, struct kv_usage *u)
{
	static const enum kv_db counted[] = {KV_DB_INODE, KV_DB_DATA, KV_DB_DIRENT, KV_DB_XATTR,
					     KV_DB_ORPHAN};
	uint64_t *dst[] = {&u->inodes, &u->blocks, &u->dirents, &u->xattrs, &u->orphans};
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
read_end:
	kv_read_end(t);
	return rc ? rc : kv_err(NULL, e->eng->usage(e, u), "usage");
}

int kv_backup(kv_env *e, const char *dest, char *err, size_t errlen)
{
	return e->eng->backup(e, dest, err, errlen);
}

uint64_t kv_room_avail(kv_env *e)
{
	return e->readonly ? UINT64_MAX : atomic_load(&e->room_avail);
}

uint64_t kv_room_per_block(const kv_env *e)
{
	/* an unwritten block's first write takes pages for its bytes and
	 * checksum (LMDB's overflow pages, with their header; a smaller value
	 * shares a leaf page, counted whole all the same): its leaf entry
	 * stays the same size */
	return ((uint64_t)e->super.block_size + KV_CSUM_LEN + 16 + e->page_size - 1) /
	       e->page_size * e->page_size;
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

	pthread_mutex_lock(&e->readers.lock);
	if (r->prev)
		r->prev->next = r->next;
	else
		e->readers.list = r->next;
	if (r->next)
		r->next->prev = r->prev;
	pthread_mutex_unlock(&e->readers.lock);
	kv_txn_close_cursors(&r->t);
	if (r->t.txn)
		e->eng->read_free(e, r->t.txn);
	kv_z_free(&r->z);
	free(r);
}

static struct kv_reader *reader_get(kv_env *e)
{
	struct kv_reader *r = pthread_getspecific(e->readers.key);

	if (r)
		return r;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->t.env = e;
	pthread_mutex_lock(&e->readers.lock);
	r->next = e->readers.list;
	if (r->next)
		r->next->prev = r;
	e->readers.list = r;
	pthread_mutex_unlock(&e->readers.lock);
	pthread_setspecific(e->readers.key, r);
	return r;
}

static int read_begin(kv_env *e, kv_txn **out)
{
	struct kv_reader *r = reader_get(e);
	int mrc;

	if (!r)
		return -ENOMEM;
	assert(!r->active);
	mrc = e->eng->read_begin(e, &r->t.txn);
	if (mrc)
		return kv_err(NULL, mrc, "begin read");
	r->t.cur_stale = (1u << KV_NDB) - 1;
	r->active = 1;
	*out = &r->t;
	return 0;
}

int kv_read_begin(kv_env *e, kv_txn **out)
{
	/* window.c invariant 3: the count of commits as of before the snapshot */
	uint64_t gen = atomic_load_explicit(&e->win.gen, memory_order_acquire);
	int rc = read_begin(e, out);

	if (rc == 0)
		(*out)->gen = gen;
	return rc;
}

int kv_reader_on(kv_env *e, kv_etxn *w, kv_txn **out)
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
	t->env->eng->read_end(t->env, t->txn);
	r->active = 0;
	if (in_window)
		kv_win_leave(t);
}

#ifndef NDEBUG
int kv_reading(kv_env *e)
{
	struct kv_reader *r = pthread_getspecific(e->readers.key);

	return r && r->active;
}

int kv_txn_mine(const kv_txn *t)
{
	if (t->write)
		return kv_role_mine(t->env);
	return pthread_getspecific(t->env->readers.key) == t && ((const struct kv_reader *)t)->active;
}
#endif

kv_ecur *kv_cursor(kv_txn *t, enum kv_db db, int *rc)
{
	kv_env *e = t->env;
	kv_ecur *c = t->cur[db];

	assert(kv_txn_mine(t));
	*rc = 0;
	if (t->in_window == 1) { /* cursors on the window, closed with it */
		if (!t->wcur[db])
			*rc = kv_err(t, e->eng->cur_open(e, t->txn, db, &t->wcur[db]),
				     "open cursor");
		return t->wcur[db];
	}
	if (c && (t->cur_stale & (1u << db))) {
		*rc = kv_err(t, e->eng->cur_renew(e, t->txn, c), "renew cursor");
		if (*rc)
			return NULL;
	} else if (!c) {
		*rc = kv_err(t, e->eng->cur_open(e, t->txn, db, &c), "open cursor");
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
			t->env->eng->cur_close(t->env, t->cur[i]);
		t->cur[i] = NULL;
	}
}
