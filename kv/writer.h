/*
 * writer.h - the writer of a read-write env: its thread, and the role a
 * kv_write caller may take instead (writer.c).
 */
#ifndef KVFS_KV_WRITER_H
#define KVFS_KV_WRITER_H

#include <errno.h>

#include "kv_int.h"

int kv_writer_start(kv_env *env);

/* writer.c, for window.c: the role (q_lock held), the queue (q_lock held),
 * batches (the role held, no transaction open), the upkeep after a commit,
 * the writer thread's waits (q_lock held). */
void kv_role_take(kv_env *env);
/* Let go of the role; wake the writer thread and the readers waiting. */
void kv_role_release_locked(kv_env *env);
struct kv_op *kv_take_queue(kv_env *env);
void kv_run_batch(kv_env *env, struct kv_op *start);
/* Tell every op of the list rc. */
void kv_finish_all(struct kv_op *op, int rc);
void kv_after_commit(kv_env *env);
enum { KV_W_NONE, KV_W_SYNC, KV_W_LAZY, KV_W_WINDOW }; /* env->w_timed */
int kv_timed_wait(kv_env *env, unsigned ms, int kind);
void kv_idle_sync(kv_env *env);
/* An op that changes nothing: a sync or a commit waits for what was queued
 * before it. */
int kv_apply_nothing(kv_txn *txn, void *arg);

/* window.c */
void *kv_window_main(void *env);
/* Apply an op into the open window on the calling thread, told at once
 * (1, *rc its result), when the role is free and nothing is queued; 0: it
 * is the writer thread's (queue it). */
int kv_win_lead(kv_env *env, kv_apply_fn apply, void *arg, unsigned flags, int *rc);
/* A reader on txn w: the thread's reader struct set to read it (env.c). */
int kv_reader_on(kv_env *env, kv_etxn *w, kv_txn **out);
/* Start a thread with its lock and condition made first; -errno, with both
 * undone, when it cannot start (writer.c, flusher.c). */
int kv_thread_start(pthread_t *th, pthread_mutex_t *lock, pthread_cond_t *cond,
		    void *(*fn)(void *), void *arg);
/* Run every queued op, then end the thread. */
void kv_writer_stop(kv_env *env);
/* The role kicks the engine's flusher (engine.h: flusher_kick) after each
 * KV_FLUSH_KICK bytes of file data. */
#define KV_FLUSH_KICK (8ULL << 20)
/* LMDB reports a short write (the disk filled up mid-commit) as EIO: true
 * when the image's filesystem has no room left, so the caller can say
 * ENOSPC (env.c). */
int kv_disk_full(kv_env *env);

/* The engine's hooks of an image file's upkeep (engine.h contract 9), as
 * the writer's role calls them; for an engine without them, what a store
 * without a map of its own has: room never short, a map never full,
 * nothing allocated ahead. */
static inline int kv_eroom_update(kv_env *e)
{
	if (e->eng->room_update)
		return e->eng->room_update(e);
	atomic_store(&e->room_avail, KV_ROOM_UNMEASURED);
	return 0;
}

static inline void kv_eroom_check(kv_env *e)
{
	if (e->eng->room_check)
		e->eng->room_check(e);
}

static inline int kv_eroom_over(kv_env *e, kv_etxn *x)
{
	return e->eng->room_over && e->eng->room_over(e, x);
}

static inline uint64_t kv_eroom_avail(kv_env *e, kv_etxn *x)
{
	return e->eng->room_avail ? e->eng->room_avail(e, x) : KV_ROOM_UNMEASURED;
}

static inline uint64_t kv_eroom_window(kv_env *e, uint64_t want)
{
	return e->eng->room_window ? e->eng->room_window(e, want) : want;
}

static inline int kv_emap_grow(kv_env *e)
{
	return e->eng->map_grow ? e->eng->map_grow(e) : -ENOSPC;
}

#endif
