/*
 * writer.c - the one writer: ops applied in batches, one commit per batch
 * (group commit), by whichever thread holds the writer's role.
 *
 * kv_write() from a thread that finds the role free and nothing queued takes
 * the role and runs its op itself (the leader): no trip to another thread
 * and back when writes do not overlap, which is most of a serial workload.
 * Ops that arrive while the role is held queue up; the writer thread takes
 * them all as one batch when the role comes free (kv_submit() always queues).
 * The writer thread also makes idle commits durable after sync_interval_ms.
 * After each KV_FLUSH_KICK bytes of file data the role kicks the engine's
 * flusher (engine.h contract 9: LMDB's thread keeps the host filesystem
 * ahead of the commits).
 *
 * A batch:
 *
 *   begin parent txn
 *   for each op: begin child; rc = apply(); rc ? abort child : commit child
 *   store the superblock if the inode counter moved
 *   commit parent; sync if an op asked (KV_OP_SYNC) and the mode needs it
 *   done(op, rc) for each op
 *
 * Invariants:
 *  1. done() of an op (or a leader's return) comes only after the commit that
 *     holds it returned, so nobody is told of a change before it is visible
 *     (and durable, in the modes and for the ops that ask).
 *  2. An op that fails is rolled back alone (its child txn is aborted); the
 *     ops before and after it are unaffected.
 *  3. KV_EMAP_FULL (from an op or from the commit) aborts everything not yet
 *     committed; the map grows and the uncommitted ops are replayed. When the
 *     map cannot grow, the op that needed the room gets -ENOSPC and the
 *     others are retried without it. KV_ETXN_FULL splits the batch the same
 *     way. So nothing committed is ever lost and one op cannot fail another.
 *  4. done() may free the op: the writer reads op->next before calling it.
 *  5. At most one thread holds the role (w.busy, under q_lock); batches, the
 *     idle sync and the role-only fields (unsynced, next_ino, wbuf, ibuf) are
 *     touched only with it held. The writer thread ends only when the queue
 *     is empty and the role free, so kv_writer_stop() waits for a leader.
 *  6. A thread calling kv_write() holds no read txn (a map growth waits for
 *     every reader to finish).
 *  7. The batch transaction (e->w.txn while open) is begun and ended by the
 *     role alone, one at a time; the map grows, the room is measured again
 *     and the role is let go only between batches.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "kv_int.h"
#include "writer.h"

#ifndef NDEBUG
/* The env whose writer's role this thread holds (invariant 5), for
 * assert() in debug builds. */
static _Thread_local const kv_env *role_held;

int kv_role_mine(const kv_env *e)
{
	return role_held == e || !e->w.running;
}
#endif

/* Take the writer's role (q_lock held; the role is free). */
void kv_role_take(kv_env *e)
{
	assert(!e->w.busy);
	e->w.busy = 1;
#ifndef NDEBUG
	role_held = e;
#endif
}

/* Let go of the role this thread holds (q_lock held). */
static void role_drop(kv_env *e)
{
	assert(e->w.busy && kv_role_mine(e) && !e->w.txn);
	e->w.busy = 0;
#ifndef NDEBUG
	role_held = NULL;
#endif
}

int kv_txn_reserved(const kv_txn *t)
{
	assert(!t->write || kv_role_mine(t->env));
	return t->write && (t->over || t->env->w.in_reserve);
}

void kv_finish_all(struct kv_op *op, int rc)
{
	while (op) {
		struct kv_op *next = op->next;

		op->rc = rc;
		if (op->done)
			op->done(op->arg, rc);
		op = next;
	}
}

static void finish(struct kv_op *from, struct kv_op *to)
{
	while (from != to) {
		struct kv_op *next = from->next;
		if (from->done)
			from->done(from->arg, from->rc);
		from = next;
	}
}

enum stop_reason { STOP_NONE, STOP_MAP_FULL, STOP_TXN_FULL, STOP_FAILED };

