/*
 * kv_int.h - internals shared by the files of kv/: the environment and
 * transaction structures, the key and record encodings of docs/FORMAT.md
 * (codec.c, hash.c), the calls into the engine below (engine.h), and the
 * one place the engine's codes become errno values (err.c). Each engine
 * lives in its own folder and library: only kv/lmdb/ sees LMDB (lmdb_int.h:
 * lmdb.c, and room.c, flusher.c and tail.c, which manage its image file),
 * and only kv/pg/ sees libpq (pg_int.h: pg*.c); tests/layers.sh checks it.
 * The writer and the window reach the image file's room, map growth and
 * flusher only through the engine's hooks (engine.h contract 9), by the
 * kv_eroom_* and kv_emap_grow wrappers below, which answer for an engine
 * without them (a store without a map of its own) themselves.
 *
 * Invariants:
 *  1. Keys are big-endian so cursors walk them in numeric order; record
 *     fields are little-endian. The encoders here and docs/FORMAT.md agree.
 *  2. Only the holder of the writer's role (writer.c: the writer thread or
 *     a leading kv_write caller) holds a write transaction; env->w.wbuf and
 *     env->w.next_ino are the role's alone (writer.h: struct kv_writer).
 *  3. (LMDB) The map is resized only with env->map_lock held for writing,
 *     so no reader holds a pointer into the map while it moves; the thread
 *     that resizes it holds no transaction of its own (lmdb.c invariant 3).
 *  4. A read transaction is used only by the thread it belongs to, between
 *     its kv_read_begin and kv_read_end.
 *
 * Debug and sanitizer builds check these, and the numbered invariants of
 * the other files of kv/ where a check is cheap, with assert(): never on
 * data read from disk, which is damage to report, not a bug. Release builds
 * (CMAKE_BUILD_TYPE=Release sets NDEBUG) compile the checks out.
 */
#ifndef KVFS_KV_INT_H
#define KVFS_KV_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "change.h"
#include "engine.h"
#include "icache.h"
#include "kv.h"
#include "window.h"
#include "writer.h"

extern const char *const kv_db_names[KV_NDB];

#define KV_MAGIC "KVFSIMG"   /* 8 bytes with its NUL */
#define KV_SUPER_KEY "super"
#define KV_SUPER_LEN 136
#define KV_INODE_LEN 88
#define KV_CSUM_LEN 8
#define KV_DIRENT_HDR 11     /* slot u8, type u8, namelen u8, ino u64 */
#define KV_HASH_BITS 54

struct kv_txn {
	kv_env *env;
	kv_etxn *txn;
	int write;
	int map_full;              /* an engine call returned KV_EMAP_FULL */
	int txn_full;              /* an engine call returned KV_ETXN_FULL */
	kv_ecur *cur[KV_NDB];   /* lazily opened; renewed with a read txn */
	unsigned cur_stale;        /* read txns: bit i set when cur[i] needs renew */
	unsigned inl_next;         /* write txns: the next env->w.ibuf slot */
	int over;                  /* write txns: past the room for ordinary changes */
	int win_op;                /* write txns: an op in the open window (window.c) */
	/* read txns beside an open window (window.c): */
	uint64_t gen;              /* env->win.gen when it began */
	int in_window;             /* reading the window, the writer's role held */
	kv_etxn *snap;             /* the thread's own txn meanwhile */
	kv_ecur *wcur[KV_NDB];  /* cursors on the window */
};

/* An op reads the inline data (symlink targets) of at most two inodes (a
 * rename of one symlink over another); kv_inode_get in a write txn copies it
 * into one of these slots of env->w.ibuf, in turn. */
#define KV_INL_SLOTS 4

/* Where compressed blocks are decompressed (zstd.c invariant 3). */
struct kv_zscratch {
	void *dctx;            /* ZSTD_DCtx, made on first use */
	unsigned char *buf;    /* a kv_data_read's blocks, one after another */
	size_t cap, used;
	int reading;           /* within a kv_data_read: blocks go to buf */
	unsigned char *one;    /* otherwise: one block */
	size_t one_cap;
	void *cctx;            /* the role's (env->z.scratch): ZSTD_CCtx for the blocks it merges */
	unsigned char *pack;   /* their frames */
	size_t pack_cap;
};

