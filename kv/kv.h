/*
 * kv.h - the kvfs store: a whole filesystem's records (superblock, inodes,
 * directory entries, data blocks, xattrs and ACLs, orphans, shared blocks)
 * kept by an engine (engine.h): one LMDB image file, or a PostgreSQL
 * database that several hosts mount (docs/SCALE.md).
 *
 * This is the only header the daemon (fs/) and the tools (tools/) include;
 * the engines, and lmdb.h and libpq-fe.h with them, stay behind it. Every
 * function returns 0 (or a count where it says so) on success and a
 * negative errno on failure. The records these functions read and write are
 * described byte by byte in docs/FORMAT.md; they are the same on both
 * engines. docs/ARCHITECTURE.md defines the words used here (role, window,
 * told, lazy, settle, reserve, ...).
 *
 * Transactions.
 *   Read side: kv_read_begin() hands the calling thread its own read-only
 *   transaction, recycled across calls, never opened per call: one snapshot
 *   (engine.h contract 3). kv_read_begin_ino() also sees what the open
 *   window holds (window.c). Pointers it returns (inline data, names, block
 *   bytes, xattr values) point into the engine's memory (LMDB: the memory
 *   map; PostgreSQL: the results its connection keeps) and stay valid until
 *   kv_read_end(). A thread holds at most one read transaction at a time and
 *   must end it before it blocks on anything else (a held reader pins old
 *   pages and the image grows, and a growth of the map waits for it).
 *
 *       idle --kv_read_begin--> active --kv_read_end--> idle
 *                               (pointers valid)
 *
 *   Write side: one thread at a time holds the writer's role and with it
 *   the only write transaction (writer.c). Callers submit operations
 *   (kv_submit / kv_write / kv_submit_lazy); the role runs each op's apply()
 *   in a child transaction of a batch, or of the open window (window.c),
 *   and tells the op (done(), or kv_write's return): after the commit that
 *   holds it without a window (durability=full, window_ms 0), once it is
 *   applied with one (the window commits within window_ms). An op whose
 *   apply() fails is rolled back alone. apply() may run more than once (the
 *   map grew, an op failed and the batch was replayed, or a guess on a
 *   shared store was wrong): it must have no effect outside the transaction
 *   and its own result fields.
 *
 * Errors. Each function lists every error it returns, as lmdb.h does. These
 * mean the same wherever they appear:
 *   -EIO     a failure of the engine (a damaged page, a server lost), or a
 *            record that fails its checks (logged once, as "what: reason",
 *            through kv_set_log's function)
 *   -ENOSPC  in a write transaction: the store is full. On an image file
 *            apply() returns it as it is; the writer grows the map and runs
 *            apply() again, so the op's caller sees -ENOSPC only when the map
 *            cannot grow (the image is at its maximum or the disk is full)
 *   -EAGAIN  no room for another read transaction (LMDB's reader table is
 *            full: too many threads hold read transactions at once); logged
 *   -EROFS   a write function called with a read transaction, or a write
 *            submitted to a read-only env (or to one whose window's commit
 *            failed: window.c invariant 5)
 *   -ENOMEM  out of memory
 * kv_err (kv_int.h, err.c) is the one place an engine's codes become these.
 */
#ifndef KVFS_KV_H
#define KVFS_KV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Version 2 added the extent and lend databases (shared blocks); a version 1
 * image is upgraded by its first read-write open (env.c). */
#define KV_FORMAT_VERSION 2
/* Incompatible features (superblock feature_incompat), docs/FORMAT.md.
 * UNWRITTEN: blocks of no bytes that fallocate stored, set when the first
 * one is (a kvfs without it would call them damaged).
 * SHARED: files that borrow blocks of others (share.c), set at the first
 * share (a kvfs without it would read holes). */
#define KV_FEATURE_INCOMPAT_UNWRITTEN 0x1ULL
#define KV_FEATURE_INCOMPAT_SHARED 0x2ULL
/* COMPRESSED: data blocks stored as zstd frames (zstd.c), set when the
 * first one is (a kvfs without it would call them damaged). */
#define KV_FEATURE_INCOMPAT_COMPRESSED 0x4ULL
#define KV_FEATURE_INCOMPAT_KNOWN                                                          \
	(KV_FEATURE_INCOMPAT_UNWRITTEN | KV_FEATURE_INCOMPAT_SHARED |                      \
	 KV_FEATURE_INCOMPAT_COMPRESSED)
/* Inode flags (kv_inode.flags). LENDS: some of its blocks may be lent to
 * other files (a write to them copies them to the borrowers first).
 * BORROWS: some of its blocks may be another file's (extent records). */
#define KV_INODE_LENDS 0x1ULL
#define KV_INODE_BORROWS 0x2ULL
#define KV_INODE_FLAGS_KNOWN (KV_INODE_LENDS | KV_INODE_BORROWS)
/* Blocks one extent record covers at most, so the borrowers of a block are
 * found among the lend records that start at most this many blocks before
 * it. */
#define KV_EXTENT_MAX 256
/* The meta record of the mount defaults (kvfs-tune -o): 1 to
 * KV_DEFAULTS_MAX printable ASCII bytes, options as -o takes them. */
#define KV_DEFAULTS_KEY "defaults"
#define KV_DEFAULTS_MAX 255
/* The value length of an unwritten block: a checksum of no bytes. */
#define KV_BLOCK_UNWRITTEN_LEN 8
/* The meta record that counts the unwritten blocks (u64, little-endian). */
#define KV_UNWRITTEN_KEY "unwritten"
#define KV_ROOT_INO 1
#define KV_NAME_MAX 255
#define KV_XATTR_NAME_MAX 255
#define KV_XATTR_SIZE_MAX 65536
#define KV_LABEL_MAX 63
#define KV_SYMLINK_MAX 4095
/* Block sizes are data bytes per block. 4072 = one 4 KiB page minus LMDB's
 * 16-byte overflow header and the 8-byte checksum: a full block fills its
 * page exactly. In general k * 4096 - 24 fills k pages. */
