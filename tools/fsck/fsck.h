/*
 * fsck.h - fsck.kvfs: the state the passes share, the in-memory index of
 * inodes, the problem table's codes and the repair queue.
 *
 * A run (main.c):
 *
 *   open the image (read-only for -n, read-write and locked for -p / -y)
 *   for each pass 1..7:
 *     walk one database in key order on a read snapshot (fsck_snapshot),
 *       report each problem (fsck_problem) and queue its repair (fix_*)
 *     fsck_flush: end the snapshot, apply the queued repairs through the
 *       writer, print the pass's problems with their outcome
 *   summary line (or the --json report), exit code as fsck(8)
 *
 * Memory is a sorted array of compact per-inode records (struct fino, 48
 * bytes) plus one struct fdir per directory: the dirent, data, xattr and
 * orphan keys all start with an ino, so each pass walks its database in
 * step with the array (a merge), and only a dirent's child is found by a
 * binary search in memory. Nothing does a per-inode lookup in the store.
 *
 * Invariants:
 *  1. f->ino[] is sorted by ino and holds every inode record pass 2 found,
 *     plus a root or /lost+found this run made (appended in order: their
 *     inos are above every other). Entries are never removed; a cleared
 *     inode is flagged F_GONE. Other records refer to inodes by index.
 *  2. The counters in memory (links, entries, subdirs, stored sizes and
 *     counts) describe the image as it will be once the repairs queued so
 *     far are applied: a repair updates them when it is queued; a problem
 *     left alone leaves them as found.
 *  3. With -n one read snapshot serves every pass, so a mounted image is
 *     checked as of one commit. Repairs are never applied while this thread
 *     holds a snapshot (the writer may have to grow the map, which waits
 *     for every reader).
 *  4. A repair is one writer op (one nested transaction): it happens whole
 *     or not at all, and a failed one leaves the others alone.
 *  5. Shared blocks (share.c) are modelled as invariant 2 says: pass 5
 *     holds every extent as it will be once the repairs queued are applied,
 *     so a home's block is kept exactly while some extent of the model
 *     names it.
 */
#ifndef KVFS_FSCK_H
#define KVFS_FSCK_H

#include <stdint.h>
#include <stdio.h>

#include "common.h"
#include "kv.h"
#include "progress.h"
#include "walk.h"

enum fsck_mode {
	MODE_CHECK, /* -n: read only */
	MODE_PREEN, /* -p: repairs that are safe without asking */
	MODE_YES,   /* -y: every repair */
};

/* struct fino flags */
#define F_ORPHAN 0x01  /* on the orphan list */
#define F_BAD 0x02     /* record undecodable or of no known type, not cleared */
#define F_GONE 0x04    /* cleared by this run: treated as missing */
#define F_UNREACH 0x08 /* unreachable and left so */
#define F_LOST 0x10    /* reconnected to /lost+found by this run */

#define NO_DIR UINT32_MAX

struct fino {
	uint64_t ino;
	uint64_t size;    /* as stored */
	uint64_t nblocks; /* as stored */
	uint32_t mode;    /* 0 when F_BAD */
	uint32_t nlink;   /* as stored */
	uint32_t links;   /* names counted by pass 3 */
	uint32_t dir;     /* index in f->dirs, or NO_DIR */
	uint8_t flags;
	uint8_t iflags;   /* KV_INODE_LENDS, KV_INODE_BORROWS as stored (or set by a repair) */
};

struct fdir {
	uint64_t parent;   /* the parent field as stored */
	uint64_t named_by; /* the directory whose entry names it (0: none) */
	uint64_t entries;  /* entries counted by pass 3 */
	uint32_t subdirs;  /* subdirectory entries counted by pass 3 */
	uint32_t idx;      /* its index in f->ino */
	uint8_t state;     /* reachability, R_* (pass3.c) */
};
enum { R_UNKNOWN, R_VISITING, R_REACHABLE, R_UNREACHABLE };

struct fshare; /* share.c */

/* ---- problems (problem.c) ---- */

