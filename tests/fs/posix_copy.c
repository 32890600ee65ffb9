/*
 * posix_copy.c - copy_file_range(2) at the syscall level (the posix_ops
 * suite): the bytes a copy leaves, within one file and across two, at
 * offsets off kvfs's 4072-byte blocks and tmpfs's pages; counts short at the
 * source's end and 0 at or past it; the destination's size and mtime; holes
 * read as zeros; and the errnos. Whether the filesystem answers the copy or
 * the kernel copies through read and write, a user sees the same, and the
 * tmpfs reference run holds it to what this kernel's local filesystems give.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "posix_ops.h"

#define MIB (1 << 20)
#define BIG ((3 << 20) + 17)

/* copy_file_range at explicit offsets, which must move by the count. */
static ssize_t copy(int in, off_t off_in, int out, off_t off_out, size_t len)
{
	loff_t i = off_in, o = off_out;
	ssize_t n = copy_file_range(in, &i, out, &o, len, 0);

	if (n >= 0) {
		assert_int_equal(i, off_in + n);
		assert_int_equal(o, off_out + n);
	}
	return n;
}

static off_t size_of(int fd)
{
	struct stat st;

	OK(fstat(fd, &st));
	return st.st_size;
}

/* Across files, at unaligned offsets; a copy of 3 MiB + 17; the destination
 * grows to off_out + copied. */
static void copy_across(const unsigned char *src)
{
	static const off_t offs[] = {0, 1, 4071, 4072, 4073, 4095, 4097, MIB + 5};
	unsigned char *big = malloc(BIG);
	int in, out;

	assert_non_null(big);
	px_put("src", src, 2 * MIB);
	in = (int)OK(open("src", O_RDONLY));
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		off_t o = offs[(i + 3) % (sizeof(offs) / sizeof(offs[0]))];
		size_t len = 4072 * 2 + 3;

		out = (int)OK(open("dst", O_CREAT | O_TRUNC | O_RDWR, 0644));
		assert_int_equal(OK(copy(in, offs[i], out, o, len)), len);
		assert_int_equal(size_of(out), o + (off_t)len);
		CHECK_ZEROS(out, 0, (size_t)o);
		CHECK_BYTES(out, o, src + offs[i], len);
		OK(close(out));
	}
	/* 3 MiB + 17 from a file of that size, into the middle of another */
	px_fill(big, BIG, 11);
	px_put("big", big, BIG);
	OK(close(in));
	in = (int)OK(open("big", O_RDONLY));
	out = (int)OK(open("dst", O_CREAT | O_TRUNC | O_RDWR, 0644));
	OK(write(out, src, 4073));
	assert_int_equal(OK(copy(in, 0, out, 4071, BIG)), BIG);
	assert_int_equal(size_of(out), 4071 + BIG);
	CHECK_BYTES(out, 0, src, 4071);
	CHECK_BYTES(out, 4071, big, BIG);
	/* from 1 MiB + 5 in, asking for more: the rest of the file */
	assert_int_equal(OK(copy(in, MIB + 5, out, 1, BIG)), BIG - MIB - 5);
	CHECK_BYTES(out, 1, big + MIB + 5, BIG - MIB - 5);
	assert_int_equal(size_of(out), 4071 + BIG);
	OK(close(out));
	OK(close(in));
	free(big);
}

/* Within one file: to a range after and before the source's, through one
 * fd and through two. */
