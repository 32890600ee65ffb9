/*
 * fs.h - the kvfs daemon: state shared by the request handlers.
 *
 * Each FUSE operation is a thin handler (fs_op_*) that decodes its request,
 * calls a core returning 0 or a negative errno, then sends the one reply.
 * The cores (fs_do_*) know nothing of FUSE requests: the unit tests run
 * them on an image without a mount. File data (file.c) and extended
 * attributes (xattr.c) still work in their handlers around the store's
 * writer; read and getxattr reply from the store's values (an image's
 * map) inside their read transaction, which no core could do.
 *
 * An inode's lookup count (the kernel's references, see itable.c):
 *
 *     absent --entry reply--> n > 0 --forget to 0--> absent
 *                               |                       ^
 *                        last name removed              | purge (writer)
 *                               v                       |
 *                       n > 0, orphan --forget to 0-----+
 */
#ifndef KVFS_FS_H
#define KVFS_FS_H

#define FUSE_USE_VERSION 35
#include <assert.h>
#include <fuse_lowlevel.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "kv.h"

enum fs_atime { FS_ATIME_RELATIME, FS_ATIME_NOATIME, FS_ATIME_STRICT };

struct fs_config {
	const char *image;      /* absolute path */
	const char *mountpoint;
	enum kv_durability durability;
	unsigned commit_ms;     /* make commits durable this long after at most */
	unsigned window_ms;     /* acknowledge on apply, commit within (kv/window.c) */
	unsigned alone_window_ms; /* a shared store's: the same while the mount is its
	                             only one (kv/window.c invariant 7) */
	uint64_t max_size;
	enum fs_atime atime;
	double timeout;         /* entry and attribute cache, seconds */
	int readonly;
	int writeback;          /* kernel writeback cache */
	int keep_cache;         /* keep the page cache across opens */
	int skip_open;          /* answer OPEN/OPENDIR with ENOSYS: no round trip */
	int cache_dir;          /* let the kernel cache directory listings */
	int cache_symlinks;
	int readdirplus;
	int io_uring;           /* serve requests over io_uring where the kernel and
	                           libfuse allow it (-o io_uring, the default) */
	int acl;                /* keep POSIX ACLs (-o acl, the default) */
	int compress;           /* zstd level new blocks are compressed at; 0: off */
	unsigned max_write;
	unsigned threads;
	int foreground, debug;
};

struct fs {
	struct fs_config cfg;
	kv_env *env;
	struct fuse_session *se;
	uint32_t block_size;
};

extern struct fs fs;

/* The store, as the daemon uses it (session.c invariant 4): a thread holds
 * no read transaction when it waits on the writer (kv_write, a settle, a
 * sync), for the writer may need the map's lock a reader holds to grow the
 * map; nor across requests. Read transactions are begun and ended here, so
 * that a debug build counts them per thread and asserts it (NDEBUG: plain
 * calls). */
#ifndef NDEBUG
extern __thread int fs_reading;
#endif
static inline int fs_counted(int rc)
{
#ifndef NDEBUG
	if (rc == 0)
		fs_reading++;
#endif
	return rc;
}

/* A read of inode ino's records that sees every change acknowledged before
 * it (kv_read_begin_ino: the open window when ino changed there). */
static inline int fs_read_begin(uint64_t ino, kv_txn **t)
{
	return fs_counted(kv_read_begin_ino(fs.env, ino, t));
}

/* The same for inodes not known beforehand (a listing's, the orphans). */
static inline int fs_read_begin_window(kv_txn **t)
{
	return fs_counted(kv_read_begin_window(fs.env, t));
}

static inline void fs_read_end(kv_txn *t)
{
#ifndef NDEBUG
	assert(fs_reading == 1);
	fs_reading--;
#endif
	kv_read_end(t);
}

static inline int fs_write(kv_apply_fn apply, void *arg, unsigned flags)
{
	assert(fs_reading == 0);
	return kv_write(fs.env, apply, arg, flags);
}