/* Apply ops from start until the end or an op that needs more room. Returns
 * the first op not applied (NULL: all) and why it stopped.
 *
 * flat: every op runs in the parent txn itself, the fast way (a child txn
 * costs a few microseconds and a large allocation). The first op that fails
 * stops it (STOP_FAILED): the parent then holds partial changes and must be
 * aborted. Otherwise each op runs in a child txn of its own, so a failure is
 * rolled back alone. */
static struct kv_op *apply_ops(kv_env *e, kv_etxn *parent, struct kv_op *start, int flat,
			       enum stop_reason *why)
{
	struct kv_op *op;

	*why = STOP_NONE;
	for (op = start; op; op = op->next) {
		kv_txn t = {.env = e, .write = 1, .over = kv_eroom_over(e, parent)};
		int mrc = 0;

		assert(op->apply);
		if (t.over && !(op->flags & (KV_OP_RESERVE | KV_OP_OVERWRITE))) {
			op->rc = -ENOSPC; /* the image is full but for the reserve */
			if (flat) {
				*why = STOP_FAILED;
				return op;
			}
			continue;
		}
		if (flat)
			t.txn = parent;
		else
			mrc = e->eng->txn_begin(e, parent, 0, &t.txn);
		if (mrc) {
			op->rc = kv_err(&t, mrc, "begin op");
		} else {
			kv_icache_op_begin(e);
			op->rc = op->apply(&t, op->arg);
			kv_txn_close_cursors(&t);
			if (flat) {
				if (op->rc && !t.map_full && !t.txn_full) {
					*why = STOP_FAILED;
					return op;
				}
			} else if (op->rc == 0 && !t.map_full && !t.txn_full) {
				op->rc = kv_err(&t, e->eng->txn_commit(e, t.txn), "commit op");
			} else {
				e->eng->txn_abort(e, t.txn);
			}
			if (op->rc == 0 && !t.map_full && !t.txn_full)
				kv_icache_op_done(e); /* its child committed, or flat: in parent */
		}
		if (t.map_full) {
			*why = STOP_MAP_FULL;
			return op;
		}
		if (t.txn_full) {
			*why = STOP_TXN_FULL;
			return op;
		}
	}
	return NULL;
}

static void run_batch(kv_env *e, struct kv_op *start);

static int apply_touch(kv_txn *t, void *arg)
{
	struct kv_super s = t->env->super;

	(void)arg;
	s.next_ino = t->env->w.next_ino;
	return kv_super_store(t, &s);
}

/* A commit of the superblock alone, in the reserve: the pages the commit
 * before it freed serve the next change (LMDB reuses freed pages from the
 * second commit after the one that freed them). */
static void run_touch(kv_env *e)
{
	struct kv_op touch = {.apply = apply_touch, .flags = KV_OP_RESERVE};
	int in_reserve = e->w.in_reserve;

	e->w.in_reserve = 1;
	run_batch(e, &touch);
	e->w.in_reserve = in_reserve;
	e->w.touched = 1;
}

/* An op the map at the cap cannot hold (engine.h contract 9; LMDB's
 * room.c). First the pages the last commit freed are made to serve
 * (run_touch) and the op is tried again;
 * then one that frees space (KV_OP_RESERVE) or replaces what it writes
 * (KV_OP_OVERWRITE) runs alone in the reserve, followed by a touch so that
 * what it freed serves the next change at once. Any other op fails:
 * -ENOSPC, or -EFBIG when it is too large for one transaction (txn_full).
 * Calls op's done(): the caller reads op->next before. */