#define KV_BLOCK_SIZE_DEFAULT 4072
#define KV_BLOCK_SIZE_MIN 1024
#define KV_BLOCK_SIZE_MAX (1024 * 1024)
/* Directory cookies handed out by kv_dir_next are >= this value, so callers
 * may use 1 .. KV_COOKIE_FIRST - 1 for entries they synthesize ("." and ".."). */
#define KV_COOKIE_FIRST 16

typedef struct kv_env kv_env;
typedef struct kv_txn kv_txn;
typedef struct kv_iter kv_iter;

/* The databases of an image (docs/FORMAT.md). */
enum kv_db { KV_DB_META, KV_DB_INODE, KV_DB_DIRENT, KV_DB_DATA, KV_DB_XATTR, KV_DB_ORPHAN,
	     KV_DB_EXTENT, KV_DB_LEND, KV_NDB };

enum kv_durability {
	KV_DURABLE_NORMAL = 0, /* data synced per commit, meta page not: consistent
	                          across power loss, may lose the last commits;
	                          kv_sync() makes everything durable */
	KV_DURABLE_FULL,       /* every commit durable before it is acknowledged */
	KV_DURABLE_NONE,       /* no sync at commit: safe against a killed process,
	                          not against an OS crash or power loss */
};

struct kv_open_opts {
	int readonly;                  /* no writer; no exclusive lock */
	enum kv_durability durability; /* ignored when readonly */
	uint64_t max_size;             /* largest the image may grow, bytes; 0: no limit */
	unsigned sync_interval_ms;     /* KV_DURABLE_NORMAL/NONE: make commits durable at
	                                  most this long after they happen; 0: never */
	unsigned window_ms;            /* KV_DURABLE_NORMAL/NONE: acknowledge a change once
	                                  it is applied in the open window, and commit
	                                  the window within this many ms (window.c);
	                                  0: commit every batch before its ops are told */
	unsigned alone_window_ms;      /* window_ms 0 on a store many mount: a window
	                                  of this many ms while this mount is the
	                                  store's only one (its lease, window.c) */
	int mount;                     /* a mount among others of a store many mount (a
	                                  postgresql:// URL: docs/SCALE.md). Any other
	                                  read-write open (fsck's repairs, kvfs-tune) has
	                                  the store to itself: -EBUSY while one is
	                                  mounted, and mounts are refused meanwhile. An
	                                  image file has one writer whatever it says */
};

struct kv_mkfs_opts {
	uint32_t block_size; /* 0: KV_BLOCK_SIZE_DEFAULT */
	const char *label;   /* NULL or at most KV_LABEL_MAX bytes */
	uint32_t root_uid, root_gid;
	uint32_t root_mode;  /* permission bits of the root directory */
	int force;           /* replace an existing file */
};

struct kv_super {
	uint32_t version;
	uint32_t block_size;
	uint64_t feature_compat, feature_ro_compat, feature_incompat;
	uint8_t uuid[16];
	uint64_t next_ino;
	int64_t created_ns;
	char label[KV_LABEL_MAX + 1];
};

struct kv_usage {
	uint64_t file_bytes;  /* size of the image file */
	uint64_t ahead_bytes; /* blocks it holds past its size (kept allocated ahead) */
	uint64_t map_bytes;   /* current map size */
	uint64_t max_bytes;   /* configured maximum (0: none) */
	uint64_t used_bytes;  /* pages in use by the last snapshot */
	uint64_t promised_bytes; /* kept free for the unwritten blocks (kv/lmdb/room.c) */
	uint64_t extent_bytes; /* up to the last page of the image (free pages too) */
	uint64_t avail_bytes; /* what ordinary changes may still use */
	uint64_t reserve_bytes; /* kept for deletes on top of that (kv/lmdb/room.c) */
	uint32_t page_size;
	uint64_t inodes;      /* inode records */
	uint64_t blocks;      /* data blocks */
	uint64_t unwritten;   /* of them, unwritten (fallocate's; no bytes yet) */
	uint64_t dirents;     /* dirent keys */
	uint64_t xattrs;
	uint64_t orphans;
};

/* An inode as decoded from its record. inline_data holds a symlink's target:
 * it points into the engine's value (read txn: LMDB's map, engine.h
 * contract 5), into the writer's scratch memory (write txn: valid to the
 * end of the op, for the last KV_INL_SLOTS such inodes it got) or into
 * caller memory (kv_inode_put). */
struct kv_inode {
	uint64_t ino;
	uint32_t mode, uid, gid, nlink;
	uint64_t size;    /* bytes; for directories: number of entries */
	uint64_t rdev;
	uint64_t flags;   /* KV_INODE_* */
	uint64_t nblocks; /* data blocks stored, its own and borrowed ones */
	int64_t atime_ns, mtime_ns, ctime_ns, btime_ns;
	uint64_t parent;  /* directories: the parent directory's ino */
	const void *inline_data;
	uint32_t inline_len;
};

struct kv_dirent {
	uint64_t ino;
	uint8_t type;     /* DT_* value: kv_dirent_type(mode) */
	uint8_t namelen;
	const char *name; /* not NUL-terminated; into the engine's value */
};

/* The type a directory entry records for an inode of this mode: the DT_*
 * value of <dirent.h> (DT_REG, DT_DIR, ...), which is (mode & S_IFMT) >> 12
 * (docs/FORMAT.md). */
