/*
 * inode.c - the attributes to reply with, getattr and setattr, statfs,
 * forgetting inodes and freeing orphans.
 *
 * Invariants:
 *  1. getattr reads through the thread's recycled read transaction and
 *     allocates nothing, unless a time update of that inode is still queued
 *     (3): then it first runs a batch.
 *  2. An inode without links is purged only when the kernel holds no
 *     reference to it (itable.c); the purge re-checks the link count in the
 *     writer, so a rolled-back unlink can never free a live inode.
 *  3. A time update queued lazily (setattr_lazily, pending.c) is committed
 *     before any reply that gives the inode's times back (the fs_attr_*
 *     entry point), and before fsync's sync.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs.h"

int64_t fs_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct timespec ts_of(int64_t ns)
{
	struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
	if (ts.tv_nsec < 0) {
		ts.tv_sec--;
		ts.tv_nsec += 1000000000;
	}
	return ts;
}

void fs_attr_fill(const struct kv_inode *in, struct stat *st)
{
	uint64_t pages = (fs.block_size + 24 + 4095) / 4096;

	memset(st, 0, sizeof(*st));
	st->st_ino = in->ino;
	st->st_mode = in->mode;
	st->st_nlink = in->nlink;
	st->st_uid = in->uid;
	st->st_gid = in->gid;
	st->st_rdev = in->rdev;
	st->st_size = (off_t)(S_ISLNK(in->mode) ? in->inline_len : in->size);
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)(in->nblocks * pages * 8);
	st->st_atim = ts_of(in->atime_ns);
	st->st_mtim = ts_of(in->mtime_ns);
	st->st_ctim = ts_of(in->ctime_ns);
}

void fs_fill_entry(const struct stat *st, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = st->st_ino;
	e->generation = 1;
	e->attr_timeout = fs.cfg.timeout;
	e->entry_timeout = fs.cfg.timeout;
	e->attr = *st;
}

int fs_drop_link(kv_txn *t, struct kv_inode *in)
{
	int rc;

	in->nlink--;
	in->ctime_ns = fs_now_ns();
	if (in->nlink > 0)
		return kv_inode_put(t, in);
	if (!fs_itable_mark_orphan(in->ino))
		return kv_inode_purge(t, in->ino);
	rc = kv_inode_put(t, in);
	if (!rc)
		rc = kv_orphan_add(t, in->ino);
	return rc;
}

/* ------------------------------------------------------------ orphans -- */

struct purge_op {
	struct kv_op op;
	uint64_t ino;
};

static int apply_purge(kv_txn *t, void *arg)
{
	uint64_t ino = *(uint64_t *)arg;
	struct kv_inode in;
	int rc = kv_inode_get(t, ino, &in);

	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (in.nlink > 0) /* the unlink that made it an orphan was rolled back */
		return 0;
	return kv_inode_purge(t, ino);
}

static void purge_done(void *arg, int rc)
{
	struct purge_op *p = (struct purge_op *)((char *)arg - offsetof(struct purge_op, ino));

	if (rc)
		fs_log("inode %llu: cannot free: %s (freed at the next mount)",
		       (unsigned long long)p->ino, strerror(-rc));
	free(p);
}

static void submit_purge(uint64_t ino)
{
	struct purge_op *p = malloc(sizeof(*p));

	if (!p)
		return; /* stays on the orphan list; freed at the next mount */
	p->ino = ino;
	p->op = (struct kv_op){.apply = apply_purge, .done = purge_done, .arg = &p->ino,
			       .flags = KV_OP_RESERVE};
	/* nobody waits for it: it rides along with the next change (an unlink's
	 * forget is usually followed by the next unlink) */
	if (kv_submit_lazy(fs.env, &p->op))
		free(p);
}