enum fsck_pr {
	PR_META_EXTRA,
	PR_UNWRITTEN_BAD,
	PR_DEFAULTS_BAD,
	PR_INODE_BAD_KEY,
	PR_INODE_BAD_RECORD,
	PR_INODE_BAD_TYPE,
	PR_INODE_FLAGS,
	PR_INODE_SHARE_FLAGS,
	PR_INODE_INLINE,
	PR_SYMLINK_SIZE,
	PR_SYMLINK_EMPTY,
	PR_SPECIAL_SIZE,
	PR_PARENT_NONDIR,
	PR_FILE_SIZE,
	PR_ROOT_MISSING,
	PR_ROOT_NOT_DIR,
	PR_DIRENT_BAD_KEY,
	PR_DIRENT_NO_DIR,
	PR_DIRENT_BAD_LIST,
	PR_DIRENT_BAD_NAME,
	PR_DIRENT_BAD_HASH,
	PR_DIRENT_DUP_NAME,
	PR_DIRENT_MISSING,
	PR_DIRENT_ROOT,
	PR_DIRENT_TYPE,
	PR_DIR_MULTI,
	PR_DIR_UNREACHABLE,
	PR_DIR_CYCLE,
	PR_INODE_UNREACHABLE,
	PR_DIR_SIZE,
	PR_DIR_PARENT,
	PR_NLINK,
	PR_BLOCK_BAD_KEY,
	PR_BLOCK_NO_OWNER,
	PR_BLOCK_NOT_FILE,
	PR_BLOCK_PAST_EOF,
	PR_BLOCK_TAIL,
	PR_BLOCK_BAD_LEN,
	PR_BLOCK_CSUM,
	PR_BLOCK_FRAME,
	PR_NBLOCKS,
	PR_EXTENT_BAD_KEY,
	PR_EXTENT_BAD,
	PR_LEND_BAD_KEY,
	PR_LEND_BAD,
	PR_LEND_NO_EXTENT,
	PR_EXTENT_NO_LEND,
	PR_EXTENT_NO_OWNER,
	PR_EXTENT_NOT_FILE,
	PR_EXTENT_FLAG,
	PR_EXTENT_PAST_EOF,
	PR_EXTENT_OVERLAP,
	PR_EXTENT_OWN,
	PR_HOME_FLAG,
	PR_BORROW_LOST,
	PR_SHARED_FLAG,
	PR_COMPRESSED_FLAG,
	PR_XATTR_BAD_KEY,
	PR_XATTR_BAD_NAME,
	PR_XATTR_OLD_NAME,
	PR_XATTR_TOO_BIG,
	PR_XATTR_NO_OWNER,
	PR_XATTR_ACL_PLACE,
	PR_XATTR_ACL_BAD,
	PR_ORPHAN_BAD_KEY,
	PR_ORPHAN_MISSING,
	PR_ORPHAN_LINKED,
	PR_ORPHAN_FREE,
	PR_COUNTER,
	PR_UNWRITTEN_COUNT,
	PR_UNWRITTEN_FLAG,
	PR_COUNT
};

/* What a message may name; the table's messages expand %i (ino), %j (ino2),
 * %d (dir), %n, %m and %k (num, num2, num3), %o (num in octal), %x (num in
 * hex), %N (name, quoted and escaped), %s (str). */
struct pctx {
	uint64_t ino, ino2, dir, num, num2, num3;
	const void *name;
	size_t namelen;
	const char *str;
};

/* ---- repairs (repair.c) ---- */

enum fix_kind {
	FX_NONE,        /* nothing to run: rc holds why the repair cannot be made */
	FX_INODE_SET,   /* set fields of an inode record (mask) */
	FX_INODE_CLEAR, /* remove an inode with its blocks (but those others borrow),
	                   xattrs, orphan entry */
	FX_ROOT,        /* (re)create the root directory */
	FX_DEL,         /* delete one raw record */
	FX_DEL_PREFIX,  /* delete every record of a database whose key starts with ino */
	FX_DIRENT_LIST, /* replace a dirent list; re-file misfiled entries */
	FX_DIRENT_UNLINK, /* remove the entry of dir naming ino (and the dir's counts) */
	FX_RECONNECT,   /* name ino "#ino" in /lost+found (after an unlink, for cycles) */
	FX_BLOCK_TRIM,  /* cut a block at the file's size (lent blocks copied first) */
	FX_EXT_SET,     /* replace an extent (and its lend record) by up to two pieces */
	FX_ORPHAN_FREE, /* free an orphan with no links */
	FX_ORPHAN_UNLIST,
	FX_COUNTER,     /* raise the inode counter */
	FX_UNWRITTEN,   /* count the unwritten blocks again */
	FX_FEATURE,     /* set incompatible feature bits the records need */
};

