/*
 * posix_direct.c - O_DIRECT writes beside buffered reads (the posix_ops
 * suite). A read must never return bytes older than a write that has
 * completed: a reader thread keeps the file's pages in the page cache
 * (buffered reads through descriptors of its own, opened and closed again
 * and again, so pages outlive an open as kvfs lets them), while the main
 * thread writes each round's bytes with an asynchronous O_DIRECT write (the
 * kernel's AIO, as xfstests generic/451 does; a synchronous one is covered
 * by the kernel itself, which drops the range's pages after it) and, once it
 * has completed, reads them through a fresh buffered descriptor.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "posix_ops.h"

#define DIO_SIZE (256 * 1024)
#define DIO_ROUNDS 200

static atomic_int reading;

static void *read_on(void *arg)
{
	static char buf[DIO_SIZE];

	(void)arg;
	while (atomic_load(&reading)) {
		int fd = open("f", O_RDONLY);

		if (fd < 0)
			continue;
		while (pread(fd, buf, sizeof(buf), 0) > 0 && atomic_load(&reading))
			if (pread(fd, buf, 4096, DIO_SIZE / 2) < 0)
				break;
		close(fd);
	}
	return NULL;
}

/* One asynchronous O_DIRECT write of len bytes at 0, submitted and waited
 * for. glibc has no wrapper for the kernel's AIO calls; libaio is a thin
 * one over these same three. */
static long aio_write_wait(aio_context_t ctx, int fd, const void *buf, size_t len)
{
	struct iocb cb = {
		.aio_lio_opcode = IOCB_CMD_PWRITE,
		.aio_fildes = (uint32_t)fd,
		.aio_buf = (uint64_t)(uintptr_t)buf,
		.aio_nbytes = len,
	};
	struct iocb *cbs[1] = {&cb};
	struct io_event ev;

	if (syscall(SYS_io_submit, ctx, 1L, cbs) != 1)
		return -errno;
	if (syscall(SYS_io_getevents, ctx, 1L, 1L, &ev, NULL) != 1)
		return -errno;
	return (long)ev.res;
}

void test_direct_write_buffered_read(void **state)
{
	unsigned char *dio, *got = malloc(DIO_SIZE);
	aio_context_t ctx = 0;
	pthread_t reader;
	int fd, round;

	(void)state;
	px_enter("direct_buffered");
	assert_int_equal(posix_memalign((void **)&dio, 4096, DIO_SIZE), 0);
	assert_non_null(got);
	px_fill(dio, DIO_SIZE, 0);
	px_put("f", dio, DIO_SIZE);
	OK(syscall(SYS_io_setup, 1, &ctx));
	atomic_store(&reading, 1);
	assert_int_equal(pthread_create(&reader, NULL, read_on, NULL), 0);
	for (round = 1; round <= DIO_ROUNDS; round++) {
		int rfd;

		px_fill(dio, DIO_SIZE, (unsigned)round);
		fd = (int)OK(open("f", O_WRONLY | O_DIRECT));
		assert_int_equal(aio_write_wait(ctx, fd, dio, DIO_SIZE), DIO_SIZE);
		OK(close(fd));
		rfd = (int)OK(open("f", O_RDONLY));
		assert_int_equal(OK(pread(rfd, got, DIO_SIZE, 0)), DIO_SIZE);
		OK(close(rfd));
		if (memcmp(got, dio, DIO_SIZE) != 0) {
			size_t at = 0;

			while (got[at] == dio[at])
				at++;
			atomic_store(&reading, 0);
			pthread_join(reader, NULL);
			fail_msg("round %d: a buffered read after the O_DIRECT write gave "
				 "older bytes (first at %zu)", round, at);
		}
	}
	atomic_store(&reading, 0);
	pthread_join(reader, NULL);
	OK(syscall(SYS_io_destroy, ctx));
	free(got);
	free(dio);
}