/* env->z: the writer's role's compression (zstd.c). scratch is the role's
 * (kv_int.h invariant 2); level is atomic, set by kv_set_compress from any
 * thread and read by the role at each merge. */
struct kv_zwrite {
	struct kv_zscratch scratch; /* decompression, and the blocks it merges */
	atomic_int level;         /* compress the blocks the writer merges */
};

/* A thread's recycled read context. */
struct kv_reader {
	struct kv_txn t;       /* first: kv_txn_z finds the reader from it */
	struct kv_zscratch z;
	int active;
	struct kv_reader *prev, *next; /* env->readers.list */
};

/* env->readers: every thread's kv_reader (env.c invariant 3). list is
 * guarded by lock, this struct's; key is made at open, before any reader,
 * and deleted at close, after the last. */
struct kv_readers {
	pthread_key_t key;        /* -> the calling thread's struct kv_reader */
	pthread_mutex_t lock;
	struct kv_reader *list;   /* lock */
};

/* env->unwritten: the count of unwritten blocks (data.c), what fallocate
 * promised. count is set at open, then published by the writer's role
 * after each commit (atomic: room.c reads it); dirty and txn are the
 * role's (kv_int.h invariant 2). */
struct kv_unwritten {
	_Atomic uint64_t count;   /* as of the last commit (room.c counts them) */
	int dirty;                /* changed in the open transaction */
	uint64_t txn;             /* read from it just before its commit */
};

/* An open image. Its own fields are set at open, before any thread but the
 * opener's sees it, and only read after, except: super, the writer's role's
 * once the writer runs (kv_int.h invariant 2); map_lock's (invariant 3);
 * room_avail and features, atomics the role writes and anyone reads. Each
 * owner's state is a struct of its own, declared beside its code with the
 * lock that guards it, embedded here by value. */
struct kv_env {
	const struct kv_engine *eng; /* the store below (engine.h) */
	void *eng_priv;           /* the engine's own state (LMDB: struct kv_lmdb) */
	char *path;
	int lock_fd;              /* holds the exclusive flock of a read-write open */
	int readonly;
	int mount;                /* kv_open_opts.mount */
	enum kv_durability durability;
	uint64_t max_size;
	uint32_t page_size;
	unsigned missing_dbs;     /* a version 1 image opened read-only: bit i, database
	                             i is not there (read as empty; share.c) */
	struct kv_super super;
	pthread_rwlock_t map_lock;
	_Atomic uint64_t room_avail; /* kv_room_avail, as of the last commit: the role
	                                writes it (room hooks, the window) */
	_Atomic uint64_t features; /* super.feature_incompat for readers: set at open
	                              and by kv_feature_set (share.c) */

	struct kv_readers readers; /* above: readers.lock */
	struct kv_writer w;       /* writer.h: w.q_lock, and the role */
	struct kv_window win;     /* window.h: the role, w.q_lock, atomics */
	struct kv_unwritten unwritten; /* above: the role, an atomic */
	struct kv_zwrite z;       /* above: the role, an atomic */
	struct kv_change chg;     /* change.h: the role; set at open and by kv_watch */
	struct kv_lost lost;      /* change.h: w.q_lock, an atomic */
	struct kv_icache ic;      /* icache.h: ic.lock, and the role */
};

/* Another mount asked for the store's lease (engine.h: lease; from the
 * engine's listener): the window commits and gives it up (window.c). */
void kv_lease_asked(kv_env *e);

/* Unwritten blocks (data.c). Before a commit of txn (the role): note the
 * count it holds when an op changed it; after that commit succeeded:
 * publish it (1: it changed, the room is to be measured again). */
void kv_unwritten_prepare(kv_env *e, kv_etxn *txn);
int kv_unwritten_publish(kv_env *e);
/* Whether a data record's value is an unwritten block's (no bytes, a
 * checksum; data.c). */