#define SET_NLINK 0x01
#define SET_SIZE 0x02
#define SET_NBLOCKS 0x04
#define SET_PARENT 0x08
#define SET_FLAGS 0x10     /* clear the flags val names */
#define SET_NOINLINE 0x20
#define SET_FLAGS_ADD 0x40 /* set the flags val names */

struct fix_ent { /* an entry of a dirent list to re-file */
	uint64_t ino;
	uint8_t type, namelen;
	char name[KV_NAME_MAX];
};

struct fix {
	struct kv_op op;
	enum fix_kind kind;
	int rc;
	uint64_t ino;
	union {
		struct {
			unsigned mask;
			uint32_t nlink;
			uint64_t size, nblocks, parent;
			uint64_t flags_clr, flags_add;
		} set;
		struct {
			enum kv_db db;
			size_t klen;
			unsigned char *key; /* malloc'd */
		} del;
		struct {
			uint64_t dir, hash;
			unsigned char *val; /* malloc'd new list; vlen 0: delete the key */
			size_t vlen;
			struct fix_ent *refile; /* malloc'd */
			unsigned nrefile;
		} list;
		struct {
			uint64_t dir;   /* FX_DIRENT_UNLINK: the directory; FX_RECONNECT: old
			                   parent to unlink from first, or 0 */
			uint64_t lf;    /* FX_RECONNECT: /lost+found */
			uint8_t type;
		} link;
		struct {
			uint64_t size, end; /* the file's size, the block's end */
			uint64_t flags;     /* inode flags to act on besides its own
			                       (KV_INODE_LENDS: the block is lent) */
		} trim;
		/* FX_EXT_SET: malloc'd [0] the extent to drop (count 0: none),
		 * [1] and [2] the pieces to store in its place (count 0: none) */
		struct kv_extent *ext;
		uint64_t next; /* FX_COUNTER; FX_UNWRITTEN: the count set; FX_FEATURE:
		                  the bits */
	} u;
};

/* One problem found, printed (and streamed to the JSON report) once its
 * repair, if any, has run. */
struct pend {
	enum fsck_pr code;
	uint64_t ino;
	char *msg;     /* malloc'd, printable */
	uint32_t fix;  /* index in f->fixes, or NO_FIX */
	uint8_t state; /* PS_* */
};
#define NO_FIX UINT32_MAX

struct fsck {
	/* options */
	enum fsck_mode mode;
	int verbose, json, force;
	const char *image;

	kv_env *env;
	kv_txn *txn;        /* the snapshot, while one is held */
	struct kv_super sb; /* the superblock as of pass 1's snapshot */
	uint32_t bs;        /* block size */

	/* the index (invariant 1) */
	struct fino *ino;
	size_t nino, cap_ino;
	struct fdir *dirs;
	size_t ndirs, cap_dirs;
	uint64_t lost_found; /* ino of /lost+found (0: none yet) */
	int lf_blocked;      /* "lost+found" names a non-directory, or making it failed */
	uint64_t unwritten;  /* pass 5: the count of unwritten blocks recorded */
	int unwritten_bad;   /* pass 5: that record is damaged (pass 1 said so) */
	uint64_t n_unwritten; /* pass 5: records of unwritten blocks */
	uint64_t max_key;    /* highest ino any record kept names (the counter's floor) */
	int root_ok;         /* ino[0] is a live root directory */
	int tree_checked;    /* pass 3 counted the names (it needs a root) */

	/* counts for the summary */
	uint64_t n_inodes, n_dirs, n_files, n_blocks, n_bytes, n_dirents, n_xattrs, n_orphans;
	uint64_t n_shared;   /* stored blocks some extent names */
	uint64_t n_borrowed; /* blocks files borrow (each saves a block's copy) */
	uint64_t n_zblocks;  /* sound blocks stored compressed */
	uint64_t n_zdata, n_zframes; /* their data bytes, and their frames' */

	struct fshare *share; /* pass 5's model of the shared blocks (share.c) */

	/* this pass's problems and repairs */
	struct pend *pend;
	size_t npend, cap_pend;
	struct fix *fixes;
	size_t nfixes, cap_fixes;

	/* totals */
	uint64_t found, fixed, left, notes;
	unsigned exit_bits;
	int json_first;

	/* progress (problem.c): the bar shows the whole run; this pass takes
	 * prog_share of what was left when it began, at prog_base */
	struct progress prog;
	int pass;
	const char *pass_name;
	uint64_t prog_total, prog_done;
	double prog_base, prog_share;
	double t_start;
};

