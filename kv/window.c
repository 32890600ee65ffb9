/*
 * window.c - acknowledge a change once it is applied, commit by window
 * (durability fsync and none, with window_ms set at open).
 *
 * A power-safe LMDB commit costs a data sync, which is more than a whole
 * FUSE request; so in these modes the writer thread keeps one write
 * transaction open, the window, and ops are applied into it and told at
 * once (done(), or kv_write's return). The window commits when window_ms
 * has passed since its first change, when it grew past what its room
 * allows (win.room), when an op asks for durability (KV_OP_SYNC: fsync,
 * syncfs), at kv_settle and at close. durability=full (window_ms 0) keeps
 * the batches of writer.c, told only after their commit.
 *
 *   writer thread:  begin W ... (ops applied into W, each told) ... commit W,
 *                   begin W' ...
 *   a kv_write:     the role free and W open: apply into a child of W on
 *                   its own thread, told at once (a commit or a sync of W
 *                   too, where the engine lets any thread end W); else
 *                   queued for the writer thread, which applies it into W
 *   a reader:       its snapshot, unless the inode it reads changed in W or
 *                   a commit came since it began: then W itself, with the
 *                   writer's role held until kv_read_end
 *
 * Invariants:
 *  1. W is begun and committed by the writer thread alone (LMDB's write lock
 *     belongs to the thread that took it), or by any holder of the role
 *     where the engine allows it (engine.h: any_thread); any holder of the
 *     writer's role may apply ops into a child of W or read W. The map is resized, and
 *     the room measured, only while W is closed (LMDB: no transaction
 *     open), by the role.
 *  2. Every op runs in a child transaction of W: a failure is rolled back
 *     alone and never touches what was told before. An op short of room
 *     (KV_EMAP_FULL or KV_ETXN_FULL in its child) is not told: W commits,
 *     and the op goes to writer.c's batches, which grow the map or use the
 *     reserve.
 *  3. Read-your-writes: an op marks the inodes whose records it changes
 *     (kv_win_mark, from the record functions) before it is told; W's
 *     commit counts win.gen up, then clears the marks. A reader that began
 *     at win.gen g reads an inode from its snapshot only while the inode is
 *     unmarked and win.gen is still g; every change told before the read
 *     began is then in the snapshot. Marks of a rolled-back op are harmless.
 *  4. A reader never waits for the role while it holds the map lock: it
 *     decides at kv_read_begin_ino (or starts over, kv_read_changed); the
 *     role holder excludes every map resize, so W is read without the map
 *     lock.
 *  5. A commit of W that fails loses what it held, which was told (a W
 *     that told nothing loses nothing: its ops just failed). On a store of
 *     its own (LMDB) the store then takes no more changes (-EROFS; kv_sync
 *     -EIO), and says so once, as ext4's errors=remount-ro does. The room a
 *     window may take is bounded by what the image holds allocated past its
 *     end plus half the host's free space, and by the map, so this needs
 *     another program filling the host meanwhile, or a failing disk.
 *     On a shared store the server went away (a restart, a failover): the
 *     store is at its last commit, as after a kill -9 of the daemon, and
 *     the next W reads the superblock again. So the mount goes on once the
 *     server answers, and reports the loss where a caller relies on it: the
 *     fsyncs and close of a file open across it, and the first fsync of each
 *     inode W changed, fail with EIO (kv_lost_check, as Linux reports a
 *     writeback error); and the inode numbers W gave out are never given
 *     again (win.ino_floor: the kernel may still hold files of W open).
 *  6. On a shared store no op of W is told before W's superblock was
 *     read under the writers' lock and found as env has it, or taken: an
 *     op that ran on a guess (win_run) is run again when the guess was
 *     wrong, its first try rolled back with its child; so an inode number
 *     is never given twice, and no op misses a feature another mount set.
 *  7. On a store many mount, a mount's window is told before its commit
 *     only while the mount holds the store alone (engine.h: lease), which
 *     it asks for at each W's begin: a W is leased or not from begin to
 *     commit, and the lease is given up only between two, when another
 *     mount asks (kv_lease_asked makes W commit first). A mount's default
 *     window there (win.alone_only) is for that time only: not alone, ops run
 *     as batches, told after their commit, as without a window; a window
 *     the mount was given (-o window) stays, and close(2) commits it
 *     (fs/file.c) while the mount is not alone.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv_int.h"
#include "window.h"
#include "writer.h"

/* Pages an op may take besides the blocks it writes: the B-tree pages on
 * the way to what it changes, and its share of the freed pages' record. */