_Static_assert(KV_BLOCK_UNWRITTEN_LEN == KV_CSUM_LEN, "an unwritten block is a checksum");
static inline int kv_block_unwritten(const kv_val *v)
{
	return v->size == KV_BLOCK_UNWRITTEN_LEN;
}
/* Add delta to the count of the op's txn t (the role). */
int kv_unwritten_add(kv_txn *t, int64_t delta);
/* The count stored in txn (0 when the record is absent; -EIO when it is
 * damaged). */
int kv_unwritten_read(kv_env *e, kv_etxn *txn, uint64_t *count);

/* Name hash of the dirent key (top KV_HASH_BITS bits of XXH3-64; hash.c).
 * Tests replace it to force collisions. */
extern uint64_t (*kv_name_hash)(const char *name, size_t len);
uint64_t kv_name_hash_xxh3(const char *name, size_t len);

/* err.c. The one mapping of an engine's return code (mrc: 0, a KV_E* code
 * of engine.h, or an errno value the engine passed on) to 0 or a negative
 * errno:
 *   KV_ENOTFOUND -ENOENT, KV_EKEYEXIST -EEXIST, KV_EMAP_FULL and KV_ETXN_FULL
 *   -ENOSPC (recorded on txn, which may be NULL), KV_EREADERS_FULL -EAGAIN,
 *   KV_EINVAL -EINVAL, KV_EVERSION -EPROTONOSUPPORT, ENOMEM,
 *   ENOSPC, EACCES, EROFS and EPERM as themselves, anything else -EIO.
 * A reader table full and an -EIO are logged as "what: reason"; what NULL:
 * not logged, the caller reports it. kv_err is the one to call: it costs no
 * call on success. (The read paths still test mrc and convert only a
 * failure: converting first cost kv_inode_get a register.) */
int kv_err_map(kv_txn *txn, int mrc, const char *what);
static inline int kv_err(kv_txn *txn, int mrc, const char *what)
{
	return mrc ? kv_err_map(txn, mrc, what) : 0;
}
/* The words for an engine's return code (mrc as above, or a failure code of
 * LMDB's own): one table for every engine, for messages and log lines. */
const char *kv_strerror(int mrc);
void kv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#ifndef NDEBUG
/* For assert() only (debug builds). Whether the calling thread holds env's
 * writer's role, or no writer runs (an open or close, on one thread):
 * writer.c. */
int kv_role_mine(const kv_env *env);
/* Whether txn may be used by the calling thread: a write txn by the role's
 * holder, a read txn by its own thread while active (invariants 2 and 4):
 * env.c. */
int kv_txn_mine(const kv_txn *txn);
/* Whether the calling thread has a read transaction of env active (env.c). */
int kv_reading(kv_env *env);
#endif
/* A one-line message into err (errlen bytes; nothing when err is NULL). */
void kv_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* lock.c: take the exclusive lock of the image open at fd (path names it,
 * for the mount table and the messages). 0; -EBUSY with a message in err
 * when it is mounted, held by this process, or held by another for longer
 * than a few seconds (said on stderr after the first); -errno. */
int kv_image_lock(int fd, const char *path, char *err, size_t errlen);
/* Let go of the lock taken on fd (before closing it). */
void kv_image_unlock(int fd);

/* A cursor on db valid in txn. NULL with *rc set on failure. */
kv_ecur *kv_cursor(kv_txn *txn, enum kv_db db, int *rc);
void kv_txn_close_cursors(kv_txn *txn);

static inline void kv_put_be64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static inline uint64_t kv_get_be64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

static inline void kv_put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		p[i] = (unsigned char)v;
}

static inline void kv_put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++, v >>= 8)
		p[i] = (unsigned char)v;
}

static inline uint32_t kv_get_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Two halves, not a loop of eight bytes: compilers turn kv_get_le32 into
 * one load but not the loop, which made decoding an inode record (nine
 * 64-bit fields, on every getattr and lookup) ~200 instructions. */
static inline uint64_t kv_get_le64(const unsigned char *p)
{
	return (uint64_t)kv_get_le32(p) | (uint64_t)kv_get_le32(p + 4) << 32;
}