static inline uint8_t kv_dirent_type(uint32_t mode)
{
	return (uint8_t)((mode & S_IFMT) >> 12);
}

/* Where the store's log lines go (default: stderr, prefixed "kvfs: "). */
typedef void (*kv_log_fn)(const char *line);
void kv_set_log(kv_log_fn fn);

/* ---- images ---- */

/* Many mounts of one store (a shared engine: docs/SCALE.md). kv_watch has
 * fn called, on a thread of the store's, for each change another mount
 * committed: an inode whose attributes, data or xattrs changed (name NULL),
 * or a name added to or removed from directory ino. fn NULL: no more calls
 * (once it returns, none runs). -EOPNOTSUPP on a store only one mount
 * writes (an image file); -EIO, -ENOMEM. */
typedef void (*kv_change_fn)(void *arg, uint64_t ino, const char *name, size_t len);
int kv_watch(kv_env *env, kv_change_fn fn, void *arg);
int kv_is_shared(kv_env *env);
/* A store many mount, held by this mount alone (its window's lease: no
 * other mount can open it before what the window holds is committed). */
int kv_is_alone(kv_env *env);
/* A shared store whose server went away while changes it had acknowledged
 * waited for their commit lost them, and goes on (window.c). So that no
 * fsync claims them: take kv_lost_sample at an open (writing: for writing),
 * and kv_lost_check(sample, ino) at each fsync of that open file, and with
 * ino 0 at its close. -EIO when the store lost changes while it was open
 * (a close: only of a file open for writing, as NFS's close), and at the
 * first fsync of an inode a loss changed, whenever it was opened (as
 * Linux reports a writeback error to the next fsync); else 0. Always 0 on
 * other stores. */
uint64_t kv_lost_sample(kv_env *env, int writing);
int kv_lost_check(kv_env *env, uint64_t sample, uint64_t ino);

/* An image is named by a path (an LMDB image file) or by a postgresql://
 * (or postgres://) URL (a PostgreSQL database: docs/SCALE.md). 1 for a
 * URL: no file of its own to stat, lock, chmod or remove. */
int kv_image_is_url(const char *image);

/* Create an empty filesystem at path: superblock and a root directory.
 * err (errlen bytes) receives a one-line message on failure.
 * -EEXIST: path exists and !opts->force, or is not a regular file.
 * -EINVAL: bad block size or label. -EBUSY: replacing an image in use
 * (kv_open). -ENOSPC, -EIO, -ENOMEM; and the host's errno from making the
 * file (-ENOENT: no such directory, -EACCES, -EROFS, ...). */
int kv_mkfs(const char *path, const struct kv_mkfs_opts *opts, char *err, size_t errlen);

/* Open an image. A read-write open takes the image's lock (an image file:
 * flock, exclusive; a database: an advisory lock, shared by mounts
 * (kv_open_opts.mount), whole for any other read-write open) and starts the
 * writer thread; an open the lock refuses fails with -EBUSY. err receives a one-line message on failure.
 * -EINVAL: not a kvfs image (foreign file, empty, random bytes).
 * -EPROTONOSUPPORT: a format version or incompatible feature this build does
 *  not know. -EIO: truncated or damaged. -EBUSY: mounted or opened
 * read-write elsewhere. -EAGAIN, -ENOMEM; and the host's errno from opening
 * the file (-ENOENT, -EACCES, ...). */
int kv_open(const char *path, const struct kv_open_opts *opts, kv_env **out, char *err,
            size_t errlen);
/* Drain the writer, end every thread's read transaction, close. */
void kv_close(kv_env *env);

void kv_super_get(kv_env *env, struct kv_super *out);
uint32_t kv_block_size(kv_env *env);
int kv_is_readonly(kv_env *env);
/* Counts and sizes as of the last commit (a read transaction of its own).
 * -EAGAIN, -EIO, -ENOMEM. */
int kv_usage_get(kv_env *env, struct kv_usage *out);
/* Bytes ordinary changes can still use, as of the last commit: exact near
 * the limit, a lower bound (still over 64 MiB) far from it; one atomic load.
 * UINT64_MAX on a read-only env. */
uint64_t kv_room_avail(kv_env *env);
/* Make every committed change durable (fsync, syncfs); 0 at once on a
 * read-only env and with KV_DURABLE_FULL. -EIO, -ENOSPC. */
int kv_sync(kv_env *env);

/* ---- transactions ---- */

/* The calling thread's read transaction (not nested: end it first).
 * -EAGAIN, -ENOMEM, -EIO. */
int kv_read_begin(kv_env *env, kv_txn **out);
/* A read of inode ino's records (its inode, its data and xattrs; a
 * directory's entries) that sees every change told before it began, also
 * those the open window holds (window.c): the thread's snapshot when ino did
 * not change since the last commit, else the window itself (the writer's
 * role held until kv_read_end: the thread holds no other read txn, and
 * waits for no lock or request until then). Same errors as kv_read_begin. */
int kv_read_begin_ino(kv_env *env, uint64_t ino, kv_txn **out);
/* Whether a read of ino in txn (begun by kv_read_begin_ino for another
 * inode) could miss a change told before it began: then end it and read
 * again with kv_read_begin_ino(ino) or kv_read_begin_window. */
int kv_read_changed(kv_txn *txn, uint64_t ino);
/* On a shared store: ino's record as this mount's last commit of it left
 * it, without a read, when no change of this mount to it came since, no
 * other mount's note of it arrived since, and that commit was under
 * max_age_ns ago (icache.c); inline_data NULL. -ENOENT otherwise (also on
 * every store one mount writes). */
int kv_inode_recent(kv_env *env, uint64_t ino, int64_t max_age_ns, struct kv_inode *out);
/* The window itself (or a snapshot, without one): for a read of inodes not
 * known beforehand, such as a listing's. */