#define OP_PAGES 8
/* A window commits past this much file data in any case: a kill -9 loses
 * at most that much, and LMDB's dirty list (128k pages) never fills. */
#define WIN_BYTES_MAX (64ULL << 20)
/* A window is opened only with this much room (pages; 8 MiB of 4 KiB), and
 * may take a quarter of its room: its commit needs the rest for the pages
 * it copies and the record of those it frees (invariant 5). With less, as
 * on a full image, ops run as writer.c's batches, told after their commit. */
#define WIN_MIN_PAGES 2048
/* Without a window, the writer thread looks for room again this often. */
#define WIN_RETRY_MS 100

/* ------------------------------------------------------------ marks -- */

static uint64_t mark_bit(uint64_t ino)
{
	ino ^= ino >> 29;
	ino *= 0xbf58476d1ce4e5b9ULL;
	return (ino ^ (ino >> 32)) % KV_WIN_BITS;
}

void kv_win_mark(kv_txn *t, uint64_t ino)
{
	kv_env *e = t->env;
	uint64_t b;

	if (e->eng->shared && t->write)
		kv_change_ino(e, ino); /* for the other mounts (change.c) */
	if (!t->win_op)
		return;
	b = mark_bit(ino);
	atomic_fetch_or_explicit(&e->win.bits[b / 64], 1ULL << (b % 64), memory_order_relaxed);
}

static int marked(kv_env *e, uint64_t ino)
{
	uint64_t b = mark_bit(ino);

	return (atomic_load_explicit(&e->win.bits[b / 64], memory_order_acquire) >> (b % 64)) & 1;
}

/* A commit: readers that began before it must not trust an unmarked inode
 * (invariant 3: the count first, the marks after). */
static void marks_clear(kv_env *e)
{
	atomic_fetch_add_explicit(&e->win.gen, 1, memory_order_release);
	for (size_t i = 0; i < KV_WIN_BITS / 64; i++)
		atomic_store_explicit(&e->win.bits[i], 0, memory_order_release);
}

int kv_read_changed(kv_txn *t, uint64_t ino)
{
	kv_env *e = t->env;

	if (!e->win.ms || t->write || t->in_window)
		return 0;
	return marked(e, ino) ||
	       atomic_load_explicit(&e->win.gen, memory_order_acquire) != t->gen;
}

/* ------------------------------------------------------------- role -- */

/* Take the writer's role, waiting for it (q_lock held; the caller holds
 * no read transaction: invariant 4). */
static void role_wait_take(kv_env *e)
{
	while (e->w.busy) {
		e->w.role_waiters++;
		pthread_cond_wait(&e->w.role_cond, &e->w.q_lock);
		e->w.role_waiters--;
	}
	kv_role_take(e);
}

/* --------------------------------------------------------- reading W -- */

int kv_read_begin_window(kv_env *e, kv_txn **out)
{
	int rc;

	if (!e->win.ms || e->readonly)
		return kv_read_begin(e, out);
	pthread_mutex_lock(&e->w.q_lock);
	role_wait_take(e);
	if (!e->win.txn) {
		/* no window (its commit failed, or closing): the snapshot has
		 * everything, and the role keeps the map still */
		pthread_mutex_unlock(&e->w.q_lock);
		rc = kv_read_begin(e, out);
		pthread_mutex_lock(&e->w.q_lock);
		if (rc == 0)
			(*out)->in_window = 2; /* role held, own snapshot */
		else
			kv_role_release_locked(e);
		pthread_mutex_unlock(&e->w.q_lock);
		return rc;
	}
	pthread_mutex_unlock(&e->w.q_lock);
	return kv_reader_on(e, e->win.txn, out);
}

