/*
 * difftest.h - the differential tester: one random sequence of operations run
 * on a kvfs mount and on a reference directory (tmpfs), compared after each
 * operation and, tree against tree, at checkpoints.
 *
 *   ops.c       the operations: generate from a seed, run on one side, print
 *   acl_ops.c   the POSIX ACL operations and the umask of creates
 *   copy_ops.c  copy_file_range
 *   compare.c   what counts as agreeing: results of an op, attributes
 *   tree.c      compare two trees; remove a tree
 *   difftest.c  the command line, a run of both sides, and the reduction of a
 *               failing sequence (delta debugging)
 *
 * Invariants:
 *  1. An op is a pure function of the seed and its index: its fields never
 *     depend on the state the op before it left. So any subsequence of a
 *     generated sequence is itself a sequence that runs the same way on both
 *     sides (an op on an empty fd slot runs on fd -1 and fails with EBADF on
 *     both), which is what lets the reduction drop ops freely.
 *  2. The two sides are driven alike: same relative paths under a run
 *     directory of each root, same fd slots, same bytes.
 *  3. What may differ between kvfs and tmpfs by nature is never compared:
 *     a directory's st_size, st_blocks, ctime, and times set by the
 *     filesystem itself (only times set explicitly by utimensat, which lie
 *     in 2001-2008, are), except where they may differ by nature until the
 *     next utimensat (ops.c, track_times).
 */
#ifndef DIFFTEST_H
#define DIFFTEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NFDS 6          /* fd slots an op may use */
#define P_DOT 18        /* the index of "." among ops.c's paths */
#define EXPLICIT_MAX 1500000000LL /* a time before this (2017) was set by utimensat */

enum op_kind {
	OP_OPEN, OP_CLOSE, OP_WRITE, OP_PWRITE, OP_READ, OP_PREAD, OP_LSEEK, OP_FTRUNCATE,
	OP_TRUNCATE, OP_FALLOCATE, OP_FSYNC, OP_FSTAT, OP_STAT, OP_MKDIR, OP_RMDIR, OP_UNLINK,
	OP_RENAME, OP_LINK, OP_SYMLINK, OP_READLINK, OP_MKFIFO, OP_SETXATTR, OP_FSETXATTR,
	OP_REMOVEXATTR, OP_GETXATTR, OP_LISTXATTR, OP_CHMOD, OP_FCHMOD, OP_CHOWN, OP_UTIMENS,
	OP_FUTIMENS, OP_READDIR, OP_READFILE, OP_MMAP, OP_COPY, OP_SETACL, OP_REMOVEACL,
	OP_NKINDS
};

struct op {
	uint8_t kind;
	uint8_t fd;       /* fd slot */
	uint8_t p1, p2;   /* path indices (paths[]) */
	uint8_t name;     /* xattr name or symlink target index; ACL: access or default */
	uint32_t flags;   /* open, rename, xattr, AT_* flags; whence; fallocate mode */
	uint32_t mode;
	int32_t uid, gid;
	uint64_t off, len;
	uint64_t off2;    /* copy_file_range: the output offset */
	uint8_t fd2;      /* copy_file_range: the output fd slot (copy_ops.c) */
	uint32_t dseed;   /* the bytes written */
	int64_t at[2][2]; /* utimens: atime, mtime as sec, nsec (UTIME_NOW/UTIME_OMIT) */
	uint16_t umask;   /* a create's umask (the process's is 0 between ops) */
};

/* One side of the comparison: a run directory and the fds open in it. */
struct side {
	const char *name;  /* "kvfs" or "tmpfs" */
	char dir[4096];    /* the run directory, absolute */
	int dfd;
	int fds[NFDS];
};

/* The attributes that are compared. */
struct attrs {
	uint64_t ino;
	uint32_t mode, nlink, uid, gid;
	uint64_t size;
	int64_t atime[2], mtime[2];
};

/* What an op gave on one side. */
struct res {
	long long ret;
	int err;          /* errno when ret < 0 */
	int has_attrs;
	struct attrs a;
	unsigned char *buf; /* bytes read, a listing, a target, a value */
	size_t len, cap;
	int seek_bad;     /* SEEK_DATA/SEEK_HOLE: the answer calls bytes that are
	                     not zero a hole */
};