static inline int fs_sync(void)
{
	assert(fs_reading == 0);
	return kv_sync(fs.env);
}

static inline int fs_settle(void)
{
	assert(fs_reading == 0);
	return kv_settle(fs.env);
}

/* inode.c: the attributes to reply with. Every reply that gives an inode's
 * attributes takes them from here, where the lazy-times rule holds: what is
 * pending for the inode (pending.c) is committed before a reply gives it.
 *   fs_attr_read        one inode that find gets in a read transaction
 *                       (by number: fs_attr_get; by name: lookup)
 *   fs_attr_read_begin  the read transaction of a listing that gives the
 *                       attributes of inodes not known before (readdirplus)
 *   fs_attr_fill        the stat of an inode read through one of these, or
 *                       as a writer op left it (the writer applied every
 *                       change queued before the op: nothing is pending)
 * The read paths allocate nothing. */
typedef int (*fs_find_fn)(kv_txn *t, const void *arg, struct kv_inode *in);
/* find's result (0 or -errno) with *in read once nothing was pending for
 * it; in->inline_data is cleared (the transaction has ended). The read
 * begins for inode from (the one find starts at), and is done again in the
 * open window when the inode found changed there. */
int fs_attr_read(uint64_t from, fs_find_fn find, const void *arg, struct kv_inode *in);
int fs_attr_get(uint64_t ino, struct kv_inode *in);
/* The read transaction of a listing of directory dir that gives the
 * attributes of inodes not known before (readdirplus). */
int fs_attr_read_begin(uint64_t dir, kv_txn **t);
void fs_attr_fill(const struct kv_inode *in, struct stat *st);
/* An entry reply's parameters for attributes st (a handler's). */
void fs_fill_entry(const struct stat *st, struct fuse_entry_param *e);
int64_t fs_now_ns(void);
/* Drop one link of inode in (already loaded, nlink > 0) in a write txn: an
 * inode left without links is purged, or kept as an orphan while the kernel
 * still references it. */
int fs_drop_link(kv_txn *t, struct kv_inode *in);
/* Purge every orphan nobody references (mount, unmount). */
int fs_purge_orphans(void);
void fs_maybe_touch_atime(const struct kv_inode *in, int64_t began);
/* Begin a read transaction and get inode ino in it: 0 with *t open (the
 * caller ends it), or -errno with none left open. */
int fs_read_inode(uint64_t ino, kv_txn **t, struct kv_inode *in);
/* The same for a handler that replies from the map: 0 with *t open, or the
 * error already replied and -1. */
int fs_read_inode_for(fuse_req_t req, uint64_t ino, kv_txn **t, struct kv_inode *in);
/* OPEN and OPENDIR (file.c): skipped from now on (ENOSYS) when skip_open
 * and the cache they would set up (keep_cache, cached listings) are on. */
void fs_reply_open(fuse_req_t req, struct fuse_file_info *fi, int cache, int dir);

/* pending.c: the changes queued for the next batch and not yet committed,
 * by inode: the times a SETATTR stores lazily, and the access time a read
 * sets. */
enum { FS_PENDING_TIMES = 1, FS_PENDING_ATIME = 2 };
struct fs_pending {
	uint64_t ino;
	unsigned what;              /* FS_PENDING_* */
	int64_t mtime_ns, ctime_ns; /* FS_PENDING_TIMES */
	int64_t atime_ns;           /* FS_PENDING_ATIME */
};
/* Queue p's change for the next batch (kv_submit_lazy with op_flags; an
 * access time kv_submit, in order with what follows): it is pending until
 * that batch has committed. -EBUSY when the table is full, or
 * the store's error: nothing is queued, the caller makes the change. */
int fs_pending_queue(const struct fs_pending *p, unsigned op_flags);
/* Whether changes of ino (0: of any inode) are pending. */
int fs_pending_has(uint64_t ino);
/* Wait until the changes pending for ino (0: for every inode) are
 * committed: 1 when there were some, 0 (one atomic load while nothing is
 * pending) when not. Only the attribute entry point (fs_attr_*), fsync and
 * fsyncdir call it. */
