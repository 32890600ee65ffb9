/*
 * repair.c - the read snapshot the passes walk, and the queue of repairs.
 *
 * A pass queues repairs while it walks (fsck_fix and friends); fsck_flush
 * then ends the snapshot and hands every repair to the writer as its own op
 * (kv_submit), at most FLUSH_CHUNK in flight: each op runs in a nested
 * transaction, so a repair commits whole or not at all and one that fails
 * leaves the others alone, while the writer still commits many per batch.
 * Each apply_* below reads the records it changes inside its own write
 * transaction (never the snapshot) and may run twice (the writer replays a
 * batch after growing the map): it has no effect outside the transaction
 * but its fix's result fields.
 *
 * Invariants:
 *  1. No op is submitted while this thread holds a snapshot (fsck.h, 3).
 *  2. f->fixes is not reallocated while ops are in flight: nothing is queued
 *     during a flush.
 *  3. A repair that removes or moves a name (FX_DIRENT_UNLINK, FX_RECONNECT,
 *     /lost+found's creation) also adjusts the sizes and link counts of the
 *     directories it touches, as the daemon would; the caller mirrors that in
 *     memory. Repairs that drop records leave the counts to passes 3 to 5.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsck.h"

#define FLUSH_CHUNK 10000

/* ------------------------------------------------------------ snapshot -- */

int fsck_snapshot(struct fsck *f)
{
	if (f->txn)
		return 0;
	return kv_read_begin(f->env, &f->txn);
}

void fsck_snapshot_end(struct fsck *f, int final)
{
	if (!f->txn || (f->mode == MODE_CHECK && !final))
		return;
	kv_read_end(f->txn);
	f->txn = NULL;
}

void fsck_super(struct fsck *f, struct kv_super *sb)
{
	if (f->mode == MODE_CHECK)
		*sb = f->sb;
	else
		kv_super_get(f->env, sb);
}

/* ---------------------------------------------------------------- walk -- */

struct pass_walk {
	struct fsck_walk *w;
	enum kv_db db;
	enum fsck_pr bad_key;
	fsck_record_fn *fn;
};

static int pass_record(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct pass_walk *p = arg;
	struct fsck_rec r = {.k = k, .kl = kl, .v = v, .vl = vl};

	fsck_tick(p->w->f, 1);
	if (kl > KV_KEY_MAX || kv_key_decode(p->db, k, kl, &r.key))
		return fsck_bad_key(p->w->f, p->bad_key, p->db, k, kl);
	return p->fn(p->w, &r);
}

int fsck_walk(struct fsck_walk *w, enum kv_db db, enum fsck_pr bad_key, fsck_record_fn *fn)
{
	struct pass_walk p = {.w = w, .db = db, .bad_key = bad_key, .fn = fn};

	return walk_records(w->f->txn, db, NULL, 0, pass_record, &p);
}

int fsck_bad_key(struct fsck *f, enum fsck_pr code, enum kv_db db, const void *k, size_t kl)
{
	struct pend *pr = fsck_problem(f, code, &(struct pctx){.num = kl});

	return pr ? fsck_fix_del(f, db, k, kl, 0, pr) : 0;
}

struct fino *fsck_merge(struct fsck_walk *w, uint64_t ino)
{
	const struct fsck *f = w->f;

	while (w->ci < f->nino && f->ino[w->ci].ino < ino)
		w->ci++;
	return w->ci < f->nino && f->ino[w->ci].ino == ino ? &f->ino[w->ci] : NULL;
}

/* --------------------------------------------------------------- queue -- */

struct fix *fsck_fix(struct fsck *f, enum fix_kind kind, uint64_t ino, struct pend *pr)
{
	struct fix *x;

	if (!(x = array_reserve(f->fixes, &f->cap_fixes, f->nfixes + 1, sizeof(*x), 256)))
		return NULL;
	f->fixes = x;
	x = &f->fixes[f->nfixes];
	memset(x, 0, sizeof(*x));
	x->kind = kind;
	x->ino = ino;
	if (pr)
		pr->fix = (uint32_t)f->nfixes;
	f->nfixes++;
	return x;
}

struct fix *fsck_fix_set(struct fsck *f, uint64_t ino, struct pend *pr)
{
	struct fix *x = f->nfixes ? &f->fixes[f->nfixes - 1] : NULL;

	if (x && x->kind == FX_INODE_SET && x->ino == ino) {
		fsck_attach(f, pr, x);
		return x;
	}
	return fsck_fix(f, FX_INODE_SET, ino, pr);
}

