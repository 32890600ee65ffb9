/*
 * testutil.h - helpers shared by the kv/ unit tests: a temporary directory
 * holding a fresh image, and small file operations run through the writer.
 *
 * The helpers return 0 or a negative errno like kv/ itself and never assert,
 * so they can run on any thread; the tests assert on what they return.
 */
#ifndef KVFS_TESTUTIL_H
#define KVFS_TESTUTIL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kv.h"

struct tu_image {
	char dir[PATH_MAX];  /* a fresh directory of its own */
	char path[PATH_MAX]; /* dir/image */
	kv_env *env;         /* NULL while closed */
	char err[512];       /* message of the last kv_mkfs / kv_open */
};

/* Make a temporary directory and a new image in it (o: NULL for defaults). */
int tu_image_new(struct tu_image *im, const struct kv_mkfs_opts *o);
/* Open im->path into im->env (o: NULL for a read-write open without syncs). */
int tu_image_open(struct tu_image *im, const struct kv_open_opts *o);
void tu_image_close(struct tu_image *im);
/* Close, then remove every file of the directory and the directory. */
void tu_image_free(struct tu_image *im);
/* dir/name into buf (PATH_MAX bytes); returns buf. */
char *tu_image_file(const struct tu_image *im, const char *name, char *buf);

/* Run fn on a read-write open of the (closed) image im in a child process,
 * its stderr into im's directory: 1 when the child died of SIGABRT with
 * expect in what it printed (a failed assert() naming it), 0 when fn
 * returned or the child died otherwise (its stderr is copied to ours),
 * a negative errno when the child could not run. For the invariant checks
 * of debug builds. */
int tu_aborts(struct tu_image *im, void (*fn)(kv_env *env), const char *expect);

/* cmocka group fixtures: *state becomes an open struct tu_image (tu_setup)
 * or a new one not opened yet (tu_setup_closed); tu_teardown frees either. */
int tu_setup(void **state);
int tu_setup_closed(void **state);
int tu_teardown(void **state);

/* A new inode of the given mode (S_IFREG | 0644 ...) named name in dir. */
int tu_mkfile(kv_env *env, uint64_t dir, const char *name, uint32_t mode, uint64_t *ino);
/* Write through kv_data_write and store the inode, in one op. */
int tu_pwrite(kv_env *env, uint64_t ino, uint64_t off, const void *buf, size_t len);
/* A write as the daemon makes it: ordinary first; when the image is full,
 * again as KV_OP_OVERWRITE, which may go past the room for ordinary changes
 * only if it adds no block and does not grow the file (apply_write's
 * rule). */
int tu_pwrite_daemon(kv_env *env, uint64_t ino, uint64_t off, const void *buf, size_t len);
/* The same with the block checksums computed first (kv_data_sums), as the
 * daemon writes. */
int tu_pwrite_sums(kv_env *env, uint64_t ino, uint64_t off, const void *buf, size_t len);
/* The same with the blocks compressed first at zstd level (kv_data_compress;
 * 0: none), as a mount with -o compress writes. */
int tu_pwrite_z(kv_env *env, uint64_t ino, uint64_t off, const void *buf, size_t len,
		int level);
/* Blocks [sidx, sidx + n) of src shared into dst at didx (kv_data_share,
 * as copy_file_range), both inodes stored, in one op. */
int tu_share(kv_env *env, uint64_t dst, uint64_t didx, uint64_t src, uint64_t sidx,
	     uint64_t n);
/* Read [off, off + len) of the file (its stored size) into buf: the byte
 * count, or a negative errno. */
ssize_t tu_pread(kv_env *env, uint64_t ino, uint64_t off, size_t len, void *buf);
/* The inode's fixed fields (inline_data is cleared: it would dangle). */
int tu_getattr(kv_env *env, uint64_t ino, struct kv_inode *out);

/* Edit one value of a closed image through raw LMDB: fn changes the copy
 * of the value of key in database db (a kv_db_names entry), which is then
 * stored. 0, or the LMDB error as a negative number. */
typedef void (*tu_edit_fn)(unsigned char *val, size_t len, void *arg);
int tu_raw_edit(const char *path, const char *db, const void *key, size_t klen, tu_edit_fn fn,
                void *arg);

/* The whole content of a file (malloc'd) and its length; NULL on error. */
unsigned char *tu_slurp(const char *path, size_t *len);
/* Write len bytes to a new file path. */
int tu_spit(const char *path, const void *buf, size_t len);
/* Deterministic pseudo-random bytes (xorshift64*, seeded). */
void tu_fill(void *buf, size_t len, uint64_t seed);
uint64_t tu_rand(uint64_t *state);

/* An ACL value (the kernel's xattr encoding) from getfacl's short text
 * ("u::rw,u:999:r,g::r,m::rw,o::-"; "x::r" is a tag no ACL has, "8" a perm
 * bit past rwx), entries in the order given, into buf: its length. buf has
 * room for 4 + 8 bytes per entry. */
size_t tu_acl_of(const char *text, unsigned char *buf);

#endif
