/*
 * window.h - the window's state (window.c): W, the open write transaction
 * whose ops are told before it commits, with durability fsync and none
 * when window_ms is set; and the marks readers check against it.
 */
#ifndef KVFS_KV_WINDOW_H
#define KVFS_KV_WINDOW_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "engine.h"
#include "kv.h"

#define KV_WIN_BITS 65536

/* env->win. Each field is one of four kinds, marked:
 *  - the writer's role's (kv_int.h invariant 2): unmarked;
 *  - "q_lock": guarded by the writer's q_lock;
 *  - "open": set at open, before any thread reads it;
 *  - atomics, read without a lock (the marks: invariant 3). */
struct kv_window {
	unsigned ms;              /* open: window_ms, 0 for no window */
	int alone_only;           /* open: a window only while the store is this
	                             mount's alone (engine.h: lease; invariant 7) */
	kv_etxn *txn;             /* W, begun and ended by the writer thread */
	int dirty;                /* changes applied since it began */
	int fresh;                /* a shared store's W before its first op */
	int super_guess;          /* the last look found the superblock as env had
	                             it: the next W guesses so */
	struct timespec start;    /* when the first change was */
	uint64_t bytes;           /* file data applied in it */
	uint64_t pages;           /* pages its changes may take, estimated */
	uint64_t room;            /* pages it may take before it commits */
	int told;                 /* an op applied in it was told */
	uint64_t ino_floor;       /* inode numbers below it may have been given
	                             out in a lost window: never again */
	int commit;               /* q_lock: commit it now (size, a sync) */
	int failed;               /* q_lock: a commit of acknowledged changes
	                             failed: -errno, and the store takes no more */
	int ready;                /* q_lock: the writer thread has looked for room */
	atomic_int alone;         /* the role writes: W holds the store's lease */
	atomic_int lease_asked;   /* another mount asked for the lease: give it up */
	_Atomic uint64_t gen;     /* commits so far (readers compare it) */
	_Atomic uint64_t bits[KV_WIN_BITS / 64]; /* inodes changed in W */
};

/* The window (window.c). Mark ino changed in the open window (an op's txn
 * there; nothing elsewhere: a batch is committed before it is told). */
void kv_win_mark(kv_txn *txn, uint64_t ino);
/* Before a read of ino's records in a read txn: 0 to read them in txn as
 * it is, or after switching it to the window, when ino changed there or a
 * commit came since txn began (the writer's role is then held until
 * kv_read_end); -errno. */
int kv_win_route(kv_txn *txn, uint64_t ino);
/* kv_read_end's part: let go of the window. */
void kv_win_leave(kv_txn *txn);

#endif