int fs_pending_settle(uint64_t ino);

/* itable.c: the kernel's lookup counts */
int fs_itable_init(void);
void fs_itable_ref(uint64_t ino);
/* The same for an inode the caller just made: when the kernel knew it by no
 * other way, it has no security.capability (fs_itable_nocap), so its first
 * write(2) asks nothing of the store. */
void fs_itable_ref_made(uint64_t ino);
/* Mark ino as an orphan if the kernel references it; 0 if it does not. */
int fs_itable_mark_orphan(uint64_t ino);
/* The writeback cache's write back of a file (file.c, invariant 4). A file
 * is short when data the kernel wrote back could not be stored for want of
 * room; it settles (the marks go) at fsync or a truncate, and when the
 * kernel forgets it. */
void fs_itable_set_short(uint64_t ino);
void fs_itable_settled(uint64_t ino);
int fs_itable_short(uint64_t ino);
/* Whether the failure has yet to be told to a write(2); now it is. */
int fs_itable_take_tell(uint64_t ino);
/* A write back made the file grow from size from; the least such size
 * since it settled. */
void fs_itable_note_append(uint64_t ino, uint64_t from);
int fs_itable_appended(uint64_t ino, uint64_t *from);
/* A write(2) that bypassed the cache (O_DIRECT) was answered: nothing
 * stored before it may be cut off by a later failure. */
void fs_itable_drop_appends(uint64_t ino);
/* The kernel asks for security.capability before every write(2) (libfuse
 * 3.14 cannot take FUSE_HANDLE_KILLPRIV_V2): an inode found without one is
 * answered from here until its xattrs change (xattr.c). fs_itable_nocap
 * gives the xattrs' change count to hand to fs_itable_set_nocap after the
 * read that found none; a change counts up first. */
int fs_itable_nocap(uint64_t ino, unsigned *xgen);
void fs_itable_set_nocap(uint64_t ino, unsigned xgen);
void fs_itable_xattr_changing(uint64_t ino);
/* Returns 1 when the count reached 0 on an inode marked orphan. */
int fs_itable_forget(uint64_t ino, uint64_t n);
uint64_t fs_itable_count(void);

/*
 * Cores: the work of an operation, without FUSE. Arguments in (what the
 * handler decoded from the request), 0 or a negative errno out, results in
 * the caller's structs. A name over KV_NAME_MAX bytes is -ENAMETOOLONG. A
 * core whose reply gives the kernel an entry (lookup, the creates, link,
 * each readdirplus entry) has added that entry's lookup reference
 * (itable.c) when it returns 0. Attributes come from the fs_attr_* entry
 * point. Cores need no session (fs.se may be NULL: the unit tests).
 */

/* The caller of a request, as the kernel gives it. groups (ngroups of them)
 * are its supplementary groups: only a create of a non-directory with the
 * set-group-ID bit, or a set of an access ACL, by a caller other than
 * root, needs them. umask: what a create leaves out of the mode when the
 * directory has no default ACL (the kernel leaves it to kvfs: session.c). */
#define NGROUPS_KEEP 64 /* supplementary groups a request's caller is looked up with */

struct fs_cred {
	uint32_t uid, gid;
	int ngroups;
	const gid_t *groups;
	uint32_t umask;
};

/* session.c: the caller of req into *c; its supplementary groups (into
 * groups, NGROUPS_KEEP of them at most) only when need_groups and it is not
 * root: reading them costs a read of /proc. */
void fs_caller(fuse_req_t req, int need_groups, struct fs_cred *c, gid_t *groups);

/* Whether the caller c is in group gid (its own or a supplementary one). */
static inline int fs_cred_in_group(const struct fs_cred *c, uint32_t gid)
{
	if (c->gid == gid)
		return 1;
	for (int i = 0; i < c->ngroups; i++)
		if (c->groups[i] == gid)
			return 1;
	return 0;
}