int fs_purge_orphans(void)
{
	uint64_t ino = 0, next;
	kv_txn *t;
	int rc, n = 0;

	/* a store other mounts write too holds their orphans as well, files
	 * open there: each mount frees its own at FORGET, and one a crashed
	 * mount left stays until fsck.kvfs -p runs with no mount live */
	if (kv_is_readonly(fs.env) || kv_is_shared(fs.env))
		return 0;
	for (;;) {
		rc = fs_read_begin_window(&t); /* the window's orphans too */
		if (rc)
			return rc;
		rc = kv_orphan_next(t, ino, &next);
		fs_read_end(t);
		if (rc == -ENOENT)
			break;
		if (rc)
			return rc;
		ino = next;
		rc = fs_write(apply_purge, &ino, KV_OP_RESERVE);
		if (rc)
			fs_log("inode %llu: cannot free orphan: %s", (unsigned long long)ino,
			       strerror(-rc));
		else
			n++;
	}
	return n;
}

void fs_do_forget(uint64_t ino, uint64_t nlookup)
{
	if (fs_itable_forget(ino, nlookup))
		submit_purge(ino);
}

void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fs_do_forget(ino, nlookup);
	fuse_reply_none(req);
}

void fs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		fs_do_forget(forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

/* -------------------------------------------------------------- atime -- */

struct atime_op {
	struct kv_op op;
	uint64_t ino;
	int64_t now;
};

static int apply_atime(kv_txn *t, void *arg)
{
	struct atime_op *a = arg;
	struct kv_inode in;
	int rc = kv_inode_get(t, a->ino, &in);

	if (rc)
		return rc == -ENOENT ? 0 : rc;
	in.atime_ns = a->now;
	return kv_inode_put(t, &in);
}

/* The update is applied after the READ (or READDIR) was answered, and the
 * kernel may have asked for the attributes in between: it drops what it
 * cached, so the next stat(2) asks again and shows the new access time.
 * Attributes only: never waits (safe on the writer's thread). */
static void atime_done(void *arg, int rc)
{
	struct atime_op *a = arg;

	if (rc == 0)
		fs_notify_inval(a->ino, -1, 0);
	free(a);
}

/* The last atime a SETATTR set explicitly (utimensat), of a few inodes by
 * slot: an update of a READ that began before it must not overwrite it.
 * The kernel sends its readahead as READs of their own, which may arrive
 * after the read(2) that caused them returned and the caller set the
 * atime (seen: a 9-byte read, two READs, the second after the SETATTR).
 * Lossy: an inode sharing a slot forgets the older mark. */
#define ATIME_SLOTS 64
static _Atomic uint64_t atime_set_ino[ATIME_SLOTS];
static _Atomic int64_t atime_set_ns[ATIME_SLOTS];

static void atime_mark(uint64_t ino, int64_t now)
{
	atomic_store(&atime_set_ino[ino % ATIME_SLOTS], 0); /* no stale pair meanwhile */
	atomic_store(&atime_set_ns[ino % ATIME_SLOTS], now);
	atomic_store(&atime_set_ino[ino % ATIME_SLOTS], ino);
}

static int atime_set_since(uint64_t ino, int64_t since)
{
	return atomic_load(&atime_set_ino[ino % ATIME_SLOTS]) == ino &&
	       atomic_load(&atime_set_ns[ino % ATIME_SLOTS]) >= since;
}

/* Called on a read path; allocates only when an update is due (relatime:
 * once after each change, or once a day). began: when the request came. */
void fs_maybe_touch_atime(const struct kv_inode *in, int64_t began)
{
	const int64_t day = 24LL * 3600 * 1000000000;
	int64_t now;
	struct atime_op *a;

	if (fs.cfg.atime == FS_ATIME_NOATIME || fs.cfg.readonly ||
	    atime_set_since(in->ino, began))
		return;
	now = fs_now_ns();
	if (fs.cfg.atime == FS_ATIME_RELATIME && in->atime_ns > in->mtime_ns &&
	    in->atime_ns > in->ctime_ns && now - in->atime_ns < day)
		return;
	/* pending until committed: the next stat settles it first, so it
	 * shows the new time (pending.c); the table full, an op of its own */
	if (fs_pending_queue(&(struct fs_pending){.ino = in->ino, .what = FS_PENDING_ATIME,
						  .atime_ns = now}, 0) == 0)
		return;
	a = malloc(sizeof(*a));
	if (!a)
		return;
	a->ino = in->ino;
	a->now = now;
	a->op = (struct kv_op){.apply = apply_atime, .done = atime_done, .arg = a};
	if (kv_submit(fs.env, &a->op))
		free(a);
}

/* ---------------------------------------------------------- attributes -- */

int fs_read_inode(uint64_t ino, kv_txn **t, struct kv_inode *in)
{
	int rc = fs_read_begin(ino, t);

	if (rc)
		return rc;
	rc = kv_inode_get(*t, ino, in);
	if (rc)
		fs_read_end(*t);
	return rc;
}

int fs_read_inode_for(fuse_req_t req, uint64_t ino, kv_txn **t, struct kv_inode *in)
{
	int rc = fs_read_inode(ino, t, in);

	if (rc == 0)
		return 0;
	fuse_reply_err(req, -rc);
	return -1;
}

static int find_ino(kv_txn *t, const void *arg, struct kv_inode *in)
{
	return kv_inode_get(t, *(const uint64_t *)arg, in);
}

/* Read first, settle after: while nothing is pending (nearly always) the
 * rule costs one atomic load; when something was, it is committed now and
 * the inode read again. */
int fs_attr_read(uint64_t from, fs_find_fn find, const void *arg, struct kv_inode *in)
{
	int rc, settled = 0, window = 0, again;
	kv_txn *t;

	assert(fs_reading == 0); /* it may wait on the writer (session.c, 4) */
	for (;;) {
		rc = window ? fs_read_begin_window(&t) : fs_read_begin(from, &t);
		if (rc)
			return rc;
		rc = find(t, arg, in);
		/* found through an inode that did not change: it did */
		again = rc == 0 && !window && kv_read_changed(t, in->ino);
		in->inline_data = NULL; /* into the map: gone with the transaction */
		fs_read_end(t);
		if (again) {
			window = 1;
			continue;
		}
		if (rc || settled || !fs_pending_settle(in->ino))
			return rc;
		settled = 1;
	}
}

int fs_attr_get(uint64_t ino, struct kv_inode *in)
{
	/* On a shared store, the kernel asks for a directory's attributes
	 * again after each change in it (a round trip to the server each):
	 * what this mount's last commit left, while no change is pending and
	 * for no longer than the kernel itself may cache them (icache.c). */
	if (!fs_pending_has(ino) &&
	    kv_inode_recent(fs.env, ino, (int64_t)(fs.cfg.timeout * 1e9), in) == 0)
		return 0;
	return fs_attr_read(ino, find_ino, &ino, in);
}

/* The inodes are not known before the listing finds them: settling them all
 * commits early what would have been committed within KV_LAZY_MS anyway. */
int fs_attr_read_begin(uint64_t dir, kv_txn **t)
{
	assert(fs_reading == 0);
	fs_pending_settle(0);
	return fs_read_begin(dir, t);
}

/* Less room than one write request brings. */
static int no_room(void)
{
	return kv_room_avail(fs.env) < fs.cfg.max_write;
}

int fs_do_getattr(uint64_t ino, int open_file, struct stat *out)
{
	struct kv_inode in;
	int rc;

	if (open_file && fs_itable_short(ino) && (fs_itable_take_tell(ino) || no_room()))
		/* a write(2) to a file whose write back failed for want of
		 * room asks first (file.c): the next one fails, and every one
		 * while there is no room, instead of filling the kernel's
		 * cache with data that cannot be stored */
		return -ENOSPC;
	rc = fs_attr_get(ino, &in);
	if (rc == 0)
		fs_attr_fill(&in, out);
	return rc;
}

void fs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int rc = fs_do_getattr(ino, fi != NULL, &st);

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, fs.cfg.timeout);
}