/* ops.c: the paths an op names (of NPATHS; P_L255 and P_L256 the long
 * names), symlink targets (NTARGETS) and xattr names (NXNAMES) */
#define P_L255 19
#define P_L256 20
#define NPATHS 21
#define NTARGETS 12
#define NXNAMES 12
void ops_init(void);
/* gen.c */
void ops_generate(uint64_t seed, struct op *ops, size_t n);
/* --seek: lseek with SEEK_DATA and SEEK_HOLE too (for a kvfs image whose
 * block size is tmpfs's page size, without the writeback cache) */
extern int ops_seek_holes;
/* Whether op may make a new object (whose mode the umask or an ACL sets). */
int op_creates(const struct op *op);
/* ops.c */
void op_run(const struct op *op, struct side *s, struct res *r);
void op_format(const struct op *op, char *buf, size_t len);
void res_free(struct res *r);
/* shared with acl_ops.c and copy_ops.c: the generator's random numbers, a
 * path pick (ANY, DIR_NAME, FILE_NAME: the kind of name it prefers), offsets
 * and lengths (far_off: now and then a far one in place of near), a path and
 * its printable name, results */
enum { ANY, DIR_NAME, FILE_NAME };
uint64_t rnd(uint64_t *s);
uint64_t below(uint64_t *s, uint64_t n);
int chance(uint64_t *s, unsigned pct);
uint8_t pick_path(uint64_t *s, int want);
uint64_t gen_off(uint64_t *s);
uint64_t far_off(uint64_t *s, uint64_t near);
uint64_t gen_len(uint64_t *s);
const char *op_path(int i);
const char *op_path_name(int i);
void set_ret(struct res *r, long long ret);
void append(struct res *r, const void *p, size_t n);

/* acl_ops.c: fields of an OP_SETACL or OP_REMOVEACL (path p1 picked) */
void acl_generate(uint64_t *s, struct op *op);
/* a create's umask */
uint16_t acl_gen_umask(uint64_t *s);
void acl_run(const struct op *op, struct side *s, const char *path, struct res *r);
void acl_format(const struct op *op, const char *path, char *buf, size_t len);
/* After an ACL op, a chmod or a create, what the object is (reached as how
 * says: ACL_BY_PATH, _LPATH, _FD): its mode and the ACLs in acls
 * (ACL_ACCESS_BIT, ACL_DEFAULT_BIT), appended to r for the comparison. An
 * ACL op's op->len is its how. */
enum { ACL_BY_PATH, ACL_BY_LPATH, ACL_BY_FD };
#define ACL_ACCESS_BIT 1
#define ACL_DEFAULT_BIT 2
void acl_state(struct side *s, int how, const char *path, int fd, int acls, struct res *r);

/* copy_ops.c: fields of an OP_COPY, its run and its line */
void copy_generate(uint64_t *s, struct op *op);
void copy_run(const struct op *op, struct side *s, struct res *r);
void copy_format(const struct op *op, char *buf, size_t len);

/* compare.c */
void attrs_of(const struct stat *st, struct attrs *a);
/* 0 when k (kvfs) and t (tmpfs) agree; otherwise why (a line). */
int res_compare(const struct op *op, const struct res *k, const struct res *t, char *why,
		size_t wlen);
/* Forget which tmpfs inodes may legitimately differ in a time (a new run). */
void loose_reset(void);
#define LOOSE_ATIME 1
#define LOOSE_MTIME 2
/* Which times of tmpfs inode ino may differ (LOOSE_* bits); set or clear. */
unsigned loose_of(uint64_t ino);
void loose_set(uint64_t ino, unsigned what, int on);
/* 0 when two sets of attributes agree (rules of invariant 3). */
int attrs_compare(const struct attrs *k, const struct attrs *t, char *why, size_t wlen);

/* tree.c */
/* Compare the trees under kdir and tdir; 0 when they agree, else why. */
int tree_compare(const char *kdir, const char *tdir, char *why, size_t wlen);
/* Remove dir and everything under it; 0 or -errno. */
int tree_remove(const char *dir);

#endif