int kv_read_begin_ino(kv_env *e, uint64_t ino, kv_txn **out)
{
	uint64_t gen;
	int rc;

	if (!e->win.ms || e->readonly)
		return kv_read_begin(e, out);
	gen = atomic_load_explicit(&e->win.gen, memory_order_acquire);
	if (!marked(e, ino)) {
		rc = kv_read_begin(e, out);
		if (rc)
			return rc;
		(*out)->gen = gen; /* as of before the snapshot (invariant 3) */
		if (!kv_read_changed(*out, ino))
			return 0;
		kv_read_end(*out); /* it changed, or a commit came: the window has it */
	}
	return kv_read_begin_window(e, out);
}

void kv_win_leave(kv_txn *t)
{
	kv_env *e = t->env;

	for (int i = 0; i < KV_NDB; i++) {
		if (t->wcur[i])
			e->eng->cur_close(e, t->wcur[i]);
		t->wcur[i] = NULL;
	}
	t->in_window = 0;
	pthread_mutex_lock(&e->w.q_lock);
	kv_role_release_locked(e);
	pthread_mutex_unlock(&e->w.q_lock);
}

/* ------------------------------------------------------- applying ops -- */

enum applied { APPLIED, FAILED, SHORT };

/* W told nothing yet and cannot go on: it goes, the next op opens another. */
static void win_drop(kv_env *e)
{
	e->eng->txn_abort(e, e->win.txn);
	e->win.txn = NULL;
	e->win.dirty = 0;
}

/* Run op in a child of W, left open in t. On a shared store's fresh W
 * (win.fresh) the writers' lock comes first and the superblock is read
 * again (the inode counter may have moved): with the op's own reads, one
 * wait on a server, when the last look found it as env had it
 * (win.super_guess); then it is checked after the op, which runs again on the
 * superblock W holds if it moved (invariant 6). -errno, W dropped when it
 * cannot go on (t.txn NULL). */
static int win_run(kv_env *e, struct kv_op *op, kv_txn *t, uint64_t bytes, int over)
{
	int guess = 0, mrc, rc;

	t->txn = NULL; /* what the caller looks at when W could not go on */
	if (e->win.fresh) {
		guess = e->win.super_guess;
		rc = guess ? kv_super_lock(e, e->win.txn) : kv_super_reload(e, e->win.txn);
		if (rc)
			return win_drop(e), rc;
		e->win.fresh = 0;
		/* W holds the others' writers now: it commits by window even if
		 * its ops change nothing (an atime already late enough) */
		e->win.dirty = 1;
		clock_gettime(CLOCK_MONOTONIC, &e->win.start);
	}
	for (;;) {
		*t = (kv_txn){.env = e, .write = 1, .over = over, .win_op = 1};
		mrc = e->eng->txn_begin(e, e->win.txn, 0, &t->txn);
		if (mrc) {
			t->txn = NULL;
			if (guess) /* the superblock never checked */
				win_drop(e);
			return kv_err(NULL, mrc, "begin op");
		}
		kv_icache_op_begin(e);
		rc = op->apply(t, op->arg);
		kv_txn_close_cursors(t);
		if (!guess || kv_super_check(e, t->txn) == 1)
			return rc;
		/* it moved (another mount's commit, or the op's own store of
		 * it), or could not be read: the try goes with its child, and
		 * the op runs again on W's (its own store gone) */
		guess = e->win.super_guess = 0;
		e->eng->txn_abort(e, t->txn);
		t->txn = NULL;
		e->w.wb_bytes = bytes;
		rc = kv_super_check(e, e->win.txn);
		if (rc < 0)
			return win_drop(e), rc;
		e->w.next_ino = e->super.next_ino; /* what the try took goes with it */
	}
}