static void copy_within(const unsigned char *src)
{
	unsigned char *want = malloc(2 * MIB);
	int fd, fd2;

	assert_non_null(want);
	memcpy(want, src, 2 * MIB);
	px_put("self", src, 2 * MIB);
	fd = (int)OK(open("self", O_RDWR));
	assert_int_equal(OK(copy(fd, 1, fd, 4073, 4072)), 4072);
	memmove(want + 4073, want + 1, 4072);
	assert_int_equal(OK(copy(fd, MIB + 5, fd, 4071, 9000)), 9000);
	memmove(want + 4071, want + MIB + 5, 9000);
	fd2 = (int)OK(open("self", O_WRONLY));
	assert_int_equal(OK(copy(fd, 4071, fd2, MIB + 5, 3 * 4072)), 3 * 4072);
	memmove(want + MIB + 5, want + 4071, 3 * 4072);
	/* past the end of the file: the short count, the file grows */
	assert_int_equal(OK(copy(fd, 2 * MIB - 100, fd2, 2 * MIB + 4073, 5000)), 100);
	assert_int_equal(size_of(fd), 2 * MIB + 4073 + 100);
	CHECK_BYTES(fd, 0, want, 2 * MIB);
	CHECK_ZEROS(fd, 2 * MIB, 4073);
	CHECK_BYTES(fd, 2 * MIB + 4073, want + 2 * MIB - 100, 100);
	/* overlapping ranges, in either direction, through either fd */
	ERR(EINVAL, copy(fd, 4072, fd, 4073, 100));
	ERR(EINVAL, copy(fd, 4073, fd2, 4072, 100));
	ERR(EINVAL, copy(fd, 0, fd, 0, 1));
	OK(close(fd2));
	OK(close(fd));
	free(want);
}

/* At and after the end: 0; a count short at the end; length 0. */
static void copy_ends(const unsigned char *src)
{
	int in, out;

	px_put("ten", src, 10000);
	in = (int)OK(open("ten", O_RDONLY));
	out = (int)OK(open("out", O_CREAT | O_TRUNC | O_RDWR, 0644));
	assert_int_equal(OK(copy(in, 10000, out, 0, 100)), 0);
	assert_int_equal(OK(copy(in, 10001, out, 0, 100)), 0);
	assert_int_equal(OK(copy(in, 4 * MIB, out, 0, 100)), 0);
	assert_int_equal(OK(copy(in, 0, out, 5, 0)), 0);
	assert_int_equal(size_of(out), 0);
	assert_int_equal(OK(copy(in, 9990, out, 4073, 4072)), 10);
	assert_int_equal(size_of(out), 4083);
	CHECK_ZEROS(out, 0, 4073);
	CHECK_BYTES(out, 4073, src + 9990, 10);
	/* a huge length: the rest of the source; one that wraps: EOVERFLOW */
	assert_int_equal(OK(copy(in, 0, out, 0, (size_t)-1)), 10000);
	CHECK_BYTES(out, 0, src, 10000);
	ERR(EOVERFLOW, copy(in, 5, out, 0, (size_t)-1));
	/* NULL offsets: the fds' own, advanced */
	OK(lseek(in, 4071, SEEK_SET));
	OK(lseek(out, 20000, SEEK_SET));
	assert_int_equal(OK(copy_file_range(in, NULL, out, NULL, 4073, 0)), 4073);
	assert_int_equal(OK(lseek(in, 0, SEEK_CUR)), 4071 + 4073);
	assert_int_equal(OK(lseek(out, 0, SEEK_CUR)), 20000 + 4073);
	CHECK_BYTES(out, 20000, src + 4071, 4073);
	OK(close(out));
	OK(close(in));
}

/* Holes, punched and never written, and fallocated ranges of the source
 * read as zeros in the copy, over bytes that were not zeros. */
static void copy_holes(const unsigned char *src)
{
	const off_t size = 2 * MIB + 3 * 4072 + 7, at = 4073;
	int in, out;

	in = (int)OK(open("sparse", O_CREAT | O_TRUNC | O_RDWR, 0644));
	OK(pwrite(in, src, 5000, 1));
	OK(fallocate(in, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1000, 4072));
	OK(pwrite(in, src, 3000, MIB + 5));
	OK(fallocate(in, 0, 2 * MIB, 3 * 4072));
	OK(pwrite(in, src, 7, 2 * MIB + 3 * 4072));
	assert_int_equal(size_of(in), size);
	out = (int)OK(open("dense", O_CREAT | O_TRUNC | O_RDWR, 0644));
	OK(pwrite(out, src, 2 * MIB, 0));
	OK(pwrite(out, src, MIB, 2 * MIB));
	assert_int_equal(OK(copy(in, 0, out, at, (size_t)size)), size);
	assert_int_equal(size_of(out), 3 * MIB);
	CHECK_BYTES(out, 0, src, (size_t)at);
	CHECK_ZEROS(out, at, 1);
	CHECK_BYTES(out, at + 1, src, 999);
	CHECK_ZEROS(out, at + 1000, MIB + 5 - 1000);
	CHECK_BYTES(out, at + MIB + 5, src, 3000);
	CHECK_ZEROS(out, at + MIB + 3005, MIB - 3005 + 3 * 4072);
	CHECK_BYTES(out, at + 2 * MIB + 3 * 4072, src, 7);
	CHECK_BYTES(out, at + size, src + at + size - 2 * MIB, (size_t)(3 * MIB - at - size));
	OK(close(out));
	OK(close(in));
}