int kv_read_begin_window(kv_env *env, kv_txn **out);
void kv_read_end(kv_txn *txn);

typedef int (*kv_apply_fn)(kv_txn *txn, void *arg);
typedef void (*kv_done_fn)(void *arg, int rc);

#define KV_OP_SYNC 1    /* make the batch durable before done() */
#define KV_OP_COMMIT 8  /* commit the open window before done() (window.c) */
#define KV_OP_RESERVE 2 /* a change that frees space (unlink, rmdir, truncate,
                           punch, an orphan's purge): may use the reserve an
                           image keeps so that deleting works when it is full
                           (kv/lmdb/room.c) */
#define KV_OP_OVERWRITE 4 /* a write over stored blocks, which frees what it
                           replaces: may go past the room ordinary changes
                           have, where its apply() must add nothing
                           (kv_txn_reserved) */

struct kv_op {
	kv_apply_fn apply;
	kv_done_fn done; /* called when the op is told (this file's preamble: after
	                    the commit, or once applied in the window), on the
	                    thread that applied it; may be NULL */
	void *arg;
	unsigned flags;
	/* owned by the store while queued */
	int rc;
	struct kv_op *next;
};

/* 1 when apply() runs past the room ordinary changes have (the room:
 * kv/lmdb/room.c, through the engine's hooks): in the reserve, or on an
 * image whose pages in use reached its limit less the reserve. An op
 * flagged KV_OP_OVERWRITE refuses there (-ENOSPC) what would take room for
 * good. */
int kv_txn_reserved(const kv_txn *txn);

/* Queue op; done(arg, rc) follows the commit that holds it, or with a
 * window its apply in the window (an op flagged KV_OP_SYNC or KV_OP_COMMIT
 * still waits for the window's commit); rc < 0: rolled back. rc is
 * apply()'s result, or, when apply() succeeded and the batch
 * did not commit: -ENOSPC (the map cannot grow, or the image is full but
 * for the reserve and op may not use it), -EFBIG (op alone is too large for
 * one transaction), -EIO, -ENOMEM; with KV_OP_SYNC, the sync's -EIO or
 * -ENOSPC. kv_submit itself: -EROFS on a read-only env (done is not
 * called). */
int kv_submit(kv_env *env, struct kv_op *op);
/* Queue op for later: it joins the next batch anyone runs, or runs within
 * KV_LAZY_MS when no batch comes (for work nobody waits for, such as freeing
 * an orphan: it then costs no commit of its own); with a window the writer
 * thread applies it into the window at once. Same contract as
 * kv_submit(). */
#define KV_LAZY_MS 50
int kv_submit_lazy(kv_env *env, struct kv_op *op);
/* Commit the lazy ops queued now, if any, and with a window what it holds
 * (before an answer that counts what they change, such as the free space
 * after a delete). 0 on a read-only env; the commit's errors as
 * kv_write's. */
int kv_settle(kv_env *env);
/* Submit and wait: returns apply()'s result once the op is told (once
 * committed, or with a window once applied in it), or the errors
 * kv_submit hands done(); -EROFS on a read-only env. The calling thread
 * holds no read transaction (a map growth waits for every reader) and is
 * not running an apply() or done() (it would wait for itself); debug builds
 * assert both. */
int kv_write(kv_env *env, kv_apply_fn apply, void *arg, unsigned flags);

/* ---- inodes (any transaction; writes need a write transaction) ---- */

/* -ENOENT: no such inode. -EIO. */
int kv_inode_get(kv_txn *txn, uint64_t ino, struct kv_inode *out);
/* The *_prefetch calls: a record of txn is about to be read. A store on a
 * server (engine.h: prefetch) sends the reads an op names first together,
 * one wait for all; an image file ignores them. Nothing is returned: the
 * read that follows says what it finds. */
void kv_inode_prefetch(kv_txn *txn, uint64_t ino);
/* -ENAMETOOLONG: inline data over KV_SYMLINK_MAX. -EROFS, -ENOSPC, -EIO. */
int kv_inode_put(kv_txn *txn, const struct kv_inode *in);
/* Allocate the next inode number (never reused). -EROFS; -ENOSPC: the
 * counter is spent. */
int kv_ino_alloc(kv_txn *txn, uint64_t *ino);
/* Remove an inode record with all its data blocks, xattrs and orphan entry
 * (0 when there was none). -EROFS, -ENOSPC, -EIO. */
int kv_inode_purge(kv_txn *txn, uint64_t ino);

/* -EROFS, -ENOSPC, -EIO. */
int kv_orphan_add(kv_txn *txn, uint64_t ino);
/* -ENOENT: ino is no orphan. -EROFS, -ENOSPC, -EIO. */
int kv_orphan_remove(kv_txn *txn, uint64_t ino);
/* First orphan with ino > after into *ino; -ENOENT when none. -EIO. */
int kv_orphan_next(kv_txn *txn, uint64_t after, uint64_t *ino);

/* ---- directory entries ---- */

/* Names are 1 to KV_NAME_MAX bytes: -ENAMETOOLONG for a longer one, -ENOENT
 * for an empty one, from every function here. A dirent list that does not
 * parse is -EIO (logged). */
/* -ENOENT: no such name. -EIO. */
int kv_dirent_lookup(kv_txn *txn, uint64_t dir, const char *name, size_t len,
                     struct kv_dirent *out);
/* Before kv_dirent_lookup or kv_dirent_add of name (kv_inode_prefetch). */
void kv_dirent_prefetch(kv_txn *txn, uint64_t dir, const char *name, size_t len);
/* -EEXIST: the name is taken. -ENOSPC: 256 names of dir share its hash, or
 * the map is full. -EROFS, -ENOMEM, -EIO. */