/* Apply op into a child of W (the role held): APPLIED (W changed, op->rc 0),
 * FAILED (op->rc says why, W as it was) or SHORT (not applied: W must
 * commit first, invariant 2). */
static enum applied win_apply(kv_env *e, struct kv_op *op)
{
	uint64_t bytes = e->w.wb_bytes;
	int over, rc;
	kv_txn t;

	assert(kv_role_mine(e) && e->win.txn);
	if (op->apply == kv_apply_nothing)
		return op->rc = 0, APPLIED; /* a commit's or a sync's mark: no child, no lock */
	over = kv_eroom_over(e, e->win.txn);
	if (over && !(op->flags & (KV_OP_RESERVE | KV_OP_OVERWRITE)))
		return op->rc = -ENOSPC, FAILED;
	rc = win_run(e, op, &t, bytes, over);
	if (!t.txn)
		return op->rc = rc, FAILED;
	if (rc == 0 && !t.map_full && !t.txn_full) {
		rc = kv_err(&t, e->eng->txn_commit(e, t.txn), "commit op");
		if (rc == 0)
			kv_icache_op_done(e);
	} else {
		e->eng->txn_abort(e, t.txn);
	}
	if (t.map_full || t.txn_full) {
		e->w.wb_bytes = bytes;
		op->rc = 0;
		return SHORT;
	}
	op->rc = rc;
	if (rc) {
		e->w.wb_bytes = bytes;
		return FAILED;
	}
	if (!e->win.dirty) {
		e->win.dirty = 1;
		clock_gettime(CLOCK_MONOTONIC, &e->win.start);
	}
	e->win.told = 1; /* its caller is told next */
	e->win.bytes += e->w.wb_bytes - bytes;
	e->win.pages += (e->w.wb_bytes - bytes) / e->page_size + 1 + OP_PAGES;
	return APPLIED;
}

/* Whether W has taken the room it may take before it commits. */
static int win_full(const kv_env *e)
{
	return e->win.pages >= e->win.room || e->win.bytes >= WIN_BYTES_MAX;
}

static int win_close(kv_env *e, int sync);
static void win_open(kv_env *e);
static void win_fail(kv_env *e, int rc);

/* A commit (and sync) of W asked by a thread that holds the role: here,
 * not by the writer thread (invariant 1: the engine allows it), which
 * saves two thread wakeups a close(2) on a shared store (file.c). */
static int win_commit_here(kv_env *e, int sync)
{
	int rc = win_close(e, sync);

	if (rc) {
		win_fail(e, rc);
		return -EIO; /* not durable, or lost (as win_turn tells) */
	}
	win_open(e);
	return 0;
}

int kv_win_lead(kv_env *e, kv_apply_fn apply, void *arg, unsigned flags, int *rc)
{
	struct kv_op op = {.apply = apply, .arg = arg, .flags = flags};
	int commit = flags & (KV_OP_SYNC | KV_OP_COMMIT);
	enum applied how;

	pthread_mutex_lock(&e->w.q_lock);
	/* lazy ops queued (an atime after a read, pending.c) go first: the
	 * writer thread's batch takes them before this op, which applied here
	 * would overtake them (a utimensat after a read lost to its atime) */
	/* a fresh W's first op may drop W (win_run): invariant 1 */
	if (e->w.busy || e->w.q_head || e->w.lazy_head || e->w.q_stop || !e->win.txn || e->win.commit ||
	    e->win.failed || (e->win.fresh && !e->eng->any_thread) ||
	    (commit && !(e->eng->any_thread && apply == kv_apply_nothing))) {
		pthread_mutex_unlock(&e->w.q_lock);
		return 0; /* the writer thread's */
	}
	kv_role_take(e);
	pthread_mutex_unlock(&e->w.q_lock);
	if (commit) {
		*rc = win_commit_here(e, flags & KV_OP_SYNC);
		pthread_mutex_lock(&e->w.q_lock);
		kv_role_release_locked(e);
		pthread_mutex_unlock(&e->w.q_lock);
		return 1;
	}
	how = win_apply(e, &op);
	pthread_mutex_lock(&e->w.q_lock);
	if (how == APPLIED && win_full(e))
		e->win.commit = 1;
	if (!e->win.txn) /* dropped (win_run): the writer thread opens the next */
		pthread_cond_signal(&e->w.q_cond);
	kv_role_release_locked(e);
	pthread_mutex_unlock(&e->w.q_lock);
	if (how == SHORT)
		return 0; /* W commits first: queued */
	*rc = op.rc;
	return 1;
}