/* ---- the index (main.c) ---- */

/* Index of ino in f->ino, or -1. */
long fsck_find(const struct fsck *f, uint64_t ino);
/* Append an inode (its ino above every other); NULL on ENOMEM. dir says
 * whether it gets a struct fdir. */
struct fino *fsck_add_inode(struct fsck *f, uint64_t ino, uint32_t mode, int dir);
/* Room for this many more inodes and directories. After pass 2 room for two
 * is reserved (a root, /lost+found), so pointers into f->ino and f->dirs
 * stay valid from then on. */
int fsck_reserve(struct fsck *f, size_t inodes, size_t dirs);
/* "regular file", "directory", ... for messages. */
const char *fsck_type_name(uint32_t mode);
static inline int fino_live(const struct fino *i)
{
	return !(i->flags & F_GONE);
}
static inline struct fdir *fino_dir(struct fsck *f, const struct fino *i)
{
	return i->dir == NO_DIR ? NULL : &f->dirs[i->dir];
}

/* ---- a pass's walk of one database (repair.c) ---- */

/* A walk's state, the caller's (set f and arg): what a pass's record
 * callback gets besides the record, and the merge position after it. */
struct fsck_walk {
	struct fsck *f;
	size_t ci;  /* the merge position in f->ino (fsck_merge) */
	void *arg;  /* the pass's own state */
};
/* A record of a well-formed key, as a pass's callback gets it: the raw
 * key (what fsck_fix_del deletes by), its parts and the value. */
struct fsck_rec {
	const void *k, *v;
	size_t kl, vl;
	struct kv_key key; /* kv_key_decode of k */
};
/* 0 to go on, anything else stops the walk with that value. */
typedef int fsck_record_fn(struct fsck_walk *w, const struct fsck_rec *r);
/* Walk db on w->f's snapshot in key order, each record counted toward the
 * pass's progress (fsck_tick). A record whose key kv_key_decode refuses,
 * or longer than any key kv_key_encode makes (KV_KEY_MAX), is the problem
 * bad_key (fsck_bad_key); fn gets the others. Returns 0 at the end of the
 * database, fn's value when it stopped the walk, or a negative errno
 * reading the image. */
int fsck_walk(struct fsck_walk *w, enum kv_db db, enum fsck_pr bad_key, fsck_record_fn *fn);
/* Report the malformed key k of a record of db as problem code (naming its
 * length) and queue the record's deletion if the mode allows. 0, or
 * -ENOMEM. */
int fsck_bad_key(struct fsck *f, enum fsck_pr code, enum kv_db db, const void *k, size_t kl);
/* The index entry of ino, for a walk whose keys begin with an ino in
 * order: moves w->ci (only forward) to the first entry not below ino.
 * The entry, or NULL when ino is not in the index. */
struct fino *fsck_merge(struct fsck_walk *w, uint64_t ino);

/* ---- snapshots and the repair queue (repair.c) ---- */

/* Make sure f->txn is a live snapshot. */
int fsck_snapshot(struct fsck *f);
/* End the snapshot unless -n keeps it for the whole run. */
void fsck_snapshot_end(struct fsck *f, int final);
/* The superblock the checks compare with: with -n the snapshot's (pass 1,
 * invariant 3), else the writer's, as the repairs so far left it. */
void fsck_super(struct fsck *f, struct kv_super *sb);
/* Queue a repair; NULL on ENOMEM. The problem pr (from fsck_problem, may be
 * NULL for a repair that goes with an earlier problem) is settled by it. */
struct fix *fsck_fix(struct fsck *f, enum fix_kind kind, uint64_t ino, struct pend *pr);
/* The FX_INODE_SET of ino if it is the last repair queued, else a new one.
 * A returned pointer is valid until the next repair is queued. */
struct fix *fsck_fix_set(struct fsck *f, uint64_t ino, struct pend *pr);
/* Report problem code (p) about inode fi and, if the mode allows, queue
 * setting one field of its record (mask: SET_NLINK, SET_SIZE, SET_NBLOCKS
 * or SET_PARENT to val; SET_FLAGS clears the flags val names, SET_FLAGS_ADD
 * sets them; SET_NOINLINE, val unused), and set it in the index too
 * (invariant 2). 0, or -ENOMEM. */