int fsck_fix_feature(struct fsck *f, enum fsck_pr code, uint64_t count, uint64_t bit)
{
	struct kv_super sb;
	struct pend *pr;
	struct fix *x;

	fsck_super(f, &sb);
	if (!count || (sb.feature_incompat & bit))
		return 0;
	pr = fsck_problem(f, code, &(struct pctx){.num = count});
	if (!pr)
		return 0;
	if (!(x = fsck_fix(f, FX_FEATURE, 0, pr)))
		return -ENOMEM;
	x->u.next = bit;
	return 0;
}

int fsck_fix_field(struct fsck *f, enum fsck_pr code, const struct pctx *p, struct fino *fi,
		   unsigned mask, uint64_t val)
{
	struct pend *pr = fsck_problem(f, code, p);
	struct fdir *fd = fino_dir(f, fi);
	struct fix *x;

	if (!pr)
		return 0;
	x = fsck_fix_set(f, fi->ino, pr);
	if (!x)
		return -ENOMEM;
	x->u.set.mask |= mask;
	if (mask & SET_NLINK)
		x->u.set.nlink = fi->nlink = (uint32_t)val;
	if (mask & SET_SIZE)
		x->u.set.size = fi->size = val;
	if (mask & SET_NBLOCKS)
		x->u.set.nblocks = fi->nblocks = val;
	if (mask & SET_PARENT) {
		x->u.set.parent = val;
		if (fd)
			fd->parent = val;
	}
	if (mask & SET_FLAGS) {
		x->u.set.flags_clr |= val;
		fi->iflags &= (uint8_t)~val;
	}
	if (mask & SET_FLAGS_ADD) {
		x->u.set.flags_add |= val;
		fi->iflags |= (uint8_t)val;
	}
	return 0;
}

void fsck_attach(struct fsck *f, struct pend *pr, struct fix *x)
{
	if (pr && x)
		pr->fix = (uint32_t)(x - f->fixes);
}

int fsck_fix_del(struct fsck *f, enum kv_db db, const void *key, size_t klen, uint64_t ino,
		 struct pend *pr)
{
	unsigned char *k = malloc(klen ? klen : 1);
	struct fix *x;

	if (!k)
		return -ENOMEM;
	x = fsck_fix(f, FX_DEL, ino, pr);
	if (!x) {
		free(k);
		return -ENOMEM;
	}
	memcpy(k, key, klen);
	x->u.del.db = db;
	x->u.del.key = k;
	x->u.del.klen = klen;
	return 0;
}

static void fix_free(struct fix *x)
{
	switch (x->kind) {
	case FX_DEL:
		free(x->u.del.key);
		break;
	case FX_DIRENT_LIST:
		free(x->u.list.val);
		free(x->u.list.refile);
		break;
	case FX_EXT_SET:
		free(x->u.ext);
		break;
	default:
		break;
	}
}

/* ------------------------------------------------------------- applying -- */

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int apply_set(kv_txn *t, struct fix *x)
{
	unsigned m = x->u.set.mask;
	struct kv_inode in;
	int rc = kv_inode_get(t, x->ino, &in);

	if (rc)
		return rc;
	if (m & SET_NLINK)
		in.nlink = x->u.set.nlink;
	if (m & SET_SIZE)
		in.size = x->u.set.size;
	if (m & SET_NBLOCKS)
		in.nblocks = x->u.set.nblocks;
	if (m & SET_PARENT)
		in.parent = x->u.set.parent;
	in.flags = (in.flags & ~x->u.set.flags_clr) | x->u.set.flags_add;
	if (m & SET_NOINLINE) {
		in.inline_data = NULL;
		in.inline_len = 0;
	}
	return kv_inode_put(t, &in);
}

/* Remove inode ino and its records, but keep the blocks other files borrow
 * from it (kv/share.c invariant 4): a damaged record's flags are unknown,
 * and a sound one's may have lost theirs, so it is purged as a file that
 * lends and borrows, whatever it says. */
static int purge(kv_txn *t, uint64_t ino)
{
	struct kv_inode in;
	int rc = kv_inode_get(t, ino, &in);

	if (rc == -ENOENT)
		return 0;
	if (rc) { /* damaged: a stub of its number takes its place */
		memset(&in, 0, sizeof(in));
		in.ino = ino;
		in.mode = S_IFREG;
	}
	if ((in.flags & KV_INODE_FLAGS_KNOWN) != KV_INODE_FLAGS_KNOWN) {
		in.flags |= KV_INODE_FLAGS_KNOWN;
		rc = kv_inode_put(t, &in);
		if (rc)
			return rc;
	}
	return kv_inode_purge(t, ino);
}