/* inode.c. open_file: the request came through an open file (fstat(2), or
 * the kernel asking before a write(2)). to_set: FUSE_SET_ATTR_* bits, the
 * fields of attr to set. The last reference forgotten of an orphan frees
 * it (in the next batch). */
int fs_do_getattr(uint64_t ino, int open_file, struct stat *out);
int fs_do_setattr(uint64_t ino, const struct stat *attr, int to_set, int open_file,
		  struct stat *out);
int fs_do_statfs(struct statvfs *out);
/* The kernel's rule for a change of a file's data by c (should_remove_suid
 * and setattr_should_drop_sgid in Linux): set-user-ID goes, and
 * set-group-ID where the group may execute or c is outside the file's
 * group; root (CAP_FSETID) keeps both. FUSE leaves it to kvfs for
 * fallocate and copy_file_range. Returns whether in->mode changed (the
 * caller stores it and drops the kernel's attributes). */
int fs_kill_suidgid(const struct fs_cred *c, struct kv_inode *in);
void fs_do_forget(uint64_t ino, uint64_t nlookup);

/* dir.c. mode: the permission bits (mknod: and the type; no type makes a
 * regular file). readlink: the target, NUL-terminated, into buf of size
 * bytes (KV_SYMLINK_MAX + 1 hold any). */
int fs_do_lookup(uint64_t parent, const char *name, struct stat *out);
int fs_do_mknod(uint64_t parent, const char *name, uint32_t mode, uint64_t rdev,
		const struct fs_cred *c, struct stat *out);
int fs_do_mkdir(uint64_t parent, const char *name, uint32_t mode, const struct fs_cred *c,
		struct stat *out);
int fs_do_symlink(const char *target, uint64_t parent, const char *name,
		  const struct fs_cred *c, struct stat *out);
int fs_do_create(uint64_t parent, const char *name, uint32_t mode, const struct fs_cred *c,
		 struct stat *out);
int fs_do_link(uint64_t ino, uint64_t newparent, const char *newname, struct stat *out);
/* file.c: copy_file_range(2) by c: up to len bytes of file in at off_in
 * copied to file out at off_out (its set-ID bits go as fs_kill_suidgid
 * says), *copied of them (fewer at the source's end; a
 * short count when a later piece fails). -EISDIR, -EINVAL (not a regular
 * file), -ENOSPC, -EIO. */
int fs_do_copy_range(uint64_t in, uint64_t off_in, uint64_t out, uint64_t off_out, size_t len,
		     const struct fs_cred *c, size_t *copied);
/* xattr.c: the ACL name (KV_ACL_ACCESS or KV_ACL_DEFAULT) of inode ino in
 * t, copied into buf (KV_ACL_SIZE_MAX bytes), *len its length. -ENODATA:
 * none, or ACLs are off (-o noacl); -EIO: a damaged one (logged). */
int fs_acl_get(kv_txn *t, uint64_t ino, const char *name, unsigned char *buf, size_t *len);
/* xattr.c: setxattr(2), with what an access ACL does to the mode (c: the
 * caller, for the set-group-ID bit). */
int fs_do_setxattr(uint64_t ino, const char *name, const void *value, size_t size, int flags,
		   const struct fs_cred *c);
int fs_do_unlink(uint64_t parent, const char *name);
int fs_do_rmdir(uint64_t parent, const char *name);
/* flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE. */
int fs_do_rename(uint64_t parent, const char *name, uint64_t newparent, const char *newname,
		 unsigned flags);
int fs_do_readlink(uint64_t ino, char *buf, size_t size);

/* One entry of a listing, as fs_do_readdir hands it over. */
struct fs_dirent {
	const char *name;        /* NUL-terminated; valid during the call */
	uint64_t ino;
	uint32_t type;           /* the S_IFMT bits of its mode */
	uint64_t next;           /* the offset that lists on after it */
	const struct stat *attr; /* readdirplus: its attributes; NULL for "." and ".." */
};
/* 0: d is taken; 1: no room for it (the listing stops before it). */
typedef int (*fs_dirent_fn)(void *arg, const struct fs_dirent *d);
/* List directory ino from offset off (0, or an entry's next) through emit,
 * in a stable order that resumes right after any entry still present,
 * whatever was added or removed meanwhile. plus: readdirplus (with the
 * attributes and a lookup reference per entry, "." and ".." aside). 0 at
 * the end or when emit had no room; an error after some entries leaves
 * those taken. */