/* -------------------------------------------------- the writer thread -- */

void kv_lease_asked(kv_env *e)
{
	atomic_store(&e->win.lease_asked, 1);
	if (!e->win.ms || !e->w.running)
		return; /* no window: no lease either (win_open takes it) */
	pthread_mutex_lock(&e->w.q_lock);
	e->win.commit = 1;
	pthread_cond_signal(&e->w.q_cond);
	pthread_mutex_unlock(&e->w.q_lock);
}

/* Invariant 7: the lease given up when asked for, taken when it can be.
 * 0 when W is not to open: the store is not this mount's alone, and its
 * window is only for then (win.alone_only). */
static int win_lease(kv_env *e)
{
	int alone;

	if (!e->eng->lease || !e->mount)
		return 1;
	if (atomic_exchange(&e->win.lease_asked, 0) && atomic_load(&e->win.alone)) {
		atomic_store(&e->win.alone, 0);
		e->eng->lease(e, 0);
	}
	alone = e->eng->lease(e, 1);
	atomic_store(&e->win.alone, alone);
	return alone || !e->win.alone_only;
}

/* Begin W (the writer thread, the role held, no transaction open): the map
 * grown first when W's room would be small; none when the room stays below
 * WIN_MIN_PAGES (batches meanwhile), nor while a shared store is not the
 * mount's alone when its window is only for then (invariant 7). */
static void win_open(kv_env *e)
{
	uint64_t room;
	int mrc;

	assert(kv_role_mine(e) && !e->win.txn && !e->w.txn);
	if (!win_lease(e))
		return; /* not alone: batches, told after their commit */
	room = kv_eroom_window(e, 2 * WIN_BYTES_MAX);
	if (room / e->page_size < WIN_MIN_PAGES)
		return; /* near full: batches, told after their commit */
	e->win.room = room / 4 / e->page_size;
	mrc = e->eng->txn_begin(e, NULL, 0, &e->win.txn);
	if (mrc) {
		e->win.txn = NULL;
		kv_err(NULL, mrc, "begin window");
		return;
	}
	/* on a store other mounts write, W takes their writers' lock with its
	 * first statement (engine.h: shared), so it reads the superblock at
	 * its first op, not now: an idle W holds nothing of theirs */
	e->win.fresh = e->eng->shared;
	kv_change_begin(e);
	kv_icache_top_begin(e);
	e->win.dirty = e->win.told = 0;
	e->win.bytes = e->win.pages = 0;
}

/* Commit W (the writer thread, the role held); sync when asked. 0, or the
 * error that lost it (invariant 5). */