int kv_dirent_add(kv_txn *txn, uint64_t dir, const char *name, size_t len, uint64_t ino,
                  uint8_t type);
/* -ENOENT: no such name. -EROFS, -ENOSPC, -ENOMEM, -EIO. */
int kv_dirent_remove(kv_txn *txn, uint64_t dir, const char *name, size_t len);
/* Point an existing name at another inode (rename over a target).
 * -ENOENT: no such name. -EROFS, -ENOSPC, -ENOMEM, -EIO. */
int kv_dirent_replace(kv_txn *txn, uint64_t dir, const char *name, size_t len, uint64_t ino,
                      uint8_t type);
/* The entry after *cookie (0: the first) in cookie order; *cookie becomes the
 * entry's cookie, from which the next call resumes. Cookies are stable: an
 * entry keeps its cookie for as long as it exists, so a listing that resumes
 * while others add and remove entries sees every surviving entry exactly
 * once. -ENOENT at the end. -EIO. */
int kv_dir_next(kv_txn *txn, uint64_t dir, uint64_t *cookie, struct kv_dirent *out);

/* ---- file data ---- */

/* Describe bytes [off, off + len) of a file of the given size as iovecs into
 * the engine's values (LMDB: the map; a compressed block: the reader's
 * scratch, zstd.c; holes and short tails: a static zero buffer). Returns the
 * byte count (0 at or past EOF) and sets *iovcnt; -EIO on a checksum
 * mismatch; -E2BIG when iovmax is too small for the range. */
ssize_t kv_data_read(kv_txn *txn, uint64_t ino, uint64_t size, uint64_t off, size_t len,
                     struct iovec *iov, int iovmax, int *iovcnt);
/* Write len bytes at off; updates in->size and in->nblocks (the caller
 * stores the inode). -EFBIG beyond the largest offset. -EIO: a block kept
 * in part fails its checksum. -EROFS, -ENOSPC. */
int kv_data_write(kv_txn *txn, struct kv_inode *in, uint64_t off, const void *buf, size_t len);
/* Before a write of [off, off + len) of inode ino: its blocks are about to
 * be read (kv_inode_prefetch); together with the inode's own, one wait. */
void kv_data_prefetch(kv_txn *txn, uint64_t ino, uint64_t off, size_t len);
/* The checksums of the blocks a write of [off, off + len) of inode ino
 * starts on a block boundary, in order, at most max: computed before the
 * write takes the writer's role, so the role spends its time storing. */
size_t kv_data_sums(kv_env *env, uint64_t ino, uint64_t off, const void *buf, size_t len,
		    uint64_t *sums, size_t max);
/* The blocks of a write that kv_data_compress stored compressed: block i
 * (as kv_data_sums counts them) is zlen[i] bytes at data + zoff[i], or as
 * it is where zlen[i] is 0. data is the calling thread's own, valid until
 * its next kv_data_compress. */
struct kv_zblocks {
	const unsigned char *data;
	const uint32_t *zoff, *zlen;
	size_t n;
};
/* Compress with zstd at level (1..19) the blocks kv_data_sums summed in
 * sums[0 .. nsums), in the calling thread, before the write takes the
 * writer's role; a block whose frame takes less of the image is kept so,
 * its sums[i] replaced by the frame's checksum. Returns the blocks looked
 * at (0: none, level 0, or no memory: the write stores them as they are). */
size_t kv_data_compress(kv_env *env, uint64_t ino, uint64_t off, const void *buf, size_t len,
			int level, uint64_t *sums, size_t nsums, struct kv_zblocks *out);
/* Whether the writer compresses the blocks it merges from part of a write
 * and what was stored (0: no; else yes, at level 1): the mount's -o
 * compress, set once at mount. */
void kv_set_compress(kv_env *env, int level);
/* kv_data_write with the checksums from kv_data_sums over the same bytes,
 * and the compressed blocks from kv_data_compress (z NULL: none); the same
 * errors. A block written over in part is stored as it is. */
int kv_data_write_sums(kv_txn *txn, struct kv_inode *in, uint64_t off, const void *buf,
		       size_t len, const uint64_t *sums, size_t nsums, const struct kv_zblocks *z);
/* Set the size, dropping or trimming blocks past it; updates in. -EFBIG
 * beyond the largest offset. -EIO: a block kept in part fails its
 * checksum. -EROFS, -ENOSPC. */
int kv_data_truncate(kv_txn *txn, struct kv_inode *in, uint64_t size);
/* Make [off, off + len) a hole (whole blocks dropped, partial ones zeroed);
 * the size is unchanged; updates in->nblocks. -EIO: a block kept in part
 * fails its checksum. -EROFS, -ENOSPC. */
int kv_data_punch(kv_txn *txn, struct kv_inode *in, uint64_t off, uint64_t len);
/* fallocate's ZERO_RANGE over [off, end) within in->size: its bytes read as
 * zeros after, and its blocks are allocated (unwritten where whole, zeroed
 * in place where in part), as kv_data_allocate promises; the caller sets
 * the size first when the range grows the file. Updates in->nblocks. -EIO:
 * a block kept in part fails its checksum. -EROFS, -ENOSPC (the promise
 * does not fit: nothing changed, the op rolled back). */
int kv_data_zero(kv_txn *txn, struct kv_inode *in, uint64_t off, uint64_t end);
/* Store unwritten blocks in the holes of [off, end) within in->size
 * (fallocate: they read as zeros, and an image file keeps free the room
 * their first writes take, kv/lmdb/room.c), and fill a short block out to
 * the size with zeros; at most max_blocks blocks are stored: *next is
 * where to go on (end, or in->size, when done).
 * Updates in->nblocks. -EIO: a stored block fails its checksum. -EROFS,
 * -ENOSPC. */
