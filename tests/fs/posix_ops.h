/*
 * posix_ops.h - helpers shared by the files of the posix_ops suite
 * (posix_ops.c: files, data, attributes; posix_names.c: names, rename,
 * listings, removed-but-open objects; posix_xattr.c: extended attributes;
 * posix_acl.c: POSIX ACLs; posix_copy.c: copy_file_range; posix_direct.c:
 * O_DIRECT writes beside buffered reads).
 *
 * Every test starts with px_enter(name): it makes DIR/name and changes into
 * it, so the tests use plain relative paths and never see each other's files.
 * OK() and ERR() wrap a syscall: OK fails the test (naming the call, the
 * errno and the line) unless the result is >= 0 and returns it; ERR fails it
 * unless the call returned -1 with exactly the errno given.
 */
#ifndef KVFS_POSIX_OPS_H
#define KVFS_POSIX_OPS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <cmocka.h>

#define OK(call) px_ok((long long)(call), #call, __FILE__, __LINE__)
#define ERR(want, call) px_err((long long)(call), (want), #call, __FILE__, __LINE__)
#define CHECK_BYTES(fd, off, want, len) px_check_bytes(fd, off, want, len, __FILE__, __LINE__)
#define CHECK_ZEROS(fd, off, len) px_check_bytes(fd, off, NULL, len, __FILE__, __LINE__)

/* errno is read first thing in both, still the value the wrapped call set */
long long px_ok(long long r, const char *what, const char *file, int line);
void px_err(long long r, int want, const char *what, const char *file, int line);

/* Make DIR/name and make it the working directory. */
void px_enter(const char *name);
/* A byte pattern that differs with seed and position. */
void px_fill(unsigned char *buf, size_t len, unsigned seed);
/* Create or truncate path (mode 0644) and write len bytes. */
void px_put(const char *path, const void *buf, size_t len);
/* pread len bytes at off and compare them with want (NULL: zeros). */
void px_check_bytes(int fd, off_t off, const void *want, size_t len, const char *file, int line);
/* The inode number of path (lstat). */
ino_t px_ino(const char *path);
/* Wait until the coarse clock, which stamps kernel timestamps, is past t:
 * anything changed from now on gets a later time than t. */
void px_wait_past(const struct timespec *t);
/* a < b, a == b or a > b: -1, 0, 1 */
int px_tscmp(const struct timespec *a, const struct timespec *b);

/* posix_names.c */
void test_mkdir_rmdir(void **state);
void test_unlink(void **state);
void test_nlink(void **state);
void test_link(void **state);
void test_symlink(void **state);
void test_mknod(void **state);
void test_name_limits(void **state);
void test_rename_replace(void **state);
void test_rename_errors(void **state);
void test_rename_parents(void **state);
void test_rename_noreplace(void **state);
void test_rename_exchange(void **state);
void test_readdir_large(void **state);
void test_readdir_mutation(void **state);
void test_readdir_seek(void **state);
void test_unlink_open_file(void **state);
void test_rmdir_open_dir(void **state);

/* posix_xattr.c */
void test_xattr(void **state);
void test_xattr_large(void **state);
void test_xattr_names(void **state);

/* posix_acl.c */
void test_acl_access(void **state);
void test_acl_default(void **state); /* changes the umask: */
int px_umask_save(void **state);     /* its setup */
int px_umask_restore(void **state);  /* and teardown */

/* posix_copy.c */
void test_copy_file_range(void **state);

/* posix_direct.c */
void test_direct_write_buffered_read(void **state);

#endif