struct setattr_args {
	uint64_t ino;
	const struct stat *attr;
	int to_set;
	struct kv_inode out;
};

/* The time fields of a SETATTR; ctime is now unless it is given. */
static void set_times(struct kv_inode *in, const struct stat *at, int to_set, int64_t now)
{
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		in->atime_ns = now;
	else if (to_set & FUSE_SET_ATTR_ATIME)
		in->atime_ns = (int64_t)at->st_atim.tv_sec * 1000000000 + at->st_atim.tv_nsec;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		in->mtime_ns = now;
	else if (to_set & FUSE_SET_ATTR_MTIME)
		in->mtime_ns = (int64_t)at->st_mtim.tv_sec * 1000000000 + at->st_mtim.tv_nsec;
	if (to_set & FUSE_SET_ATTR_CTIME)
		in->ctime_ns = (int64_t)at->st_ctim.tv_sec * 1000000000 + at->st_ctim.tv_nsec;
	else
		in->ctime_ns = now;
}

/* chmod with an access ACL: its owner, group class and other entries
 * follow the mode (acl(5)), as ext4 and tmpfs keep them, in the same
 * transaction. The kernel sends no ACL with the SETATTR; it forgets the
 * one it cached. */
static int chmod_acl(kv_txn *t, const struct kv_inode *in)
{
	unsigned char acl[KV_ACL_SIZE_MAX];
	size_t len;
	int rc = fs_acl_get(t, in->ino, KV_ACL_ACCESS, acl, &len);

	if (rc)
		return rc == -ENODATA ? 0 : rc;
	kv_acl_chmod(acl, len, in->mode);
	return kv_xattr_set(t, in->ino, KV_ACL_ACCESS, acl, len, 0);
}