static int win_close(kv_env *e, int sync)
{
	kv_txn t = {.env = e, .txn = e->win.txn, .write = 1};
	uint64_t next_ino = e->w.next_ino, avail;
	int mrc, rc = 0;

	assert(kv_role_mine(e) && e->win.txn);
	if (!e->win.dirty && next_ino == e->super.next_ino) {
		e->eng->txn_abort(e, e->win.txn); /* nothing to commit */
		e->win.txn = NULL;
		return sync && e->w.unsynced ? kv_err(NULL, e->eng->sync(e), "sync") : 0;
	}
	if (next_ino != e->super.next_ino) {
		struct kv_super s = e->super;

		s.next_ino = next_ino;
		rc = kv_super_store(&t, &s);
	}
	avail = kv_eroom_avail(e, e->win.txn);
	if (rc == 0) {
		kv_unwritten_prepare(e, e->win.txn);
		rc = e->eng->shared && e->chg.len ? kv_change_publish(e, e->win.txn) : 0;
	}
	if (rc) {
		e->eng->txn_abort(e, e->win.txn);
	} else {
		mrc = e->eng->txn_commit(e, e->win.txn);
		if (mrc == EIO && kv_disk_full(e))
			mrc = ENOSPC; /* LMDB says EIO for a short write */
		rc = mrc ? kv_err(NULL, mrc, "commit window") : 0;
	}
	e->win.txn = NULL;
	e->win.dirty = 0;
	if (rc)
		return rc;
	e->super.next_ino = next_ino;
	atomic_store(&e->room_avail, avail);
	kv_icache_top_done(e);
	marks_clear(e);
	kv_after_commit(e);
	if (sync && e->durability != KV_DURABLE_FULL) {
		rc = kv_err(NULL, e->eng->sync(e), "sync");
		if (rc == 0)
			e->w.unsynced = 0;
	}
	return rc;
}

/* The commit of told changes failed: they are lost (invariant 5). */
static void win_fail(kv_env *e, int rc)
{
	if (e->eng->shared) {
		if (e->w.next_ino > e->win.ino_floor)
			e->win.ino_floor = e->w.next_ino; /* what W gave out, W's commit lost */
		kv_change_lost(e);
		kv_log("%s: a commit failed (%s) after its changes were acknowledged: what was "
		       "acknowledged since the last commit is lost; the fsyncs of the files it "
		       "changed, and of those open now, report it; changes are taken again once "
		       "the store answers",
		       e->path, strerror(-rc));
		return;
	}
	kv_log("%s: a commit failed (%s) after its changes were acknowledged: what was "
	       "acknowledged since the last commit is lost; no more changes are taken (unmount, "
	       "check the host filesystem, mount again)", e->path, strerror(-rc));
	pthread_mutex_lock(&e->w.q_lock);
	e->win.failed = rc;
	pthread_mutex_unlock(&e->w.q_lock);
}

/* Whether W's time is up, or when it will be (*ms left). */
static int win_due(const kv_env *e, unsigned *ms)
{
	struct timespec now;
	int64_t left;

	clock_gettime(CLOCK_MONOTONIC, &now);
	left = (int64_t)e->win.ms * 1000000 -
	       ((int64_t)(now.tv_sec - e->win.start.tv_sec) * 1000000000 +
		(now.tv_nsec - e->win.start.tv_nsec));
	*ms = left > 0 ? (unsigned)((left + 999999) / 1000000) : 0;
	return left <= 0;
}

/* The ops of batch into W, or failed after a lost commit. Ops that asked
 * for durability go to *sync and ops short of room to *short_ops, untold;
 * the rest are told. */
static void win_take(kv_env *e, struct kv_op *batch, struct kv_op **sync,
		     struct kv_op **short_ops)
{
	struct kv_op **st = sync, **sh = short_ops;

	while (batch) {
		struct kv_op *op = batch;
		enum applied how = FAILED;

		batch = op->next;
		op->next = NULL;
		if (e->win.failed || !e->win.txn)
			op->rc = e->win.failed ? -EROFS : -EIO;
		else
			how = win_apply(e, op);
		if (how == SHORT) {
			*sh = op;
			sh = &op->next;
		} else if (op->flags & (KV_OP_SYNC | KV_OP_COMMIT)) {
			*st = op; /* told after the commit (and the sync) */
			st = &op->next;
		} else if (op->done) {
			op->done(op->arg, op->rc);
		}
	}
}

/* Whether an op of the list asked for a sync. */
static int any_sync(const struct kv_op *op)
{
	for (; op; op = op->next)
		if (op->flags & KV_OP_SYNC)
			return 1;
	return 0;
}

/* Commit W, tell the ops that waited for it, run the ops short of room as
 * batches, begin the next W (the writer thread, the role held). */