static int apply_root(kv_txn *t)
{
	struct kv_inode root = {0};
	int rc = purge(t, KV_ROOT_INO);

	if (rc)
		return rc;
	root.ino = KV_ROOT_INO;
	root.mode = S_IFDIR | 0755;
	root.uid = getuid();
	root.gid = getgid();
	root.nlink = 2;
	root.parent = KV_ROOT_INO;
	root.atime_ns = root.mtime_ns = root.ctime_ns = root.btime_ns = now_ns();
	return kv_inode_put(t, &root);
}

static int apply_del_prefix(kv_txn *t, enum kv_db db, uint64_t ino)
{
	unsigned char pfx[KV_KEY_MAX], key[512]; /* any key LMDB stores */
	size_t plen = kv_key_prefix(ino, pfx), kl, vl;
	const void *k, *v;
	kv_iter *it;
	int rc;

	rc = kv_iter_open(t, db, &it);
	if (rc)
		return rc;
	for (;;) {
		/* seek again after every delete: the cursor is not trusted across one */
		rc = kv_iter_seek(it, pfx, plen);
		if (rc == 0)
			rc = kv_iter_next(it, &k, &kl, &v, &vl);
		if (rc == -ENOENT) {
			rc = 0;
			break;
		}
		if (rc || kl < plen || kl > sizeof(key) || memcmp(k, pfx, plen) != 0)
			break;
		memcpy(key, k, kl);
		rc = kv_raw_del(t, db, key, kl);
		if (rc)
			break;
	}
	kv_iter_close(it);
	return rc;
}

static int apply_list(kv_txn *t, struct fix *x)
{
	const struct kv_key k = {.ino = x->u.list.dir, .hash = x->u.list.hash};
	unsigned char key[KV_KEY_MAX];
	size_t kl = kv_key_encode(KV_DB_DIRENT, &k, key);
	int rc;

	if (x->u.list.vlen)
		rc = kv_raw_put(t, KV_DB_DIRENT, key, kl, x->u.list.val, x->u.list.vlen);
	else
		rc = kv_raw_del(t, KV_DB_DIRENT, key, kl);
	if (rc == -ENOENT)
		rc = 0;
	for (unsigned i = 0; rc == 0 && i < x->u.list.nrefile; i++) {
		struct fix_ent *e = &x->u.list.refile[i];
		rc = kv_dirent_add(t, x->u.list.dir, e->name, e->namelen, e->ino, e->type);
		if (rc == -EEXIST)
			rc = 0; /* the name is filed correctly already: this was a stale copy */
	}
	return rc;
}

/* Adjust a directory's size and link count by one entry (dsub: of a
 * subdirectory), never below 0. */
static int dir_adjust(kv_txn *t, uint64_t dir, int delta, int dsub)
{
	struct kv_inode d;
	int rc = kv_inode_get(t, dir, &d);

	if (rc)
		return rc;
	if (delta > 0 || d.size > 0)
		d.size += (uint64_t)(int64_t)delta;
	if (dsub && (delta > 0 || d.nlink > 0))
		d.nlink += (uint32_t)delta;
	return kv_inode_put(t, &d);
}

/* Remove dir's (first) entry naming ino. */
static int unlink_ino(kv_txn *t, uint64_t dir, uint64_t ino, int isdir)
{
	uint64_t cookie = 0;
	struct kv_dirent de;
	char name[KV_NAME_MAX];
	size_t len;
	int rc;

	while ((rc = kv_dir_next(t, dir, &cookie, &de)) == 0)
		if (de.ino == ino)
			break;
	if (rc)
		return rc;
	len = de.namelen;
	memcpy(name, de.name, len); /* de.name points into a page the remove rewrites */
	rc = kv_dirent_remove(t, dir, name, len);
	return rc ? rc : dir_adjust(t, dir, -1, isdir);
}