static void run_short(kv_env *e, struct kv_op *op, int txn_full)
{
	op->next = NULL;
	if (!txn_full && !e->w.touched && !e->w.in_reserve) {
		run_touch(e);
		kv_eroom_update(e); /* the map back to the cap */
		run_batch(e, op); /* short again: back here, touched */
		return;
	}
	if (txn_full || !(op->flags & (KV_OP_RESERVE | KV_OP_OVERWRITE)) || e->w.in_reserve) {
		op->rc = txn_full ? -EFBIG : -ENOSPC;
		finish(op, NULL);
		return;
	}
	e->w.in_reserve = 1;
	run_batch(e, op);
	run_touch(e);
	e->w.in_reserve = 0;
	kv_eroom_update(e); /* the map back to the cap */
}

/* Run the ops from start to stop (exclusive) each in a batch of its own:
 * together they did not fit one commit. */
static void run_each(kv_env *e, struct kv_op *start, struct kv_op *stop)
{
	while (start != stop) {
		struct kv_op *next = start->next;

		start->next = NULL;
		run_batch(e, start);
		start = next;
	}
}

/* What a commit was short of (commit_batch). */
enum short_of {
	SHORT_NONE,
	SHORT_MAP,  /* KV_EMAP_FULL: the record of the freed pages needs pages too */
	SHORT_HOST, /* the host filesystem is full, or the superblock did not fit */
};

/* Store the superblock if the inode counter moved, then commit parent (or
 * abort it, when the store failed). 0; -ENOSPC with *why set when the map
 * or the host filesystem was short of room; KV_EGUESS when a guessed read
 * was wrong (nothing done); another negative errno. */
static int commit_batch(kv_env *e, kv_etxn *parent, enum short_of *why)
{
	kv_txn t = {.env = e, .txn = parent, .write = 1};
	uint64_t next_ino = e->w.next_ino, avail;
	int mrc, rc = 0;

	*why = SHORT_NONE;
	assert(e->w.txn == parent);
	if (next_ino != e->super.next_ino) {
		struct kv_super s = e->super;

		s.next_ino = next_ino;
		rc = kv_super_store(&t, &s);
	}
	if (rc == 0 && e->eng->shared && e->chg.len)
		rc = kv_change_publish(e, parent); /* for the other mounts (change.c) */
	if (rc) {
		e->eng->txn_abort(e, parent);
		e->w.txn = NULL;
		if (rc == -ESTALE)
			return KV_EGUESS; /* a check the store read on the way failed */
		if (t.map_full)
			*why = SHORT_MAP;
		else if (rc == -ENOSPC)
			*why = SHORT_HOST;
		return rc;
	}
	avail = kv_eroom_avail(e, parent);
	kv_unwritten_prepare(e, parent);
	mrc = e->eng->txn_commit(e, parent);
	e->w.txn = NULL;
	if (mrc == 0) {
		e->super.next_ino = next_ino;
		atomic_store(&e->room_avail, avail);
		kv_icache_top_done(e);
		return 0;
	}
	if (mrc == KV_EGUESS)
		return mrc; /* commit_ops runs it again */
	if (mrc == KV_EMAP_FULL)
		*why = SHORT_MAP;
	else if (mrc == ENOSPC || (mrc == EIO && kv_disk_full(e)))
		*why = SHORT_HOST; /* LMDB says EIO for a short write */
	else
		return kv_err(NULL, mrc, "commit batch");
	return -ENOSPC;
}

/* A commit was short of room: 1 when the batch should be run again, because
 * the map could grow, or because the host filled up and the cap came down
 * (once per batch), so that the ops that do not fit under it fail alone or
 * go to the reserve. */
static int commit_short(kv_env *e, enum short_of why, int *host_retried)
{
	if (why == SHORT_MAP)
		return kv_emap_grow(e) == 0;
	if (*host_retried)
		return 0;
	*host_retried = 1;
	return kv_eroom_update(e);
}

/* After the commit of the ops from start to stop: the role's accounts, the
 * flusher's kick, the room, and the sync the ops asked for (the sync's
 * error goes to the ops that asked). */