int kv_data_allocate(kv_txn *txn, struct kv_inode *in, uint64_t off, uint64_t end,
		     uint64_t max_blocks, uint64_t *next);
/* The blocks of [off, end) of inode ino that are holes. -EIO. */
int kv_data_holes(kv_txn *txn, uint64_t ino, uint64_t off, uint64_t end, uint64_t *count);
/* SEEK_DATA / SEEK_HOLE from off in a file of the given size.
 * -ENXIO: off >= size, or no data at or after off. -EINVAL: another
 * whence. -EIO: a block fails its checksum. */
int kv_data_seek(kv_txn *txn, uint64_t ino, uint64_t size, uint64_t off, int whence,
                 uint64_t *out);
/* Shared blocks (share.c; copy_file_range): make blocks [didx, didx + n)
 * of dst read as blocks [sidx, sidx + n) of src without copying them. What
 * dst held there goes first; src's stored blocks and the blocks it
 * borrows are lent (their home is the file that stores them), its holes
 * and unwritten blocks become holes. dst's size grows to cover the range
 * if it must (a caller that shares a file's short last block sets dst's
 * size to src's after). Sets KV_INODE_BORROWS on dst (the caller stores
 * dst) and KV_INODE_LENDS on src when it first lends (src's record is
 * stored then).
 * -EINVAL: dst and src are one file. -EIO: damaged records. -EROFS,
 * -ENOSPC. */
int kv_data_share(kv_txn *txn, struct kv_inode *dst, uint64_t didx, struct kv_inode *src,
		  uint64_t sidx, uint64_t n);
/* One block, checksum verified (a borrowed block: its home's). -ENOENT: a
 * hole. -EIO. */
int kv_block_get(kv_txn *txn, uint64_t ino, uint64_t idx, const void **data, size_t *len);

/* ---- extended attributes ---- */

/* The name rule, Linux's (ext4 and tmpfs answer the same; the table is in
 * kv/xattr.c), for the len bytes at name:
 *   0            a name kvfs sets: "user.", "trusted." or "security." and at
 *                least one byte more, or one of the two ACL names
 *                (KV_ACL_ACCESS, KV_ACL_DEFAULT)
 *   -EOPNOTSUPP  in no namespace kvfs implements: no known prefix ("foo.bar",
 *                "x"), or any other "system." name
 *   -EINVAL      a namespace prefix with nothing after it ("user.")
 *   -ERANGE      no name at all: empty, over KV_XATTR_NAME_MAX bytes, or
 *                holding a NUL byte
 * kv_xattr_set refuses what this refuses. An image may still hold
 * -EOPNOTSUPP and -EINVAL names (kvfs once stored any name): they are read,
 * listed and removed like any other; only -ERANGE is damage. */
int kv_xattr_name_check(const char *name, size_t len);
/* -ENODATA: no such attribute. -ERANGE: name empty or too long. -EIO. */
int kv_xattr_get(kv_txn *txn, uint64_t ino, const char *name, const void **val, size_t *len);
/* Before kv_xattr_get of name (kv_inode_prefetch). */
void kv_xattr_prefetch(kv_txn *txn, uint64_t ino, const char *name);
/* flags: 0, XATTR_CREATE (-EEXIST) or XATTR_REPLACE (-ENODATA); -EINVAL:
 * other flags. -ERANGE, -EOPNOTSUPP, -EINVAL: a name kv_xattr_name_check
 * refuses; -E2BIG: value too large. An ACL's value must pass kv_acl_check
 * (-EINVAL, -E2BIG); what it means for the mode is the caller's. -EROFS,
 * -ENOSPC, -EIO. */
int kv_xattr_set(kv_txn *txn, uint64_t ino, const char *name, const void *val, size_t len,
                 int flags);
/* -ENODATA: no such attribute. -ERANGE: name empty or too long. -EROFS,
 * -ENOSPC, -EIO. */
int kv_xattr_remove(kv_txn *txn, uint64_t ino, const char *name);
/* NUL-separated names into buf. Returns the bytes needed; with size 0 only
 * counts. -ERANGE: buf too small. -EIO: a malformed name stored. */
ssize_t kv_xattr_list(kv_txn *txn, uint64_t ino, char *buf, size_t size);

/* ---- POSIX ACLs (kv/acl.c): the values of two xattrs ---- */

#define KV_ACL_ACCESS "system.posix_acl_access"
#define KV_ACL_DEFAULT "system.posix_acl_default"
#define KV_ACL_TYPE_ACCESS 1
#define KV_ACL_TYPE_DEFAULT 2
/* The most entries an ACL may have: the kernel reads one back into a page
 * (4 + 8 * 511 bytes). */
#define KV_ACL_ENTRIES_MAX 511
#define KV_ACL_SIZE_MAX (4 + 8 * KV_ACL_ENTRIES_MAX)

/* An entry's tag (the kernel's ACL_USER_OBJ ... ACL_OTHER), and the id of
 * the entries that name no one. */
#define KV_ACL_USER_OBJ 0x01
#define KV_ACL_USER 0x02
#define KV_ACL_GROUP_OBJ 0x04
#define KV_ACL_GROUP 0x08
#define KV_ACL_MASK 0x10
#define KV_ACL_OTHER 0x20
#define KV_ACL_UNDEFINED_ID 0xffffffffu

struct kv_acl_entry {
	unsigned tag;  /* KV_ACL_USER_OBJ ... KV_ACL_OTHER */
	unsigned perm; /* rwx: 4 2 1 */
	uint32_t id;   /* a uid (KV_ACL_USER), a gid (KV_ACL_GROUP), else
	                  KV_ACL_UNDEFINED_ID */
};