static int apply_reconnect(kv_txn *t, struct fix *x)
{
	int isdir = x->u.link.type == kv_dirent_type(S_IFDIR);
	char name[32];
	struct kv_inode in;
	int rc, len;

	if (x->u.link.dir) {
		rc = unlink_ino(t, x->u.link.dir, x->ino, isdir);
		if (rc)
			return rc;
	}
	len = snprintf(name, sizeof(name), "#%llu", (unsigned long long)x->ino);
	rc = kv_dirent_add(t, x->u.link.lf, name, (size_t)len, x->ino, x->u.link.type);
	if (!rc)
		rc = dir_adjust(t, x->u.link.lf, 1, isdir);
	if (!rc && isdir) {
		rc = kv_inode_get(t, x->ino, &in);
		if (!rc) {
			in.parent = x->u.link.lf;
			rc = kv_inode_put(t, &in);
		}
	}
	return rc;
}

static int apply_orphan_free(kv_txn *t, uint64_t ino)
{
	struct kv_inode in;
	int rc = kv_inode_get(t, ino, &in);

	if (rc == -ENOENT)
		return kv_orphan_remove(t, ino);
	if (rc)
		return rc;
	if (in.nlink)
		return -EBUSY; /* linked after all: never free it */
	return purge(t, ino);
}

/* Drop x[0]'s extent and lend records (when x[0].count) and store those of
 * x[1] and x[2] (each, when its count is not 0): by key, so a piece that
 * an earlier repair already stored is replaced, never doubled. */
static int apply_ext_set(kv_txn *t, const struct kv_extent *x)
{
	unsigned char k[32], v[KV_EXTENT_VLEN];
	size_t kl, vl;
	int rc = 0;

	for (enum kv_db db = KV_DB_EXTENT; !rc && x[0].count && db <= KV_DB_LEND; db++) {
		kv_encode_extent(db, &x[0], k, &kl, v, &vl);
		rc = kv_raw_del(t, db, k, kl);
		if (rc == -ENOENT)
			rc = 0; /* the half a damaged pair lacked */
	}
	for (int i = 1; !rc && i <= 2; i++)
		for (enum kv_db db = KV_DB_EXTENT; !rc && x[i].count && db <= KV_DB_LEND; db++) {
			kv_encode_extent(db, &x[i], k, &kl, v, &vl);
			rc = kv_raw_put(t, db, k, kl, v, vl);
		}
	return rc;
}

/* FX_BLOCK_TRIM: a punch over [size, end of the block) of a file that ends
 * with the block cuts just that block at size (the record is not stored).
 * With the file's flags (and those x adds) the punch gives the borrowers of
 * a lent block a copy first, and makes a borrowed block the file's own
 * before it cuts it, as a truncate would. */
static int apply_trim(kv_txn *t, const struct fix *x)
{
	struct kv_inode in;
	int rc = kv_inode_get(t, x->ino, &in);

	if (rc)
		return rc;
	in.flags |= x->u.trim.flags;
	in.size = x->u.trim.end;
	return kv_data_punch(t, &in, x->u.trim.size, x->u.trim.end - x->u.trim.size);
}

static int apply_fix(kv_txn *t, void *arg)
{
	struct fix *x = arg;
	int rc;

	switch (x->kind) {
	case FX_NONE:
		return x->rc;
	case FX_INODE_SET:
		return apply_set(t, x);
	case FX_INODE_CLEAR:
		return purge(t, x->ino);
	case FX_ROOT:
		return apply_root(t);
	case FX_DEL:
		rc = kv_raw_del(t, x->u.del.db, x->u.del.key, x->u.del.klen);
		return rc == -ENOENT ? 0 : rc;
	case FX_DEL_PREFIX:
		return apply_del_prefix(t, x->u.del.db, x->ino);
	case FX_DIRENT_LIST:
		return apply_list(t, x);
	case FX_DIRENT_UNLINK:
		return unlink_ino(t, x->u.link.dir, x->ino, x->u.link.type == kv_dirent_type(S_IFDIR));
	case FX_RECONNECT:
		return apply_reconnect(t, x);
	case FX_BLOCK_TRIM:
		return apply_trim(t, x);
	case FX_EXT_SET:
		return apply_ext_set(t, x->u.ext);
	case FX_ORPHAN_FREE:
		return apply_orphan_free(t, x->ino);
	case FX_ORPHAN_UNLIST:
		rc = kv_orphan_remove(t, x->ino);
		return rc == -ENOENT ? 0 : rc;
	case FX_COUNTER:
		return kv_ino_counter_raise(t, x->u.next);
	case FX_UNWRITTEN:
		return kv_unwritten_recount(t, &x->u.next);
	case FX_FEATURE:
		return kv_feature_add(t, x->u.next);
	}
	return -EINVAL;
}

/* ------------------------------------------------------------- flushing -- */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t left;
} wait_all = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};