void kv_after_commit(kv_env *e)
{
	assert(kv_role_mine(e) && !e->w.txn && !e->win.txn);
	e->w.touched = 0;
	e->w.unsynced = e->durability != KV_DURABLE_FULL;
	if (e->w.wb_bytes >= KV_FLUSH_KICK) {
		/* at each multiple of 8 MiB, not 8 MiB after a kick */
		e->w.wb_bytes -= KV_FLUSH_KICK;
		if (e->eng->flusher_kick)
			e->eng->flusher_kick(e);
	}
	if (kv_unwritten_publish(e)) {
		/* what fallocate promised changed: the room for the rest, from
		 * the extent on (a lower bound), until the next commit counts */
		atomic_store(&e->room_avail, 0);
		kv_eroom_update(e);
	} else {
		kv_eroom_check(e);
	}
}

static void after_commit(kv_env *e, struct kv_op *start, struct kv_op *stop)
{
	struct kv_op *op;
	int rc, sync = 0;

	kv_after_commit(e);
	for (op = start; op != stop; op = op->next)
		sync |= op->flags & KV_OP_SYNC;
	if (!sync || e->durability == KV_DURABLE_FULL)
		return;
	rc = kv_err(NULL, e->eng->sync(e), "sync");
	if (rc) {
		for (op = start; op != stop; op = op->next)
			if ((op->flags & KV_OP_SYNC) && op->rc == 0)
				op->rc = rc;
	} else {
		e->w.unsynced = 0;
	}
}

/* How run_batch goes on: a replay is flat until it stopped short once, and
 * the host filling up lowers the cap once per batch. */
struct batch {
	int flat;
	int host_retried;
	int unguessed;     /* a try on guesses failed: the rest of it reads (engine.h) */
	uint64_t wb_bytes; /* e->w.wb_bytes before the try */
};

/* The try from start on is dropped before anything was told: the
 * superblock is read again, the inode numbers it took are given again (not
 * below those a lost window gave out: window.c invariant 5), and the bytes
 * it wrote are counted once, by the next try (wb_bytes: what it was). */
static struct kv_op *try_again(kv_env *e, struct kv_op *start, uint64_t wb_bytes)
{
	e->win.super_guess = 0;
	e->w.next_ino = e->super.next_ino > e->win.ino_floor ? e->super.next_ino : e->win.ino_floor;
	e->w.wb_bytes = wb_bytes;
	for (struct kv_op *op = start; op; op = op->next)
		op->rc = 0;
	return start;
}

/* The flat try of the ops from start on stopped short (why) and was
 * aborted: a lone op that failed is done (its rc says why); after a map
 * growth the batch is replayed flat, else with a child txn per op. Returns
 * the op to go on from (NULL: done). */
static struct kv_op *flat_stopped(kv_env *e, struct kv_op *start, enum stop_reason why,
				  struct batch *b)
{
	if (why == STOP_FAILED && !start->next) {
		finish(start, NULL);
		return NULL;
	}
	if (why == STOP_MAP_FULL && kv_emap_grow(e) == 0)
		return start;
	b->flat = 0;
	for (struct kv_op *op = start; op; op = op->next)
		op->rc = 0;
	return start;
}

/* Commit the ops from start to stop, applied in parent (the op at stop
 * needed more room, why), and tell them. Returns the op to go on from:
 * start again for a replay, stop or the one after it. */
static struct kv_op *commit_ops(kv_env *e, kv_etxn *parent, struct kv_op *start,
				struct kv_op *stop, enum stop_reason why, struct batch *b)
{
	enum short_of short_of;
	int rc = commit_batch(e, parent, &short_of);