int fsck_fix_field(struct fsck *f, enum fsck_pr code, const struct pctx *p, struct fino *fi,
		   unsigned mask, uint64_t val);
/* count records need the incompatible feature bit, and the superblock
 * (fsck_super) lacks it: report problem code (count as num) and, if the
 * mode allows, queue setting it. 0, or -ENOMEM. */
int fsck_fix_feature(struct fsck *f, enum fsck_pr code, uint64_t count, uint64_t bit);
/* Attach problem pr to repair x as well. */
void fsck_attach(struct fsck *f, struct pend *pr, struct fix *x);
/* Queue the deletion of one raw record. */
int fsck_fix_del(struct fsck *f, enum kv_db db, const void *key, size_t klen, uint64_t ino,
                 struct pend *pr);
/* Apply the queued repairs (ending the snapshot first), then print the
 * pass's problems. <0: the writer failed as a whole. */
int fsck_flush(struct fsck *f);
/* Make /lost+found now (one write) if it is missing; its ino, or <0. */
int fsck_lost_found(struct fsck *f, uint64_t *ino);

/* ---- problems and output (problem.c) ---- */

/* Record a problem. Returns the pending problem when its repair is to be
 * queued now (the mode allows it), NULL when it is left (or on ENOMEM,
 * which then counts it as left). */
struct pend *fsck_problem(struct fsck *f, enum fsck_pr code, const struct pctx *p);
/* Whether the mode repairs problem code (what fsck_problem will say). */
int fsck_repairs(const struct fsck *f, enum fsck_pr code);
/* Print the problems of this pass once their repairs ran (repair.c). */
void fsck_settle(struct fsck *f);
void fsck_out_begin(struct fsck *f);
void fsck_out_end(struct fsck *f, double secs, const char *error);
/* The pass banner ("Pass 3: directory tree"), and progress for it: total
 * records to walk (fsck_tick counts them), share the part of the rest of
 * the run this pass takes (0 to 1; 1 for the last). */
void fsck_pass_begin(struct fsck *f, int pass, const char *name, uint64_t total, double share);
void fsck_tick(struct fsck *f, uint64_t n);
/* The pass is done: its bar is drawn full, then erased. */
void fsck_pass_end(struct fsck *f);
void fsck_progress_clear(struct fsck *f);
/* A line for -v (not in --json). */
void fsck_info(struct fsck *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double fsck_now(void);

/* ---- the passes (pass1.c .. pass7.c): 0, or a negative errno that stops the run ---- */

int fsck_pass1(struct fsck *f);
int fsck_pass2(struct fsck *f);
int fsck_pass3(struct fsck *f);
int fsck_pass4(struct fsck *f);
int fsck_pass5(struct fsck *f);
int fsck_pass6(struct fsck *f);
int fsck_pass7(struct fsck *f);

/* ---- shared blocks, within pass 5 (share.c) ---- */

/* How a data record serves the files that borrow it. */
enum fsck_bstate {
	BS_GOOD,      /* whole and sound: a block that can be lent */
	BS_SHORT,     /* sound, but not a whole block */
	BS_UNWRITTEN, /* fallocate's: no bytes */
	BS_BAD_LEN,   /* damaged: no valid length */
	BS_CSUM,      /* damaged: fails its checksum */
	BS_FRAME,     /* damaged: compressed, its checksum holds, but its frame does
	                 not decompress to its length */
};
/* Before the data walk: read the extent and lend records, check them
 * against each other, their borrowers (and the borrowers' own blocks) and
 * their homes' flags, and build the model (fsck.h, 5). */
int fsck_share_begin(struct fsck *f);
/* The data walk is at block idx of inode ino, in state st: checks the
 * extents that name it (and those that named blocks the walk has passed).
 * Returns how many extents of the model still name it, or -ENOMEM. */
int fsck_share_block(struct fsck *f, uint64_t ino, uint64_t idx, enum fsck_bstate st,
		     size_t len);
/* Inode fi's own blocks are counted (own kept): 1 when it borrows, whose
 * count fsck_share_end checks (the borrowed ones are known only then), 0
 * to check it now. <0: ENOMEM. */
int fsck_share_own(struct fsck *f, const struct fino *fi, uint64_t own);
/* After the data walk: the home blocks it never met, the borrowers' block
 * counts, the superblock's feature bit; frees the model. */
int fsck_share_end(struct fsck *f);
void fsck_share_free(struct fsck *f);

int cmd_fsck(int argc, char **argv);

#endif
