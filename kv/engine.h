/*
 * engine.h - the store below kv/'s record layer.
 *
 * The record layer (superblock, inodes, dirents, blocks, xattrs, orphans,
 * shares, checksums, the writer and its batches) keeps its records in
 * KV_NDB ordered maps of byte-string keys to byte-string values. An engine
 * is the only code that knows where they live: LMDB (kv/lmdb/, one image
 * file, zero-copy reads from its map) or PostgreSQL (kv/pg/, one table per
 * map, for many mounts of one filesystem). An image is named by a path
 * (LMDB) or a postgresql:// URL; kv_engine_for picks the engine.
 *
 * Contract (every engine):
 *  1. Keys order as memcmp, then length (a shorter key first when one is
 *     the other's prefix): cursors walk them in that order.
 *  2. Return codes: 0, a positive errno value, or one of the KV_E* codes
 *     below; LMDB's engine may also pass on a failure code of LMDB's own
 *     (a damaged page: MDB_CORRUPTED, ...). err.c maps them to negative
 *     errno values (kv_err). create, open and backup, which report to the
 *     record layer's kv_mkfs, kv_open and kv_backup, return 0 or a negative
 *     errno with a message. A put's or cur_del's failure may show at a
 *     later call of the same transaction, at the latest at the commit of
 *     the child that made it (an engine that sends changes without waiting
 *     for their results), and never at another child's; except while the
 *     env holds the store's lease (lease): a child's commit then waits for
 *     nothing, and a failure may show at any later call of the transaction,
 *     up to its commit, which then fails whole (as when the server is lost).
 *  3. A read transaction sees one snapshot, the state as of some commit at
 *     or after its begin, whatever commits meanwhile. A write transaction
 *     sees its own changes at once. Only one write transaction (with its
 *     children) is open per env, and a transaction is used by one thread at
 *     a time (the writer's role hands a write one on: kv_int.h).
 *  4. A child transaction (txn_begin with a parent) sees its parent's
 *     changes; its commit folds its changes into the parent, its abort
 *     drops them and nothing else. The parent is not used while a child is
 *     open.
 *  5. Values returned by get and by a cursor stay valid, unchanged, until
 *     the transaction ends (commit, abort, read_end) or, in a write
 *     transaction, until its next write of any key (LMDB moves the pages
 *     it changes): the record layer copies what it keeps across a write.
 *     cur_forget lets a cursor drop values it returned before (whole-map
 *     walks call it so that an engine which copies values need not keep
 *     the map in memory).
 *  6. A cursor sees its transaction's own writes, also those made after it
 *     was positioned. After cur_del, KV_NEXT gives the key after the one
 *     deleted and KV_GET_CURRENT is not to be asked. KV_NEXT on a cursor
 *     not yet positioned is KV_FIRST, KV_PREV there KV_LAST. KV_NEXT past
 *     the last key, KV_PREV before the first and a KV_SET_KEY or
 *     KV_SET_RANGE that finds nothing give KV_ENOTFOUND; where the cursor
 *     then stands is not to be relied on: position it again.
 *  7. A put with KV_PUT_RESERVE stores a value of v->size bytes that the
 *     caller writes at v->data (set by put) before its next call into the
 *     engine for that transaction. KV_PUT_NOOVERWRITE's KV_EKEYEXIST sets
 *     v to the value there.
 *  8. A commit that returns 0 is durable when env->durability is
 *     KV_DURABLE_FULL; otherwise after the next sync.
 *  9. A store that grows a map of its own in one file (LMDB: room.c and
 *     flusher.c of kv/lmdb/) has room to measure, a map that fills and
 *     grows, a reserve for deletes, and a host to keep blocks allocated
 *     on: the hooks room_update to room_close are the record layer's only
 *     way to them. The writer's role calls them (kv_int.h invariant 2):
 *     room_over, room_avail and room_promise with the write transaction x
 *     open, the others with none open; room_update and flusher_start as
 *     the writer starts, flusher_stop and room_close once it stopped. An
 *     engine without a map of its own leaves them all NULL; the record
 *     layer then takes its room as never short (KV_ROOM_UNMEASURED), its
 *     map as never growing (-ENOSPC), and allocates nothing ahead.
 */
#ifndef KVFS_ENGINE_H
#define KVFS_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "kv.h"

/* A key or value: size bytes at data. (LMDB's MDB_val has this layout;
 * lmdb.c checks it.) */
typedef struct kv_val {
	size_t size;
	void *data;
} kv_val;

typedef struct kv_etxn kv_etxn; /* an engine's transaction */
typedef struct kv_ecur kv_ecur; /* an engine's cursor on one map of a transaction */

/* Codes beside errno values (contract 2). The values are LMDB's, so that
 * its engine passes them on as they are (lmdb.c checks it). */