	if (rc == KV_EGUESS) { /* nothing was told: again, reading */
		b->unguessed = 1;
		return try_again(e, start, b->wb_bytes);
	}
	if (short_of != SHORT_NONE) {
		if (commit_short(e, short_of, &b->host_retried))
			return start; /* replay from start */
		if (start->next != stop)
			run_each(e, start, stop);
		else
			run_short(e, start, 0);
		b->flat = 0;
		return stop;
	}
	if (rc) {
		for (struct kv_op *op = start; op != stop; op = op->next)
			if (op->rc == 0)
				op->rc = rc;
	} else {
		after_commit(e, start, stop);
	}
	finish(start, stop);
	if (stop && why == STOP_MAP_FULL && kv_emap_grow(e) != 0) {
		/* the op that needed room fails, or takes the reserve; the
		 * rest go on */
		struct kv_op *next = stop->next;
		run_short(e, stop, 0);
		stop = next;
	}
	return stop;
}

/* One try at the ops from start on, in a batch transaction. Returns the op
 * to go on from (start again for a replay), NULL when all are done. */
static struct kv_op *batch_try(kv_env *e, struct kv_op *start, struct batch *b)
{
	/* a shared store's superblock, guessed as env has it (window.c
	 * invariant 6): read with the ops' first reads, checked after them */
	int guess = e->eng->shared && e->win.super_guess;
	/* and its other reads guessed from the last commit, checked with the
	 * changes (engine.h: KV_TXN_GUESS): a flat try only, as one op's
	 * failure there (perhaps a wrong guess's) stops the whole try */
	unsigned flags = e->eng->shared && b->flat && !b->unguessed ? KV_TXN_GUESS : 0;
	enum stop_reason why;
	struct kv_op *stop, *op;
	kv_etxn *parent;
	int rc;

	/* kv_int.h invariant 2: the role's alone, one batch at a time */
	assert(kv_role_mine(e) && e->w.running && !e->w.txn && !e->win.txn);
	b->wb_bytes = e->w.wb_bytes;
	rc = kv_err(NULL, e->eng->txn_begin(e, NULL, flags, &parent), "begin batch");
	if (rc == 0 && e->eng->shared &&
	    (rc = guess ? kv_super_lock(e, parent) : kv_super_reload(e, parent)) != 0)
		e->eng->txn_abort(e, parent);
	kv_change_begin(e);
	kv_icache_top_begin(e);
	if (rc) {
		for (op = start; op; op = op->next)
			op->rc = rc;
		finish(start, NULL);
		return NULL;
	}
	e->w.txn = parent;
	stop = apply_ops(e, parent, start, b->flat, &why);
	if (flags && why == STOP_FAILED) {
		/* an op failed on what may have been a wrong guess: the try
		 * again, reading, before its failure counts */
		e->eng->txn_abort(e, parent);
		e->w.txn = NULL;
		b->unguessed = 1;
		return try_again(e, start, b->wb_bytes);
	}
	if (guess && kv_super_check(e, parent) != 1) {
		/* it moved, or the ops stored it, or it could not be read: all
		 * of it again, the superblock read first; nothing was told */
		e->eng->txn_abort(e, parent);
		e->w.txn = NULL;
		return try_again(e, start, b->wb_bytes);
	}
	if (b->flat && why != STOP_NONE) {
		e->eng->txn_abort(e, parent);
		e->w.txn = NULL;
		return flat_stopped(e, start, why, b);
	}
	if (stop == start) {
		/* the first op alone does not fit */
		e->eng->txn_abort(e, parent);
		e->w.txn = NULL;
		if (why == STOP_MAP_FULL && kv_emap_grow(e) == 0)
			return start;
		stop = start->next;
		run_short(e, start, why == STOP_TXN_FULL);
		return stop;
	}
	return commit_ops(e, parent, start, stop, why, b);
}

/* Run a batch: flat first; when that stops short, abort, and grow the map
 * and replay flat, or replay with a child txn per op (which isolates a
 * failure and splits at the op that needs more room). apply() is run again
 * on a replay, as it may be (kv.h). */
static void run_batch(kv_env *e, struct kv_op *start)
{
	struct batch b = {.flat = 1};

	while (start)
		start = batch_try(e, start, &b);
}