/* The errnos: flags, fds opened for the wrong way, O_APPEND, a directory,
 * a FIFO, a closed fd. */
static void copy_errors(void)
{
	int in, out, ro, app, wo, dir, fifo;

	px_put("e", "0123456789", 10);
	in = (int)OK(open("e", O_RDONLY));
	out = (int)OK(open("eo", O_CREAT | O_RDWR, 0644));
	ro = (int)OK(open("eo", O_RDONLY));
	app = (int)OK(open("eo", O_WRONLY | O_APPEND));
	wo = (int)OK(open("e", O_WRONLY));
	dir = (int)OK(open(".", O_RDONLY | O_DIRECTORY));
	OK(mkfifo("fifo", 0644));
	fifo = (int)OK(open("fifo", O_RDWR | O_NONBLOCK));
	ERR(EINVAL, copy_file_range(in, NULL, out, NULL, 5, 1));
	ERR(EINVAL, copy_file_range(in, NULL, out, NULL, 0, 0x80000000u));
	ERR(EBADF, copy(in, 0, ro, 0, 5));
	ERR(EBADF, copy(in, 0, app, 0, 5));
	ERR(EBADF, copy(in, 0, app, 0, 0));
	ERR(EBADF, copy(wo, 0, out, 0, 5));
	ERR(EISDIR, copy(dir, 0, out, 0, 5));
	ERR(EISDIR, copy(in, 0, dir, 0, 5));
	ERR(EINVAL, copy(fifo, 0, out, 0, 5));
	ERR(EINVAL, copy(in, 0, fifo, 0, 5));
	OK(close(wo));
	ERR(EBADF, copy(wo, 0, out, 0, 5));
	assert_int_equal(size_of(out), 0);
	OK(close(fifo));
	OK(close(dir));
	OK(close(app));
	OK(close(ro));
	OK(close(out));
	OK(close(in));
}

/* A copy that moves bytes changes the destination's mtime; one of nothing
 * does not. */
static void copy_mtime(const unsigned char *src)
{
	struct timespec old = {1000000000, 0}, ts[2] = {old, old};
	struct stat st;
	int in, out;

	px_put("m", src, 5000);
	px_put("mo", src, 10);
	in = (int)OK(open("m", O_RDONLY));
	out = (int)OK(open("mo", O_RDWR));
	OK(futimens(out, ts));
	assert_int_equal(OK(copy(in, 5000, out, 0, 100)), 0);
	assert_int_equal(OK(copy(in, 0, out, 0, 0)), 0);
	OK(fstat(out, &st));
	assert_int_equal(px_tscmp(&st.st_mtim, &old), 0);
	assert_int_equal(OK(copy(in, 4071, out, 1, 10)), 10);
	OK(fstat(out, &st));
	assert_true(px_tscmp(&st.st_mtim, &old) > 0);
	OK(close(out));
	OK(close(in));
}

void test_copy_file_range(void **state)
{
	unsigned char *src = malloc(2 * MIB);

	(void)state;
	assert_non_null(src);
	px_fill(src, 2 * MIB, 5);
	px_enter("copy_file_range");
	copy_across(src);
	copy_within(src);
	copy_ends(src);
	copy_holes(src);
	copy_errors();
	copy_mtime(src);
	free(src);
}