static void win_turn(kv_env *e, struct kv_op *sync, struct kv_op *short_ops, int stop)
{
	int rc = 0;

	if (e->win.txn) {
		int told = e->win.told;

		rc = win_close(e, any_sync(sync) || stop);
		if (rc && told)
			win_fail(e, rc);
	} else if (e->win.failed) {
		rc = -EIO;
	}
	while (sync) {
		struct kv_op *op = sync;

		sync = op->next;
		if (op->rc == 0 && rc)
			op->rc = -EIO; /* not durable, or lost */
		if (op->done)
			op->done(op->arg, op->rc);
	}
	if (short_ops && !e->win.failed)
		kv_run_batch(e, short_ops);
	else
		kv_finish_all(short_ops, -EROFS);
	if (!e->win.failed && !stop)
		win_open(e);
}

/* Wait for work (q_lock held): 1 with *commit set when W must commit now, 0
 * to end. Without a window (near full) it looks again for room after a
 * while. */
static int win_wait(kv_env *e, int *commit)
{
	unsigned ms;
	int look = 0;

	for (;;) {
		if (e->w.busy) {
			pthread_cond_wait(&e->w.q_cond, &e->w.q_lock);
			continue;
		}
		*commit = e->win.commit || e->w.q_stop;
		if (e->w.q_head || e->w.lazy_head || *commit || look)
			return 1;
		if (e->win.dirty && e->win.txn) { /* read while nobody holds the role */
			if (win_due(e, &ms)) {
				*commit = 1;
				return 1;
			}
			kv_timed_wait(e, ms, KV_W_WINDOW);
		} else if (!e->win.txn && !e->win.failed) {
			/* look for room again, once the role is free */
			look = kv_timed_wait(e, WIN_RETRY_MS, KV_W_WINDOW);
		} else if (e->w.unsynced && e->w.sync_interval_ms) {
			if (kv_timed_wait(e, e->w.sync_interval_ms, KV_W_SYNC))
				kv_idle_sync(e);
		} else {
			pthread_cond_wait(&e->w.q_cond, &e->w.q_lock);
		}
	}
}

/* The ops of batch without a window: batches, told after their commit, or
 * refused after a lost commit (the role held). */
static void batch_take(kv_env *e, struct kv_op *batch)
{
	if (!e->win.failed) {
		kv_run_batch(e, batch);
		return;
	}
	while (batch) {
		struct kv_op *op = batch;

		batch = op->next;
		op->next = NULL;
		kv_finish_all(op, op->flags & (KV_OP_SYNC | KV_OP_COMMIT) ? -EIO : -EROFS);
	}
}

void *kv_window_main(void *arg)
{
	kv_env *e = arg;
	int commit;

	pthread_mutex_lock(&e->w.q_lock);
	kv_role_take(e);
	pthread_mutex_unlock(&e->w.q_lock);
	win_open(e);
	pthread_mutex_lock(&e->w.q_lock);
	e->win.ready = 1; /* kv_writer_start waits for it */
	kv_role_release_locked(e);
	pthread_cond_broadcast(&e->w.role_cond);
	while (win_wait(e, &commit)) {
		struct kv_op *batch = kv_take_queue(e), *sync = NULL, *short_ops = NULL;
		int stop = e->w.q_stop && !batch;
		unsigned ms;

		e->win.commit = 0;
		kv_role_take(e);
		pthread_mutex_unlock(&e->w.q_lock);
		if (!e->win.txn && !e->win.failed && !stop)
			win_open(e);
		if (e->win.txn) {
			win_take(e, batch, &sync, &short_ops);
			if (commit || sync || short_ops || stop || win_full(e) ||
			    (e->win.dirty && win_due(e, &ms)))
				win_turn(e, sync, short_ops, stop);
		} else if (batch) {
			batch_take(e, batch);
		}
		pthread_mutex_lock(&e->w.q_lock);
		kv_role_release_locked(e);
		if (stop)
			break;
	}
	pthread_mutex_unlock(&e->w.q_lock);
	return NULL;
}