void kv_run_batch(kv_env *e, struct kv_op *start)
{
	run_batch(e, start);
}

/* Everything queued as one batch, the lazy ops first (q_lock held). */
struct kv_op *kv_take_queue(kv_env *e)
{
	struct kv_op *batch = e->w.q_head;

	if (e->w.lazy_head) {
		e->w.lazy_tail->next = batch;
		batch = e->w.lazy_head;
	}
	e->w.q_head = e->w.q_tail = e->w.lazy_head = e->w.lazy_tail = NULL;
	return batch;
}

/* Whether the writer thread must be woken to notice the queues (q_lock held):
 * queued work, a stop, lazy work it does not yet count down for, or commits
 * to make durable while it waits without a timer. */
static int writer_needs_wake(kv_env *e)
{
	/* unsynced is the role's: read only while nobody holds it */
	return e->w.q_head || e->w.q_stop || (e->w.lazy_head && e->w.timed != KV_W_LAZY) ||
	       (e->w.timed == KV_W_NONE && !e->w.busy && e->w.sync_interval_ms && e->w.unsynced) ||
	       e->win.commit || (!e->w.busy && e->win.dirty && e->w.timed != KV_W_WINDOW);
}

void kv_role_release_locked(kv_env *e)
{
	role_drop(e);
	if (writer_needs_wake(e))
		pthread_cond_signal(&e->w.q_cond);
	if (e->w.role_waiters)
		pthread_cond_broadcast(&e->w.role_cond);
}

/* Give up the writer's role (held by the caller). */
static void role_release(kv_env *e)
{
	pthread_mutex_lock(&e->w.q_lock);
	kv_role_release_locked(e);
	pthread_mutex_unlock(&e->w.q_lock);
}

/* Wait up to ms for a signal (q_lock held); 1 when the time ran out. */
int kv_timed_wait(kv_env *e, unsigned ms, int kind)
{
	struct timespec ts;
	int rc;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	e->w.timed = kind;
	rc = pthread_cond_timedwait(&e->w.q_cond, &e->w.q_lock, &ts);
	e->w.timed = KV_W_NONE;
	return rc == ETIMEDOUT;
}

/* Make idle commits durable if nobody holds the role or queued work (q_lock
 * held; dropped during the sync). */
void kv_idle_sync(kv_env *e)
{
	if (e->w.busy || e->w.q_head || e->w.lazy_head || !e->w.unsynced)
		return;
	kv_role_take(e);
	pthread_mutex_unlock(&e->w.q_lock);
	if (e->eng->sync(e) == 0)
		e->w.unsynced = 0;
	pthread_mutex_lock(&e->w.q_lock);
	kv_role_release_locked(e);
}

/* Wait until there is a batch for the writer thread (1) or it should end
 * (0). q_lock held. unsynced is read only while nobody holds the role. */
static int writer_wait(kv_env *e)
{
	for (;;) {
		if (e->w.busy) {
			pthread_cond_wait(&e->w.q_cond, &e->w.q_lock);
			continue;
		}
		if (e->w.q_head || (e->w.lazy_head && e->w.q_stop))
			return 1;
		if (e->w.q_stop)
			return 0; /* drained, and no leader left */
		if (e->w.lazy_head) {
			if (kv_timed_wait(e, KV_LAZY_MS, KV_W_LAZY) && e->w.lazy_head && !e->w.busy)
				return 1; /* no batch came to take it along */
		} else if (e->w.unsynced && e->w.sync_interval_ms) {
			if (kv_timed_wait(e, e->w.sync_interval_ms, KV_W_SYNC))
				kv_idle_sync(e);
		} else {
			pthread_cond_wait(&e->w.q_cond, &e->w.q_lock);
		}
	}
}