#define KV_ENOTFOUND (-30798)    /* no such key; a cursor past either end */
#define KV_EKEYEXIST (-30799)    /* KV_PUT_NOOVERWRITE: the key is there */
#define KV_EMAP_FULL (-30792)    /* the store is full (LMDB: the map) */
#define KV_ETXN_FULL (-30788)    /* the transaction holds as much as it can */
#define KV_EREADERS_FULL (-30790) /* no room for another read transaction */
#define KV_EINVAL (-30793)       /* not a store of this engine */
#define KV_EVERSION (-30794)     /* a store of another version of the engine */
#define KV_EMAP_RESIZED (-30785) /* LMDB: another process grew the map */
/* KV_TXN_GUESS: a read answered from a guess was wrong; the transaction did
 * nothing and takes only abort: run it again without guessing. */
#define KV_EGUESS (-30700)

/* Cursor operations (values as LMDB's MDB_cursor_op). */
enum kv_cop {
	KV_FIRST = 0,
	KV_GET_CURRENT = 4,
	KV_LAST = 6,
	KV_NEXT = 8,
	KV_PREV = 12,
	KV_SET_KEY = 16,   /* exactly the key given; k and v are set */
	KV_SET_RANGE = 17, /* the first key at or after the one given */
};

/* put flags (values as LMDB's). */
#define KV_PUT_NOOVERWRITE 0x10
#define KV_PUT_RESERVE 0x10000

/* The room (bytes) the record layer takes a store without room hooks
 * (contract 9) to have: never short, and far from any overflow when added
 * to. */
#define KV_ROOM_UNMEASURED (UINT64_MAX / 4)

/* txn_begin flags. KV_TXN_GUESS (a top-level write transaction of a
 * shared store): reads may be answered from what the mount knew at its
 * last commit, each checked on the server with the changes that follow;
 * when one was wrong, a wait or the commit fails with KV_EGUESS. An engine
 * may ignore it. */
#define KV_TXN_RDONLY 0x20000
#define KV_TXN_GUESS 0x40000

struct kv_engine {
	const char *name;
	/* Make a new store at e->path (nothing there, or force: replace what
	 * is), its maps created, and have init write its first records in the
	 * store's first write transaction (with arg): all of it, or nothing made (what was
	 * there before stays, unless force). The store is closed again. A
	 * message in err on failure. */
	int (*create)(kv_env *e, int force, int (*init)(kv_env *e, kv_etxn *x, void *arg),
		      void *arg, char *err, size_t errlen);
	/* Open the store e->path names (e->readonly, e->durability,
	 * e->max_size set): its maps there and checked, e->page_size set. A
	 * message in err on failure; nothing left changed. */
	int (*open)(kv_env *e, char *err, size_t errlen);
	void (*close)(kv_env *e);

	int (*txn_begin)(kv_env *e, kv_etxn *parent, unsigned flags, kv_etxn **out);
	int (*txn_commit)(kv_env *e, kv_etxn *x);
	void (*txn_abort)(kv_env *e, kv_etxn *x);
	/* A thread's recycled read transaction: begun (*x NULL) or renewed,
	 * and reset at its end; freed by read_free. */
	int (*read_begin)(kv_env *e, kv_etxn **x);
	void (*read_end)(kv_env *e, kv_etxn *x);
	void (*read_free)(kv_env *e, kv_etxn *x);

	int (*get)(kv_env *e, kv_etxn *x, enum kv_db db, const kv_val *k, kv_val *v);
	/* A get of key k of db in x is coming (an op knows the records it will
	 * read before it reads the first): an engine whose gets each wait for
	 * a server sends it now, so that the gets an op makes together cost
	 * one wait (pg.c); one that reads its own map does nothing (lmdb.c).
	 * The get answers as it would have without: a hint, nothing more. */
	void (*prefetch)(kv_env *e, kv_etxn *x, enum kv_db db, const kv_val *k);
	int (*put)(kv_env *e, kv_etxn *x, enum kv_db db, const kv_val *k, kv_val *v,
		   unsigned flags);
	int (*del)(kv_env *e, kv_etxn *x, enum kv_db db, const kv_val *k);
	/* Records in db (fsck and dump's summaries). */
	int (*count)(kv_env *e, kv_etxn *x, enum kv_db db, uint64_t *n);

	int (*cur_open)(kv_env *e, kv_etxn *x, enum kv_db db, kv_ecur **out);
	/* A read transaction's cursor, kept while it was reset: valid again in x. */
	int (*cur_renew)(kv_env *e, kv_etxn *x, kv_ecur *c);
	void (*cur_close)(kv_env *e, kv_ecur *c);
	int (*cur_get)(kv_env *e, kv_ecur *c, kv_val *k, kv_val *v, enum kv_cop op);
	int (*cur_del)(kv_env *e, kv_ecur *c);
	void (*cur_forget)(kv_env *e, kv_ecur *c);