/* KV_ACL_TYPE_ACCESS or _DEFAULT for the two ACL names, else 0. */
int kv_acl_name(const char *name);
/* The same for the len bytes at name, NUL-terminated or not (a raw key's). */
int kv_acl_type(const char *name, size_t len);
/* 0 when the len bytes at val are an ACL the kernel would accept (acl.c
 * invariant 1); -EINVAL, or -E2BIG: more than KV_ACL_ENTRIES_MAX entries. */
int kv_acl_check(const void *val, size_t len);
/* The permission bits an access ACL gives the mode (owner, group class,
 * other) into *mode, its other bits kept. Returns 1 when the ACL says more
 * than the mode can (it is to be stored), 0 when the mode says it all (it
 * is not), or kv_acl_check's error. */
int kv_acl_mode(const void *val, size_t len, uint32_t *mode);
/* chmod: the owner, group class and other entries of the access ACL at
 * val (len bytes, changed in place) set to mode's. 0 or kv_acl_check's
 * error. */
int kv_acl_chmod(void *val, size_t len, uint32_t mode);
/* A new inode of *mode in a directory whose default ACL is the len bytes at
 * acl: acl becomes the new inode's access ACL (in place), both masked by
 * each other as acl(5) says, and *mode its permission bits. Returns 1 when
 * the access ACL is to be stored, 0 when the mode says it all, or
 * kv_acl_check's error. */
int kv_acl_create(void *acl, size_t len, uint32_t *mode);
/* Entry i (from 0) of the ACL at val (len bytes, which kv_acl_check
 * accepted) into *e, for the tools that show or carry ACLs. -ENOENT: i is
 * past the last entry. */
int kv_acl_entry(const void *val, size_t len, size_t i, struct kv_acl_entry *e);

/* ---- raw access: fsck, dump and tests walk and mend the databases ---- */

const char *kv_db_name(enum kv_db db);
/* -ENOENT: no database of that name. */
int kv_db_lookup(const char *name, enum kv_db *db);
/* Records in db as of the transaction's snapshot. -EIO. */
int kv_db_count(kv_txn *txn, enum kv_db db, uint64_t *count);

/* A cursor over one database in key order. kv_iter_next returns the records
 * from the first key (or the key kv_iter_seek found) on; -ENOENT at the end.
 * Keys and values point into the engine's values (LMDB: the map), valid
 * until the next call or the end of the transaction. An iterator allocates
 * once, at open. kv_iter_open: -ENOMEM, -EIO. */
int kv_iter_open(kv_txn *txn, enum kv_db db, kv_iter **out);
/* Position at the first key >= key; the next kv_iter_next returns it.
 * -ENOENT: no such key (the iterator is at its end). -EIO. */
int kv_iter_seek(kv_iter *it, const void *key, size_t klen);
/* -ENOENT at the end. -EIO. */
int kv_iter_next(kv_iter *it, const void **key, size_t *klen, const void **val, size_t *vlen);
void kv_iter_close(kv_iter *it);

/* Write or delete one raw record (write transaction). -ENOENT: no such key
 * (delete). -EROFS, -ENOSPC; -EIO, also for a key LMDB refuses (empty, or
 * over 511 bytes). */
int kv_raw_put(kv_txn *txn, enum kv_db db, const void *key, size_t klen, const void *val,
               size_t vlen);
int kv_raw_del(kv_txn *txn, enum kv_db db, const void *key, size_t klen);

/* The parts of a raw key (docs/FORMAT.md). Fields a database's keys do not
 * have are 0. */
struct kv_key {
	uint64_t ino;     /* inode, orphan: the inode; dirent: the directory;
	                     data, xattr: the inode the record belongs to */
	uint64_t hash;    /* dirent: the name hash (kv_dirent_hash) */
	uint64_t idx;     /* data: the block index; extent: the first block it
	                     covers; lend: the lender's first block lent */
	uint64_t ino2, idx2; /* lend: the borrower and its first block */
	const char *name; /* xattr: the attribute's name; meta: the record's
	                     name. Not NUL-terminated; into the key */
	size_t namelen;
	int super;        /* meta: the record is the superblock */
};
#define KV_KEY_MAX (8 + KV_XATTR_NAME_MAX) /* the longest key kv_key_encode makes */

/* Split a raw key of db (klen bytes, as kv_iter_next hands it) into its
 * parts. Only the key's shape is checked: an xattr key's name is checked
 * by kv_xattr_name_check, a meta key may name a later version's record.
 * -EIO: not a key of db (a wrong length); the parts it does hold are still
 * set (ino, from a key of 8 bytes or more of a database keyed by inode
 * first; an xattr name of what follows), so damage can be told to its
 * inode. -EINVAL: no such db. */
int kv_key_decode(enum kv_db db, const void *key, size_t klen, struct kv_key *out);
/* The key of db with the parts in k (the inverse of kv_key_decode) into
 * buf, which has room for KV_KEY_MAX bytes (and for k->namelen, of a meta
 * key); returns its length. A meta key is the superblock's when k->super,
 * else k->name. An xattr name is at most KV_XATTR_NAME_MAX bytes. */
size_t kv_key_encode(enum kv_db db, const struct kv_key *k, void *buf);
/* The bytes every key of inode ino starts with, in the databases keyed by
 * inode first (inode, dirent, data, xattr, orphan; extent: the borrower's;
 * lend: the home's), into buf (8 bytes);
 * returns their count. kv_iter_seek there finds the inode's first record,
 * malformed ones included. */
size_t kv_key_prefix(uint64_t ino, void *buf);

