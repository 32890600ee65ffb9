/*
 * writer.h - the writer of a read-write env: its thread, and the role a
 * kv_write caller may take instead (writer.c).
 */
#ifndef KVFS_KV_WRITER_H
#define KVFS_KV_WRITER_H

#include <pthread.h>
#include <stdint.h>

#include "engine.h"
#include "kv.h"

/* env->w: the writer's state. Two guards, each field marked:
 *  - "q_lock": guarded by q_lock, this struct's mutex (q_cond wakes the
 *    writer thread, role_cond the readers waiting for the role);
 *  - "role": the writer's role's (kv_int.h invariant 2, writer.c
 *    invariant 5): touched only by the thread that holds it (busy set,
 *    or the writer thread while nobody else can take it) or, with no
 *    writer running, by an open or close on one thread.
 * thread and sync_interval_ms are set before the writer starts; running
 * is set by kv_writer_start and cleared by kv_writer_stop, on the thread
 * that opens and closes the env. */
struct kv_writer {
	pthread_t thread;
	int running;
	unsigned sync_interval_ms;
	pthread_mutex_t q_lock;
	pthread_cond_t q_cond;
	struct kv_op *q_head, *q_tail; /* q_lock */
	int q_stop;               /* q_lock */
	struct kv_op *lazy_head, *lazy_tail; /* q_lock: kv_submit_lazy */
	int busy;                 /* q_lock: a thread holds the writer's role */
	int timed;                /* q_lock: the writer thread waits with a timeout:
	                             KV_W_SYNC or KV_W_LAZY */
	int role_waiters;         /* q_lock: readers waiting for the role */
	pthread_cond_t role_cond; /* q_lock: the role came free */
	int unsynced;             /* role: commits not yet made durable */
	uint64_t next_ino;        /* role */
	uint64_t wb_bytes;        /* role: file data committed since the flusher's
	                             last kick */
	unsigned char *wbuf;      /* role: block_size + KV_CSUM_LEN */
	unsigned char *ibuf;      /* role: KV_INL_SLOTS x KV_SYMLINK_MAX (inode.c) */
	kv_etxn *txn;             /* role: the batch transaction while it is open */
	int in_reserve;           /* role: running an op in the reserve */
	int touched;              /* role: the last commit was run_touch's */
};

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
enum { KV_W_NONE, KV_W_SYNC, KV_W_LAZY, KV_W_WINDOW }; /* env->w.timed */
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

#endif