static int apply_setattr(kv_txn *t, void *arg)
{
	struct setattr_args *a = arg;
	const struct stat *at = a->attr;
	struct kv_inode *in = &a->out;
	int64_t now = fs_now_ns();
	int rc;

	rc = kv_inode_get(t, a->ino, in);
	if (rc)
		return rc;
	if (a->to_set & FUSE_SET_ATTR_MODE) {
		in->mode = (in->mode & S_IFMT) | (at->st_mode & 07777);
		rc = chmod_acl(t, in);
		if (rc)
			return rc;
	}
	if (a->to_set & FUSE_SET_ATTR_UID)
		in->uid = at->st_uid;
	if (a->to_set & FUSE_SET_ATTR_GID)
		in->gid = at->st_gid;
	if (a->to_set & FUSE_SET_ATTR_SIZE) {
		if (S_ISDIR(in->mode))
			return -EISDIR;
		if (!S_ISREG(in->mode))
			return -EINVAL;
		if (at->st_size < 0)
			return -EINVAL;
		/* Without the writeback cache the kernel sends a truncate with
		 * no time bits and leaves the times to kvfs: they change even
		 * when the size stays, as POSIX asks of truncate(2) and Linux
		 * does for ftruncate(2) and open(O_TRUNC). With it the kernel
		 * owns the times and sends them when they change: none sent,
		 * none changed, or the store would disagree with its cache. */
		if (!fs.cfg.writeback &&
		    !(a->to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)))
			in->mtime_ns = now;
		if ((uint64_t)at->st_size != in->size) {
			rc = kv_data_truncate(t, in, (uint64_t)at->st_size);
			if (rc)
				return rc;
		}
	}
	set_times(in, at, a->to_set, now);
	return kv_inode_put(t, in);
}

/* With the writeback cache the kernel keeps a regular file's mtime and
 * ctime itself, as it keeps its dirty pages, and writes them back with a
 * SETATTR of mtime and ctime: through a file open for writing (fi set) at
 * close, at fsync, at the inode's periodic write-back, and after UNLINK
 * (fuse_update_ctime). While the kernel has the
 * inode it answers stat(2) from its own times; it takes them from kvfs only
 * after it forgot the inode (LOOKUP, READDIRPLUS), and those replies settle
 * the update first (fs_attr_*); fsync(2) commits it before it syncs. So such a SETATTR
 * need not wait for a commit of its own: it joins the next batch
 * (kv_submit_lazy), and a create is two commits, a delete one. A user's
 * utimensat(2) (not through an open file) and every other change stay synchronous, and so
 * does everything with durability=full. 1 when queued, with the
 * attributes to reply in *out. */
static int setattr_lazily(uint64_t ino, const struct stat *at, int to_set, int open_file,
			  struct kv_inode *out)
{
	struct fs_pending p = {.ino = ino, .what = FS_PENDING_TIMES};