/* Records (codec.c). Decoders return -EIO on a malformed record. */
void kv_super_encode(const struct kv_super *s, unsigned char out[KV_SUPER_LEN]);
int kv_super_decode(const void *buf, size_t len, struct kv_super *s);
/* out must hold KV_INODE_LEN bytes; inline data follows it (caller copies). */
void kv_inode_encode(const struct kv_inode *in, unsigned char *out);
int kv_inode_decode(uint64_t ino, const void *buf, size_t len, struct kv_inode *out);
/* Checksum of a data block: XXH3-64 seeded by its key (hash.c). */
uint64_t kv_block_csum(uint64_t ino, uint64_t idx, const void *data, size_t len);
/* A data block's value, read from disk, against its key (block size bs):
 * *len is the data bytes it holds (0 when too short for its checksum). */
enum kv_block_fault { KV_BLOCK_OK, KV_BLOCK_BAD_LEN, KV_BLOCK_BAD_SUM, KV_BLOCK_ZSTD };
enum kv_block_fault kv_block_verify(uint32_t bs, uint64_t ino, uint64_t idx, const void *val,
				    size_t vlen, size_t *len);
/* The engine's calls, for a record-layer txn t (engine.h). */
static inline int kv_eget(kv_txn *t, enum kv_db db, const kv_val *k, kv_val *v)
{
	return t->env->eng->get(t->env, t->txn, db, k, v);
}

static inline void kv_eprefetch(kv_txn *t, enum kv_db db, const kv_val *k)
{
	t->env->eng->prefetch(t->env, t->txn, db, k);
}

static inline int kv_eput(kv_txn *t, enum kv_db db, const kv_val *k, kv_val *v, unsigned flags)
{
	return t->env->eng->put(t->env, t->txn, db, k, v, flags);
}

static inline int kv_edel(kv_txn *t, enum kv_db db, const kv_val *k)
{
	return t->env->eng->del(t->env, t->txn, db, k);
}

static inline int kv_cget(kv_txn *t, kv_ecur *c, kv_val *k, kv_val *v, enum kv_cop op)
{
	return t->env->eng->cur_get(t->env, c, k, v, op);
}

static inline int kv_cdel(kv_txn *t, kv_ecur *c)
{
	return t->env->eng->cur_del(t->env, c);
}

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

/* Check a block value of key (ino, idx); set *len to its data length. A
 * compressed block's is decompressed: *v then points at its bytes in the
 * txn's scratch (zstd.c). -EIO, logged (data.c); -ENOMEM. */
int kv_block_check(kv_txn *txn, uint64_t ino, uint64_t idx, kv_val *v, size_t *len);
/* Store a block. sum: its checksum computed beforehand, or NULL. flags:
 * KV_PUT_NOOVERWRITE for a block that cannot exist yet (-EEXIST if it does,
 * nothing changed). The data must not point into the map. */
int kv_block_put(kv_txn *txn, uint64_t ino, uint64_t idx, const void *data, size_t len,
		 const uint64_t *sum, unsigned flags);
/* Zero [off, end) of in's stored blocks: those it covers whole go, the
 * others are zeroed or trimmed (data.c). */
int kv_data_zero_range(kv_txn *txn, struct kv_inode *in, uint64_t off, uint64_t end);

/* Shared blocks (share.c). The extent of ino covering block idx: 0, or
 * -ENOENT with *next the first block of its next extent (UINT64_MAX: none);
 * -EIO. A read txn may ask. */
int kv_ext_find(kv_txn *txn, uint64_t ino, uint64_t idx, struct kv_extent *x, uint64_t *next);
/* The block value (checksum verified with its home's key) of a borrowed
 * block idx of x. -EIO. */
int kv_ext_block(kv_txn *txn, const struct kv_extent *x, uint64_t idx, kv_val *v, size_t *len);
/* Borrowed block idx of in becomes its own (a copy under its own key and
 * checksum); in->nblocks is unchanged. 0 too when idx is not borrowed. */
