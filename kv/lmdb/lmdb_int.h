/*
 * lmdb_int.h - the LMDB engine's state and the calls between its files
 * alone (lmdb.c and the image file's management: room.c, flusher.c,
 * tail.c). The record layer never sees it: it reaches the image's room,
 * flusher and map growth through the engine's hooks (engine.h contract 9).
 */
#ifndef KVFS_LMDB_INT_H
#define KVFS_LMDB_INT_H

#include <lmdb.h>
#include <sys/stat.h>

#include "kv_int.h"

/* The flusher's state (flusher.c): guarded by its lock, but for what the
 * flusher thread alone touches once it runs. */
struct kv_flusher {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned kick;       /* lock: kicks not yet served */
	int stop;            /* lock */
	unsigned done;       /* lock: kicks served (tests wait on it) */
	/* the flusher thread's (wb_from set by kv_flusher_start before it runs): */
	uint64_t alloc_end;  /* allocated up to here */
	uint64_t wb_from;    /* written back before here */
	int no_alloc;        /* the host refused fallocate */
};

/* The room's state (room.c): the writer's role's (kv_int.h invariant 2),
 * which alone calls the room hooks (engine.h contract 9) and writes it,
 * between transactions (room.c invariant 3). anchor is set once, as the
 * writer starts; kv_room_measure reads it from any thread after that. */
struct kv_room_state {
	_Atomic uint64_t cap;  /* ordinary changes grow the map up to here */
	_Atomic uint64_t hard; /* changes flagged KV_OP_RESERVE up to here */
	uint64_t anchor;       /* the extent when the writer started (set once) */
	uint64_t use_max;      /* pages in use ordinary changes may reach */
	int tight;             /* the extent is past use_max */
	uint64_t next;         /* look again once the extent passes this */
	int no_alloc;          /* the host refused fallocate */
};

/* The engine's state (e->eng_priv), made at open and freed at close, after
 * the writer stopped the flusher. */
struct kv_lmdb {
	MDB_env *env;
	MDB_dbi dbi[KV_NDB];
	struct kv_flusher flush;
	struct kv_room_state room;
};

static inline struct kv_lmdb *kv_lmdb(const kv_env *e)
{
	return e->eng_priv;
}

static inline MDB_txn *kv_mtxn(kv_etxn *x)
{
	return (MDB_txn *)x;
}

/* How far the image may grow now (room.c). */
struct kv_room {
	uint64_t extent;     /* bytes up to the last page */
	uint64_t alloc_end;  /* the file's blocks reach this far (with those past its end) */
	uint64_t host_avail; /* free on the host filesystem */
	uint64_t reserve;
	uint64_t promised;   /* kept for the unwritten blocks' first writes */
	uint64_t use_max;    /* limit - reserve - promised: what ordinary changes may hold */
	uint64_t cap, hard;  /* the map for ordinary changes, for the reserve's */
};
void kv_room_measure(kv_env *env, struct kv_room *r);
/* The bytes the unwritten blocks of the last commit will take (room.c). */
uint64_t kv_room_promised(const kv_env *env);

/* The engine's hooks of engine.h contract 9 (room.c, flusher.c), in
 * kv_engine_lmdb. */
/* Measure the room again, keep the reserve allocated on the host and the
 * map no larger than the cap; 1 when the map shrank. */
int kv_room_update(kv_env *env);
/* kv_room_update once the extent has grown enough since the last one. */
void kv_room_check(kv_env *env);
/* Whether the image is tight and txn's pages in use reached the limit less
 * the reserve: an ordinary change must fail with -ENOSPC before it runs. */
int kv_room_over(kv_env *env, kv_etxn *txn);
/* What ordinary changes could still use after txn commits (the role). */
uint64_t kv_room_avail_in(kv_env *env, kv_etxn *txn);
/* 0 when the unwritten blocks txn holds beyond those of the last commit fit
 * the room for ordinary changes, else -ENOSPC (an op's txn, the role). */
int kv_room_promise_check(kv_env *env, kv_etxn *txn);
/* The bytes a window may take now (the map grown first, up to want more
 * than the extent): 0 when the image is near full. */
uint64_t kv_room_window(kv_env *env, uint64_t want);
/* Grow the map one step: up to the cap, or in the reserve up to hard;
 * -ENOSPC when it is there already. */
int kv_map_grow(kv_env *env);
/* The flusher thread (flusher.c): started and stopped with the writer;
 * kicked by the role after each KV_FLUSH_KICK bytes of file data. */
int kv_flusher_start(kv_env *env);
void kv_flusher_kick(kv_env *env);
/* End the thread (kv_room_close then gives back the room past the end). */
void kv_flusher_stop(kv_env *env);
/* At close: give back the blocks past the end but the reserve's. */
void kv_room_close(kv_env *env);

/* Bytes of blocks a file holds past its size (allocated ahead, flusher.c). */
static inline uint64_t kv_bytes_past_end(const struct stat *st)
{
	uint64_t held = (uint64_t)st->st_blocks * 512;

	return held > (uint64_t)st->st_size ? held - (uint64_t)st->st_size : 0;
}

/* tail.c: after LMDB opened the image at fd, check that the file holds
 * every page in use (pages past its end must all be free; a read-write open
 * then extends it over them). 0; -EIO with a message in err when it was
 * cut; -ENOMEM. Sets env->page_size. */
int kv_tail_check(kv_env *env, int fd, char *err, size_t errlen);
/* One record of LMDB's free list (database 0): a count of page numbers, then
 * the numbers, each a size_t (as mdb_stat -f reads them), unaligned in the
 * page. The count, with *ids at the first number (read it with memcpy); or
 * -1 when the record is too short for its count (tail.c). */
long kv_freelist_record(const kv_val *v, const unsigned char **ids);

/* Resize the map to bytes (0: adopt the size another process gave the
 * image), with env->map_lock held exclusive (kv_int.h invariant 3): the
 * caller holds no transaction of env, read or write (lmdb.c). */
int kv_map_resize(kv_env *env, uint64_t bytes);

#endif