	/* with a window every change is told once applied: nothing to save */
	if (!fs.cfg.writeback || fs.cfg.durability == KV_DURABLE_FULL || fs.cfg.window_ms ||
	    (to_set & ~(FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME)))
		return 0;
	/* *out is what is committed, then this update: a SETATTR of ctime
	 * alone must not store a queued update's mtime back to the old one */
	if (fs_attr_get(ino, out))
		return 0;
	/* a shared store without a window commits nothing at close (file.c,
	 * fs_op_flush): there the times a close writes back are committed
	 * before they are answered, for the other mounts */
	if (!S_ISREG(out->mode) ||
	    (out->nlink != 0 && (!open_file || kv_is_shared(fs.env))))
		return 0;
	out->inline_len = 0;
	set_times(out, at, to_set, fs_now_ns());
	p.mtime_ns = out->mtime_ns;
	p.ctime_ns = out->ctime_ns;
	/* after the unlink of its last name: part of the delete */
	return fs_pending_queue(&p, out->nlink == 0 ? KV_OP_RESERVE : 0) == 0;
}

int fs_kill_suidgid(const struct fs_cred *c, struct kv_inode *in)
{
	uint32_t kill = 0;

	if (c->uid == 0 || !S_ISREG(in->mode))
		return 0;
	if (in->mode & S_ISUID)
		kill |= S_ISUID;
	/* without group execute the bit marks mandatory locking, which the
	 * file's group members may keep */
	if ((in->mode & S_ISGID) && ((in->mode & S_IXGRP) || !fs_cred_in_group(c, in->gid)))
		kill |= S_ISGID;
	in->mode &= ~kill;
	return kill != 0;
}

int fs_do_setattr(uint64_t ino, const struct stat *attr, int to_set, int open_file,
		  struct stat *out)
{
	struct setattr_args a = {.ino = ino, .attr = attr, .to_set = to_set};
	int rc;

	if (to_set & FUSE_SET_ATTR_SIZE)
		fs_itable_settled(ino); /* a truncate starts its data anew */
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW))
		atime_mark(ino, fs_now_ns()); /* before: a READ under way is older */
	if (!setattr_lazily(ino, attr, to_set, open_file, &a.out)) {
		/* a truncate frees space: it works when the image is full */
		rc = fs_write(apply_setattr, &a,
			      to_set & FUSE_SET_ATTR_SIZE ? KV_OP_RESERVE : 0);
		if (rc)
			return rc;
	}
	fs_attr_fill(&a.out, out);
	return 0;
}

void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		   struct fuse_file_info *fi)
{
	struct stat st;
	int rc = fs_do_setattr(ino, attr, to_set, fi != NULL, &st);

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, fs.cfg.timeout);
}

int fs_do_statfs(struct statvfs *sv)
{
	struct kv_usage u;
	int rc;

	/* the purge of a file just deleted may still be queued */
	fs_settle();
	rc = kv_usage_get(fs.env, &u);
	if (rc)
		return rc;
	/* as ext4 counts its reserved blocks: free but not available (the
	 * reserve is for deletes); df's Avail is what writes can still use */
	memset(sv, 0, sizeof(*sv));
	sv->f_bsize = 4096;
	sv->f_frsize = 4096;
	/* what fallocate promised counts as used, as its blocks do on ext4 */
	sv->f_blocks = (u.used_bytes + u.promised_bytes + u.avail_bytes + u.reserve_bytes) / 4096;
	sv->f_bfree = (u.avail_bytes + u.reserve_bytes) / 4096;
	sv->f_bavail = u.avail_bytes / 4096;
	sv->f_ffree = u.avail_bytes / 256; /* an inode record and its dirent take about that */
	sv->f_favail = sv->f_ffree;
	sv->f_files = u.inodes + sv->f_ffree;
	sv->f_namemax = KV_NAME_MAX;
	return 0;
}

void fs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	int rc = fs_do_statfs(&sv);

	(void)ino;
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_statfs(req, &sv);
}