int kv_ext_own(kv_txn *txn, struct kv_inode *in, uint64_t idx);
/* Before in's blocks [a, b) change (write, truncate, punch): when in
 * lends, its borrowers get their own copies of the lent ones; when in
 * borrows, the borrowed blocks a and b - 1 become its own when keep_edges
 * (a partial write or cut keeps some of their bytes) and the other
 * borrowed ones of the range are let go (in->nblocks drops by them). */
int kv_share_prepare(kv_txn *txn, struct kv_inode *in, uint64_t a, uint64_t b,
		     int keep_first, int keep_last);
/* An inode's purge, its part of it (flags: the inode's): its extents go
 * (blocks no one borrows any more of a deleted home are dropped); when it
 * lends, its own blocks go but those lent, kept for their borrowers (the
 * deleted inode's number stays their home). *unwritten counts the
 * unwritten blocks dropped. The caller drops the blocks of one that does
 * not lend. */
int kv_share_purge(kv_txn *txn, uint64_t ino, uint64_t flags, int64_t *unwritten);
/* Whether block idx of home is lent: 0 no, 1 yes (*end: the first block
 * after idx not known lent), -errno. With *next the first block after idx
 * some lend record starts at (UINT64_MAX: none). */
int kv_lend_covered(kv_txn *txn, uint64_t home, uint64_t idx, uint64_t *end, uint64_t *next);
/* Whether the image may hold records of incompatible feature bit (the
 * last commit's, or the open op's: a bit set too early is harmless). */
static inline int kv_has_feature(kv_env *e, uint64_t bit)
{
	return (atomic_load_explicit(&e->features, memory_order_acquire) & bit) != 0;
}
/* Set an incompat feature bit in t's superblock (data.c). */
int kv_feature_set(kv_txn *txn, uint64_t bit);

/* Compressed blocks (zstd.c). The scratch of t (invariant 3). */
static inline struct kv_zscratch *kv_txn_z(kv_txn *t)
{
	return t->write ? &t->env->z.scratch : &((struct kv_reader *)t)->z;
}
/* A kv_data_read of up to len bytes begins (room for its blocks) and ends. */
void kv_z_begin_read(kv_txn *txn, size_t len);
void kv_z_end_read(kv_txn *txn);
/* The compressed block value v of (ino, idx), its checksum verified
 * (kv_block_verify said KV_BLOCK_ZSTD), decompressed into t's scratch: v
 * then points there, len data bytes and room for a checksum after, as a
 * plain block's value. -EIO (logged), -ENOMEM. */
int kv_block_unz(kv_txn *txn, uint64_t ino, uint64_t idx, kv_val *v, size_t len);
void kv_z_free(struct kv_zscratch *z);
/* A block the writer's role merged (len data bytes at data, for (ino,
 * idx)), compressed at level 1 when that takes less of the image and the
 * image's mounts compress: 1 with *out, *olen and *sum the frame to store
 * (valid until the next call), else 0 (stored as it is). */
int kv_z_pack_merged(kv_txn *txn, uint64_t ino, uint64_t idx, const void *data, size_t len,
		     const void **out, size_t *olen, uint64_t *sum);
/* The checksum of a compressed block's frame (hash.c): seeded apart from
 * kv_block_csum's. */
uint64_t kv_block_zcsum(uint64_t ino, uint64_t idx, const void *frame, size_t len);

/* Superblock write through the writer's transaction (inode.c). */
int kv_super_store(kv_txn *txn, const struct kv_super *s);
/* On a store other mounts write (engine.h: shared), before a top-level
 * write transaction x changes anything: the writers' lock taken, then the
 * superblock as they left it becomes env's (the inode counter, the feature
 * bits). -EIO. */
int kv_super_reload(kv_env *env, kv_etxn *x);
/* Its two halves apart, for a window that guesses the superblock did not
 * move (window.c): the lock taken and the superblock's get sent ahead
 * (engine prefetch); then, once an op ran, whether the superblock x reads
 * is env's: 1 it is; 0 it was not and env took it; -EIO. */
int kv_super_lock(kv_env *env, kv_etxn *x);
int kv_super_check(kv_env *env, kv_etxn *x);

#endif