int fs_do_readdir(uint64_t ino, uint64_t off, int plus, fs_dirent_fn emit, void *arg);

/* Handlers, by family (session.c, inode.c, dir.c, file.c, xattr.c): each
 * decodes its request, calls its core and sends the one reply. */
void fs_op_init(void *userdata, struct fuse_conn_info *conn);
void fs_op_destroy(void *userdata);
void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void fs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void fs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		   struct fuse_file_info *fi);
void fs_op_statfs(fuse_req_t req, fuse_ino_t ino);

void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		  const char *newname, unsigned int flags);
void fs_op_readlink(fuse_req_t req, fuse_ino_t ino);
void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi);
void fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi);

void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		  struct fuse_file_info *fi);
void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);
void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi);
void fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void fs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
		     struct fuse_file_info *fi);
void fs_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			   struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			   struct fuse_file_info *fi_out, size_t len, int flags);
/* clone.c: KVFS_IOC_CLONE (kvfs-clone); any other ioctl is ENOTTY. */
void fs_op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		 struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
		 size_t out_bufsz);
void fs_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		 struct fuse_file_info *fi);

void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		    size_t size, int flags);
void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

/* session.c: drop what the kernel caches of inode ino (attributes, and
 * pages from off, len bytes; see fuse_lowlevel_notify_inval_inode); nothing
 * without a session. Never waits on the kernel for a directory, nor for
 * attributes alone (off -1). */
void fs_notify_inval(uint64_t ino, int64_t off, int64_t len);
/* The kernel's entry of name in directory parent (a cached absence too). */
void fs_notify_inval_entry(uint64_t parent, const char *name, size_t len);
/* On a store other mounts write too: drop what the kernel caches of what
 * they change, from now on (kv_watch). 0; -errno. */
int fs_watch_others(void);
/* session.c: the handlers' table */
extern const struct fuse_lowlevel_ops fs_ops;
/* session.c: log lines go to stderr in the foreground, to syslog when
 * daemonized (after fs_log_to_syslog); fs_log_line is also the store's log */
void fs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fs_log_line(const char *line);
void fs_log_to_syslog(void);
/* session.c: the request being processed by this thread (for direct replies) */
uint64_t fs_req_unique(void);
/* session.c: whether req came through io_uring (libfuse 3.18 or later), not
 * /dev/fuse: its handler runs on the ring queue's one thread. */
int fs_req_uring(fuse_req_t req);
/* session.c: whether this kvfs was built with a libfuse that has io_uring */
int fs_uring_built(void);
/* defer.c: fn(arg) on the handoff thread, for work that waits on the kernel
 * (a copy of len <= FS_JOB_ARG bytes of arg), which replies through
 * fs_defer_reply: fn(arg) on the replier thread, which only replies. Each
 * runs fn at once where its thread is not started (the unit tests' cores). */
#define FS_JOB_ARG 48
typedef void (*fs_job_fn)(const void *arg);
void fs_defer(fs_job_fn fn, const void *arg, size_t len);
void fs_defer_reply(fs_job_fn fn, const void *arg, size_t len);
int fs_defer_start(void);
void fs_defer_stop(void);
/* session.c: start fs.cfg.threads workers on fs.se (0, or -ENOMEM); after
 * the session has exited, wait for every one of them and join it. */
int fs_workers_start(void);
void fs_workers_stop(void);

/* options.c: the command line into fs.cfg. Returns the exit code to use now
 * (after --help, --version, or a message saying what was wrong), or -1 to
 * go on. */
int fs_options_parse(struct fuse_args *args);
/* What the crash guard says when reading the image crashes (main.c). */
void fs_crash_text(char *buf, size_t len, int mounted);

#endif