static void fix_done(void *arg, int rc)
{
	struct fix *x = arg;

	x->rc = rc;
	pthread_mutex_lock(&wait_all.lock);
	if (--wait_all.left == 0)
		pthread_cond_signal(&wait_all.cond);
	pthread_mutex_unlock(&wait_all.lock);
}

static void run_fixes(struct fsck *f)
{
	for (size_t from = 0; from < f->nfixes; from += FLUSH_CHUNK) {
		size_t to = from + FLUSH_CHUNK < f->nfixes ? from + FLUSH_CHUNK : f->nfixes;

		pthread_mutex_lock(&wait_all.lock);
		wait_all.left = to - from;
		pthread_mutex_unlock(&wait_all.lock);
		for (size_t i = from; i < to; i++) {
			struct fix *x = &f->fixes[i];
			int rc;

			x->op = (struct kv_op){.apply = apply_fix, .done = fix_done, .arg = x};
			rc = kv_submit(f->env, &x->op);
			if (rc)
				fix_done(x, rc);
		}
		pthread_mutex_lock(&wait_all.lock);
		while (wait_all.left)
			pthread_cond_wait(&wait_all.cond, &wait_all.lock);
		pthread_mutex_unlock(&wait_all.lock);
	}
}

int fsck_flush(struct fsck *f)
{
	if (f->nfixes) {
		fsck_snapshot_end(f, 0);
		run_fixes(f);
	}
	fsck_settle(f);
	for (size_t i = 0; i < f->nfixes; i++)
		fix_free(&f->fixes[i]);
	f->nfixes = 0;
	return 0;
}

/* ----------------------------------------------------------- lost+found -- */

struct mklf {
	uint64_t floor; /* every ino in use is below it */
	uint64_t ino;   /* result */
};

static int apply_mklf(kv_txn *t, void *arg)
{
	struct mklf *a = arg;
	struct kv_inode root, lf = {0};
	int rc;

	/* the counter may be the very damage this run found: never let the
	 * allocation hand out an ino in use */
	rc = kv_ino_counter_raise(t, a->floor);
	if (!rc)
		rc = kv_ino_alloc(t, &a->ino);
	if (!rc)
		rc = kv_inode_get(t, KV_ROOT_INO, &root);
	if (rc)
		return rc;
	if (!S_ISDIR(root.mode))
		return -ENOTDIR;
	lf.ino = a->ino;
	lf.mode = S_IFDIR | 0700;
	lf.uid = root.uid;
	lf.gid = root.gid;
	lf.nlink = 2;
	lf.parent = KV_ROOT_INO;
	lf.atime_ns = lf.mtime_ns = lf.ctime_ns = lf.btime_ns = now_ns();
	rc = kv_inode_put(t, &lf);
	if (!rc)
		rc = kv_dirent_add(t, KV_ROOT_INO, "lost+found", 10, lf.ino, kv_dirent_type(S_IFDIR));
	if (!rc)
		rc = dir_adjust(t, KV_ROOT_INO, 1, 1);
	return rc;
}

int fsck_lost_found(struct fsck *f, uint64_t *ino)
{
	struct mklf a = {.floor = f->max_key + 1};
	struct fino *fi, *root;
	struct fdir *fd;
	int rc;

	if (f->lost_found) {
		*ino = f->lost_found;
		return 0;
	}
	if (f->lf_blocked)
		return -ENOTDIR; /* "lost+found" names something else */
	if (!f->root_ok)
		return -ENOENT;
	fsck_snapshot_end(f, 0);
	rc = kv_write(f->env, apply_mklf, &a, 0);
	if (rc) {
		f->lf_blocked = 1;
		return rc;
	}
	fi = fsck_add_inode(f, a.ino, S_IFDIR | 0700, 1);
	if (!fi)
		return -ENOMEM;
	fi->nlink = 2;
	fi->links = 1;
	fd = fino_dir(f, fi);
	fd->parent = KV_ROOT_INO;
	fd->named_by = KV_ROOT_INO;
	fd->state = R_REACHABLE;
	root = &f->ino[0];
	root->size++;
	root->nlink++;
	fino_dir(f, root)->entries++;
	fino_dir(f, root)->subdirs++;
	if (a.ino > f->max_key)
		f->max_key = a.ino;
	f->n_inodes++;
	f->n_dirs++;
	f->lost_found = a.ino;
	fsck_info(f, "created /lost+found (inode %llu)", (unsigned long long)a.ino);
	*ino = a.ino;
	return 0;
}