static void *writer_main(void *arg)
{
	kv_env *e = arg;

	if (e->win.ms)
		return kv_window_main(e);

	pthread_mutex_lock(&e->w.q_lock);
	while (writer_wait(e)) {
		struct kv_op *batch = kv_take_queue(e);

		kv_role_take(e);
		pthread_mutex_unlock(&e->w.q_lock);
		run_batch(e, batch);
		pthread_mutex_lock(&e->w.q_lock);
		role_drop(e);
	}
	pthread_mutex_unlock(&e->w.q_lock);
	return NULL;
}

int kv_thread_start(pthread_t *th, pthread_mutex_t *lock, pthread_cond_t *cond,
		    void *(*fn)(void *), void *arg)
{
	int rc;

	pthread_mutex_init(lock, NULL);
	pthread_cond_init(cond, NULL);
	rc = -pthread_create(th, NULL, fn, arg);
	if (rc) {
		pthread_cond_destroy(cond);
		pthread_mutex_destroy(lock);
	}
	return rc;
}

int kv_writer_start(kv_env *e)
{
	int rc;

	e->w.wbuf = malloc((size_t)e->super.block_size + KV_CSUM_LEN);
	e->w.ibuf = malloc((size_t)KV_INL_SLOTS * KV_SYMLINK_MAX);
	kv_eroom_update(e); /* the cap, before any transaction */
	rc = !e->w.wbuf || !e->w.ibuf ? -ENOMEM : e->eng->flusher_start ? e->eng->flusher_start(e) : 0;
	if (rc)
		goto free_bufs;
	pthread_cond_init(&e->w.role_cond, NULL);
	rc = kv_thread_start(&e->w.thread, &e->w.q_lock, &e->w.q_cond, writer_main, e);
	if (rc) {
		pthread_cond_destroy(&e->w.role_cond);
		if (e->eng->flusher_stop)
			e->eng->flusher_stop(e);
		goto free_bufs;
	}
	e->w.running = 1;
	if (e->win.ms) { /* its first window open before the first op */
		pthread_mutex_lock(&e->w.q_lock);
		while (!e->win.ready)
			pthread_cond_wait(&e->w.role_cond, &e->w.q_lock);
		pthread_mutex_unlock(&e->w.q_lock);
	}
	return 0;

free_bufs:
	free(e->w.wbuf);
	free(e->w.ibuf);
	e->w.wbuf = e->w.ibuf = NULL;
	return rc;
}

void kv_writer_stop(kv_env *e)
{
	pthread_mutex_lock(&e->w.q_lock);
	e->w.q_stop = 1;
	pthread_cond_signal(&e->w.q_cond);
	pthread_mutex_unlock(&e->w.q_lock);
	pthread_join(e->w.thread, NULL);
	e->w.running = 0;
	pthread_cond_destroy(&e->w.q_cond);
	pthread_cond_destroy(&e->w.role_cond);
	pthread_mutex_destroy(&e->w.q_lock);
	if (e->eng->flusher_stop)
		e->eng->flusher_stop(e);
	if (e->eng->room_close)
		e->eng->room_close(e);
	free(e->w.wbuf);
	free(e->w.ibuf);
	e->w.wbuf = e->w.ibuf = NULL;
}

/* Append op to a queue (head/tail: e->q_* or e->lazy_*). */
static int enqueue(kv_env *e, struct kv_op *op, struct kv_op **head, struct kv_op **tail,
		   int lazy)
{
	if (e->readonly || !e->w.running)
		return -EROFS;
	op->next = NULL;
	op->rc = 0;
	pthread_mutex_lock(&e->w.q_lock);
	if (*tail)
		(*tail)->next = op;
	else
		*head = op;
	*tail = op;
	if (!lazy || writer_needs_wake(e))
		pthread_cond_signal(&e->w.q_cond);
	pthread_mutex_unlock(&e->w.q_lock);
	return 0;
}

