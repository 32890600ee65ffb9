/*
 * icache.h - the inode cache of a shared store (icache.c): the inode
 * records this mount committed lately, and its calls.
 */
#ifndef KVFS_KV_ICACHE_H
#define KVFS_KV_ICACHE_H

#include <pthread.h>
#include <stdint.h>

#include "kv.h"

/* The table: 256 slots by inode number; an op puts at most a few inodes
 * (a rename: both directories, the inode, the one it replaces). */
#define KV_ICACHE_BITS 8
#define KV_ICACHE_OP 8
#define KV_ICACHE_TOP 512
struct kv_icache_slot {
	struct kv_inode in;       /* in.ino 0: empty */
	int64_t at_ns;            /* when its commit was seen (CLOCK_MONOTONIC_COARSE) */
};

/* env->ic. The table (slots) is guarded by lock: readers copy a slot under
 * it, the role fills it (icache.c invariant 4). The lists (op, top) are the
 * writer's role's alone (kv_int.h invariant 2). slots and top are set at
 * open and freed at close. */
struct kv_icache {
	pthread_mutex_t lock;
	struct kv_icache_slot *slots; /* 1 << KV_ICACHE_BITS; NULL: none kept */
	struct kv_inode op[KV_ICACHE_OP]; /* the op's puts (mode 0: deleted) */
	unsigned op_n;
	int op_lost;              /* the op put more than op holds */
	struct kv_inode *top;     /* KV_ICACHE_TOP: the transaction's, ops committed */
	unsigned top_n;
	int top_full;             /* its commit keeps none */
};

/* icache.c: see there. kv_icache_op_begin and _op_done bracket an op's
 * child transaction (done: it committed), _top_begin and _top_done a
 * top-level write transaction (done: it committed); kv_inode_put and
 * kv_inode_delete call _put and _del; a note from another mount, _forget. */
int kv_icache_init(kv_env *e);
void kv_icache_free(kv_env *e);
void kv_icache_put(kv_env *e, const struct kv_inode *in);
void kv_icache_del(kv_env *e, uint64_t ino);
void kv_icache_forget(kv_env *e, uint64_t ino);
void kv_icache_forget_all(kv_env *e);
void kv_icache_op_begin(kv_env *e);
void kv_icache_op_done(kv_env *e);
void kv_icache_top_begin(kv_env *e);
void kv_icache_top_done(kv_env *e);

#endif