/* An extent record (database extent): blocks [first, first + count) of
 * file ino read as blocks [hfirst, hfirst + count) of file home, which
 * stores them; each has a lend record (database lend) keyed by the home
 * side. Both have the same parts. */
struct kv_extent {
	uint64_t ino, first;   /* the borrower */
	uint64_t home, hfirst; /* the lender */
	uint64_t count;        /* 1 .. KV_EXTENT_MAX */
};
#define KV_EXTENT_VLEN 24 /* extent: home, hfirst, count (u64 le each) */
#define KV_LEND_VLEN 8    /* lend: count (u64 le) */
/* Decode an extent (db KV_DB_EXTENT) or lend record (KV_DB_LEND). -EIO:
 * malformed (a wrong length, a count of 0 or over KV_EXTENT_MAX, a range
 * past the last block index). */
int kv_decode_extent(enum kv_db db, const void *key, size_t klen, const void *val,
		     size_t vlen, struct kv_extent *out);
/* The key and value of x's record in db (KV_DB_EXTENT or KV_DB_LEND) into
 * key (32 bytes room) and val (KV_EXTENT_VLEN bytes room); sets the
 * lengths. */
void kv_encode_extent(enum kv_db db, const struct kv_extent *x, void *key, size_t *klen,
		      void *val, size_t *vlen);

/* Decode records read raw. -EIO: malformed. */
int kv_decode_inode(uint64_t ino, const void *val, size_t vlen, struct kv_inode *out);
/* The superblock record (meta "super"). -EINVAL: bad magic;
 * -EPROTONOSUPPORT: a later version (out->version is set). */
int kv_decode_super(const void *val, size_t vlen, struct kv_super *out);
/* The entry of a dirent list at *off, advancing *off; 1 at the end of the
 * list; -EIO: malformed. slot may be NULL. */
int kv_decode_dirent(const void *val, size_t vlen, size_t *off, struct kv_dirent *out,
                     uint8_t *slot);
/* Encode one entry of a dirent list (the inverse of kv_decode_dirent) at buf,
 * which has room for KV_DIRENT_LEN(de->namelen) bytes; returns that length.
 * Lists are entries back to back in slot order (docs/FORMAT.md). */
#define KV_DIRENT_LEN(namelen) (11 + (size_t)(namelen))
size_t kv_encode_dirent(void *buf, uint8_t slot, const struct kv_dirent *de);
/* The data bytes a block value of vlen bytes holds before its checksum: 0
 * when it is too short to hold one. The shape only, no checksum computed;
 * an image of block size B stores 1 to B data bytes a block. */
size_t kv_block_len(size_t vlen);
/* Check a data block value against its key: 0 and *len (its data bytes),
 * 1 for a block stored compressed (its checksum holds; *len its data bytes,
 * from the frame: kv_block_unpack gives them), -EIO on a bad length or
 * checksum. *len is set also then: the data bytes the value holds before
 * its checksum, 0 when too short to hold one. */
int kv_check_block(kv_env *env, uint64_t ino, uint64_t idx, const void *val, size_t vlen,
		   size_t *len);
/* The len data bytes of a compressed block value (kv_check_block said 1)
 * into out. -EIO: they do not decompress to len bytes; -ENOMEM. */
int kv_block_unpack(const void *val, size_t vlen, void *out, size_t len);
/* The name hash a dirent key carries. */
uint64_t kv_dirent_hash(const char *name, size_t len);

/* kvfs-tune (tune.c). Set the label (NULL: kept; at most KV_LABEL_MAX
 * bytes, else -EINVAL) and the uuid (NULL: kept) in a write txn. */
int kv_super_relabel(kv_txn *txn, const char *label, const uint8_t uuid[16]);
/* The mount defaults txn holds into buf (size at least KV_DEFAULTS_MAX + 1;
 * "" for none). -EIO: a damaged record. */
int kv_defaults_get(kv_txn *txn, char *buf, size_t size);
/* Store the mount defaults ("" removes them); -EINVAL for a string no
 * record may hold (empty is fine, too long, not printable ASCII). */
int kv_defaults_set(kv_txn *txn, const char *opts);
/* The mount defaults of the image at path, read from a read-only open of
 * its own (the daemon, before it opens it). kv_open's errors. */
int kv_defaults_peek(const char *path, char *buf, size_t size);

/* The count of unwritten blocks txn holds (0: none; -EIO: a damaged record). */
int kv_unwritten_get(kv_txn *txn, uint64_t *count);
/* The room the first write of an unwritten block takes: what fallocate
 * must find free per block (env.c; kv/lmdb/room.c keeps it free). */
uint64_t kv_room_per_block(const kv_env *env);
/* Count the unwritten blocks (fallocate's) in txn and set the image's count
 * of them to that (fsck); *count: how many. -EROFS. */
int kv_unwritten_recount(kv_txn *txn, uint64_t *count);

/* Set incompatible feature bits (KV_FEATURE_INCOMPAT_*) in the superblock
 * the records txn holds need (fsck: shared blocks on an image that does not
 * say it holds any). -EINVAL: a bit this build does not know. -EROFS,
 * -ENOSPC, -EIO. */
int kv_feature_add(kv_txn *txn, uint64_t incompat);

/* Raise the inode counter to at least next (fsck). -EROFS. */
int kv_ino_counter_raise(kv_txn *txn, uint64_t next);

/* Write a compacted, consistent copy of the image to dest (a new file),
 * taken from one snapshot: safe while the image is mounted and in use.
 * err receives a one-line message on failure. -EEXIST: dest exists.
 * -EAGAIN, -ENOSPC, -ENOMEM, -EIO; and the host's errno from making dest
 * (-ENOENT, -EACCES, ...). */
int kv_backup(kv_env *env, const char *dest, char *err, size_t errlen);

#endif