int kv_submit(kv_env *e, struct kv_op *op)
{
	return enqueue(e, op, &e->w.q_head, &e->w.q_tail, 0);
}

int kv_submit_lazy(kv_env *e, struct kv_op *op)
{
	return enqueue(e, op, &e->w.lazy_head, &e->w.lazy_tail, 1);
}

int kv_apply_nothing(kv_txn *t, void *arg)
{
	(void)t;
	(void)arg;
	return 0;
}

int kv_settle(kv_env *e)
{
	int lazy;

	if (e->readonly || !e->w.running)
		return 0;
	if (e->win.ms) {
		/* what was applied, counted as committed; nothing applied since
		 * the last commit (a close after reads): nothing to wait for */
		int idle;

		pthread_mutex_lock(&e->w.q_lock);
		/* win.dirty is the role's: read while nobody holds it */
		idle = !e->w.busy && !e->w.q_head && !e->w.lazy_head && !e->win.commit &&
		       !e->win.failed && !(e->win.txn && e->win.dirty);
		pthread_mutex_unlock(&e->w.q_lock);
		return idle ? 0 : kv_write(e, kv_apply_nothing, NULL, KV_OP_COMMIT);
	}
	pthread_mutex_lock(&e->w.q_lock);
	lazy = e->w.lazy_head != NULL;
	pthread_mutex_unlock(&e->w.q_lock);
	/* a batch of its own runs after every lazy op queued before it */
	return lazy ? kv_write(e, kv_apply_nothing, NULL, 0) : 0;
}

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int finished;
	int rc;
	kv_apply_fn apply;
	void *arg;
};

static int waiter_apply(kv_txn *t, void *arg)
{
	struct waiter *w = arg;
	return w->apply(t, w->arg);
}

static void waiter_done(void *arg, int rc)
{
	struct waiter *w = arg;

	pthread_mutex_lock(&w->lock);
	w->rc = rc;
	w->finished = 1;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

int kv_write(kv_env *e, kv_apply_fn apply, void *arg, unsigned flags)
{
	struct waiter w = {.apply = apply, .arg = arg};
	struct kv_op op = {.apply = waiter_apply, .done = waiter_done, .arg = &w, .flags = flags};
	int rc;

	if (apply == kv_apply_nothing) /* as it is: the window knows it (win_apply) */
		op.apply = kv_apply_nothing;

	if (e->readonly || !e->w.running)
		return -EROFS;
	assert(!kv_reading(e)); /* invariant 6 */
	assert(!kv_role_mine(e)); /* not from apply() or done(): the role is theirs */
	if (e->win.ms && kv_win_lead(e, apply, arg, flags, &rc))
		return rc;
	pthread_mutex_lock(&e->w.q_lock);
	/* a batch of its own, unless a window is open (or its commit failed):
	 * the window's writer thread holds LMDB's write lock */
	if ((!e->win.ms || (!e->win.txn && !e->win.failed)) && !e->w.busy && !e->w.q_head &&
	    !e->w.q_stop) {
		/* the role is free: lead a batch of the lazy ops and this one */
		struct kv_op *batch;

		op.apply = apply;
		op.arg = arg;
		op.done = NULL;
		e->w.q_head = e->w.q_tail = &op; /* the queue was empty */
		batch = kv_take_queue(e);
		kv_role_take(e);
		pthread_mutex_unlock(&e->w.q_lock);
		run_batch(e, batch);
		role_release(e);
		return op.rc;
	}
	pthread_mutex_unlock(&e->w.q_lock);

	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	rc = kv_submit(e, &op);
	if (rc == 0) {
		pthread_mutex_lock(&w.lock);
		while (!w.finished)
			pthread_cond_wait(&w.cond, &w.lock);
		pthread_mutex_unlock(&w.lock);
		rc = w.rc;
	}
	pthread_cond_destroy(&w.cond);
	pthread_mutex_destroy(&w.lock);
	return rc;
}