	/* Make every commit so far durable. */
	int (*sync)(kv_env *e);
	/* The byte sizes of kv_usage for statfs and the tools (the record
	 * counts are the record layer's; the room fields of stores without a
	 * map of their own: 0), with no transaction of the caller's open. */
	int (*usage)(kv_env *e, struct kv_usage *u);
	/* A copy of the store for kv_backup; -EOPNOTSUPP with a message in err
	 * where the database's own tools do it. */
	int (*backup)(kv_env *e, const char *dest, char *err, size_t errlen);
	/* The words for a failure code of the engine's own (contract 2); NULL
	 * where it has none. The KV_E* codes and errno values have one table
	 * for every engine, kv_strerror (err.c), which is what callers use. */
	const char *(*strerror)(int code);
	/* Shared stores only (the others: NULL). Send msg (text, len bytes,
	 * at most KV_CHANGE_MSG_MAX) to the store's other mounts when the
	 * top-level write transaction x commits: with the commit or not at
	 * all (change.c). */
	int (*publish)(kv_env *e, kv_etxn *x, const char *msg, size_t len);
	/* on: start handing the other mounts' messages to kv_change_deliver,
	 * on a thread of the engine's own (a message may come twice or, while
	 * the store is out of reach, not at all); off: stop, and return once
	 * no delivery runs. */
	int (*listen)(kv_env *e, int on);
	/* Shared stores (the others: NULL), a mount's (kv_open_opts.mount): a
	 * mount may hold the store alone, so that a window's uncommitted
	 * changes hide from nobody. take 1 (no transaction open): 1 when it is
	 * held, now or since before; 0 when another mount has the store open,
	 * or asked for it lately. take 0: give it up (what it covered
	 * committed first). A mount whose open finds it held asks for it and
	 * waits until it is given up, within a bound: the holder hears the ask
	 * on its listener's thread and calls kv_lease_asked. */
	int (*lease)(kv_env *e, int take);
	/* Shared stores: take the writers' lock in the top-level write
	 * transaction x (its next statement waits for it), held to its end. */
	int (*lock)(kv_env *e, kv_etxn *x);
	/* An image file's upkeep (contract 9), NULL for a store without a
	 * map of its own. room_update: measure the room again, keep the
	 * reserve allocated on the host and the map no larger than what
	 * ordinary changes may grow it to; 1 when the map shrank. room_check:
	 * room_update once the store grew enough since the last one. */
	int (*room_update)(kv_env *e);
	void (*room_check)(kv_env *e);
	/* Whether the store is tight and x's pages in use reached the limit
	 * less the reserve: an op not flagged KV_OP_RESERVE or
	 * KV_OP_OVERWRITE then fails with -ENOSPC before it runs. */
	int (*room_over)(kv_env *e, kv_etxn *x);
	/* What ordinary changes could still use after x commits (bytes). */
	uint64_t (*room_avail)(kv_env *e, kv_etxn *x);
	/* 0 when the unwritten blocks x holds beyond those of the last
	 * commit fit the room for ordinary changes, else -ENOSPC. */
	int (*room_promise)(kv_env *e, kv_etxn *x);
	/* The bytes a window may take now (the map grown first, up to want
	 * more than the store's extent): 0 when the store is near full. */
	uint64_t (*room_window)(kv_env *e, uint64_t want);
	/* Grow the map one step (in the reserve, while env->w.in_reserve):
	 * 0, or -ENOSPC when it cannot grow; other -errno. */
	int (*map_grow)(kv_env *e);
	/* The thread that keeps the host ahead of the commits: started with
	 * the writer (-errno: the writer does not start), kicked after each
	 * KV_FLUSH_KICK bytes of file data committed (writer.h), stopped with
	 * the writer. */
	int (*flusher_start)(kv_env *e);
	void (*flusher_kick)(kv_env *e);
	void (*flusher_stop)(kv_env *e);
	/* The writer stopped: give back what was allocated ahead but the
	 * reserve. */
	void (*room_close)(kv_env *e);
	/* A write transaction may go on and end on any thread (the one that
	 * holds the writer's role, window.c): 1 for PostgreSQL, whose
	 * transaction is its connection's; 0 for LMDB, whose write lock
	 * belongs to the thread that began it. */
	int any_thread;
	/* Other processes (mounts on other hosts) may write the store: a
	 * top-level write transaction that changes it first takes the store's
	 * writers' lock (lock), held until it ends, and the record layer reads
	 * the superblock again after it (the inode counter moved). 0 for LMDB
	 * (one writer per image, lock.c). */
	int shared;
};

extern const struct kv_engine kv_engine_lmdb;
extern const struct kv_engine kv_engine_pg;

/* The engine of an image name: kv_engine_pg for postgresql:// and
 * postgres:// URLs, else kv_engine_lmdb. */
const struct kv_engine *kv_engine_for(const char *where);

#endif
