/*
 * pending.c - the changes queued for the next batch and not yet committed,
 * by inode. Two kinds: the times a SETATTR stores lazily with the writeback
 * cache (inode.c, setattr_lazily), and the access time a READ or READDIR
 * sets after its reply (inode.c, fs_maybe_touch_atime).
 *
 * Such a change is answered before its commit, yet a reply that gives the
 * inode's attributes afterwards must follow it (the lazy-times rule). The
 * attributes to reply with come from one place (inode.c, fs_attr_*), which
 * settles here what is pending for the inode first; fsync and fsyncdir
 * settle everything. An entry holds what is queued (which inode, what
 * kind of change, its values), so that this table can become an overlay
 * that reads consult instead of settling.
 *
 *     free --fs_pending_queue--> queued --batch committed (done)--> free
 *                                  |  fs_pending_settle(ino): a batch of
 *                                  +  its own, after every lazy op queued
 *
 * Invariants:
 *  1. An inode has an entry from before its change is queued until the
 *     batch holding the change has committed or rolled back: while it has
 *     none, the store holds every change made to it.
 *  2. n counts the entries in use: while it is 0, every check here is one
 *     atomic load (the read paths ask on every getattr and lookup).
 *  3. The table is fixed (PENDING_MAX entries, each with its store op):
 *     queueing allocates nothing; when it is full the caller makes the
 *     change synchronously.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "fs.h"

#define PENDING_MAX 16

struct entry {
	struct kv_op op;     /* the store's while queued (kv_submit_lazy to done) */
	struct fs_pending p; /* p.ino 0: a free entry */
};

static struct {
	pthread_mutex_t lock;
	atomic_uint n;
	struct entry e[PENDING_MAX];
} table = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void entry_free(struct entry *e)
{
	pthread_mutex_lock(&table.lock);
	assert(e->p.ino != 0 && atomic_load(&table.n) > 0); /* invariant 2 */
	e->p.ino = 0;
	atomic_fetch_sub(&table.n, 1);
	pthread_mutex_unlock(&table.lock);
}

static int apply_pending(kv_txn *t, void *arg)
{
	const struct fs_pending *p = &((struct entry *)arg)->p;
	struct kv_inode in;
	int rc = kv_inode_get(t, p->ino, &in);

	if (rc == -ENOENT)
		return 0; /* freed already */
	if (rc)
		return rc;
	if (p->what & FS_PENDING_TIMES) {
		in.mtime_ns = p->mtime_ns;
		in.ctime_ns = p->ctime_ns;
	}
	if (p->what & FS_PENDING_ATIME)
		in.atime_ns = p->atime_ns;
	return kv_inode_put(t, &in);
}

static void pending_done(void *arg, int rc)
{
	struct entry *e = arg;
	uint64_t ino = e->p.ino;
	int atime = e->p.what & FS_PENDING_ATIME;

	entry_free(e);
	if (rc)
		fs_log("inode %llu: times not stored: %s", (unsigned long long)ino, strerror(-rc));
	else if (atime)
		/* the kernel may hold attributes from before (attributes only:
		 * never waits, safe on the writer's thread) */
		fs_notify_inval(ino, -1, 0);
}

int fs_pending_queue(const struct fs_pending *p, unsigned op_flags)
{
	struct entry *e = NULL;
	int rc;

	assert(p->ino != 0 && p->what != 0);
	pthread_mutex_lock(&table.lock);
	for (int i = 0; i < PENDING_MAX && !e; i++) {
		if (table.e[i].p.ino == 0) {
			e = &table.e[i];
			e->p = *p;
			atomic_fetch_add(&table.n, 1);
		}
	}
	pthread_mutex_unlock(&table.lock);
	if (!e)
		return -EBUSY;
	e->op = (struct kv_op){.apply = apply_pending, .done = pending_done, .arg = e,
			       .flags = op_flags};
	/* lazy: the times a SETATTR stores wait for the next batch; an access
	 * time is queued in order with the changes after it (a utimensat
	 * right after a read must not be overwritten by the read's atime) */
	rc = p->what & FS_PENDING_ATIME ? kv_submit(fs.env, &e->op)
					 : kv_submit_lazy(fs.env, &e->op);
	if (rc)
		entry_free(e);
	return rc;
}

int fs_pending_has(uint64_t ino)
{
	int hit = 0;

	if (atomic_load(&table.n) == 0)
		return 0;
	if (ino == 0)
		return 1;
	pthread_mutex_lock(&table.lock);
	for (int i = 0; i < PENDING_MAX && !hit; i++)
		hit = table.e[i].p.ino == ino;
	pthread_mutex_unlock(&table.lock);
	return hit;
}

static int apply_nothing(kv_txn *t, void *arg)
{
	(void)t;
	(void)arg;
	return 0;
}

int fs_pending_settle(uint64_t ino)
{
	if (!fs_pending_has(ino))
		return 0;
	/* a batch of its own runs after every lazy op queued before it */
	(void)fs_write(apply_nothing, NULL, 0);
	return 1;
}
