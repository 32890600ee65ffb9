/*
 * wrec.c - the write recorder of the power-loss harness: an LD_PRELOAD shim
 * that logs every write and sync the process makes to one file, the image.
 *
 *   KVFS_WREC_IMAGE=IMAGE KVFS_WREC_LOG=LOG LD_PRELOAD=wrec.so kvfs IMAGE DIR
 *
 * IMAGE must exist when the process starts (it is known by device and inode
 * number, so any path to it counts). Without both variables the shim passes
 * everything through and logs nothing. The record format is in wrec.h.
 *
 * What is hooked, and why that is enough for liblmdb 0.9.24 (nm -D: open,
 * pwrite, write, writev after lseek, fdatasync, fsync, ftruncate, msync, and
 * reads through mmap): open/openat and their 64 variants find the image's
 * descriptors; close and dup2/dup3 forget them; every write call on them is
 * logged; fsync/fdatasync are logged as a SYNC_BEGIN/SYNC_END pair. msync is
 * only LMDB's sync with MDB_WRITEMAP, whose writes go through memory and
 * cannot be seen here: a writable shared map of the image is logged as
 * UNSUPPORTED and the replayer refuses the log, rather than replay half of it.
 * A sync call the shim misses (syncfs, sync, another process) only makes the
 * replayer assume less was durable than was: a stricter test, never a laxer
 * one. A write the shim missed would make it wrong, hence the refusal above.
 *
 * Invariants:
 *  1. Each record goes out in one writev(2) on an O_APPEND descriptor kept
 *     above the low fds (the daemon dup2()s /dev/null over 0-2).
 *  2. The real call runs first and the record says what it did: the offset
 *     is read before a write(2)/writev(2) (lseek(fd, 0, SEEK_CUR)), the
 *     payload is the byte count the call returned. LMDB writes only inside
 *     its write transaction, which one thread at a time holds (kvfs's
 *     writer role), so nothing moves the offset in between.
 *  3. The descriptor table is guarded by a mutex; a descriptor is forgotten
 *     before the real close, so a number reused by a concurrent open is
 *     never mistaken for the image.
 */
/* the hooks must define both open and open64, pwrite and pwrite64: without
 * this the headers would rename the plain ones to the 64-bit symbols */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "wrec.h"

#define MAX_FDS 64
#define LOG_FD_MIN 200 /* out of the way of dup2 onto 0-2 */
#define MAX_IOV 1024

struct tracked {
	int fd;
	int flags; /* open flags */
};

static struct {
	int active;
	dev_t dev;
	ino_t ino;
	int log_fd;
	pthread_mutex_t lock;
	struct tracked fds[MAX_FDS];
	int nfds;
	atomic_ulong sync_seq;
} w = {.log_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

/* the next definition of a hooked function: libc, or a sanitizer before it */
#define REAL(name)                                                                                 \
	({                                                                                         \
		static __typeof__(name) *real_##name;                                              \
		if (!real_##name)                                                                  \
			real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name);                 \
		real_##name;                                                                       \
	})

static void die(const char *msg)
{
	static const char pre[] = "wrec: ";
	struct iovec iov[3] = {
		{(void *)pre, sizeof(pre) - 1}, {(void *)msg, strlen(msg)}, {"\n", 1}};

	if (REAL(writev)(2, iov, 3) < 0) {
		/* nowhere left to say it */
	}
	abort();
}

__attribute__((constructor)) static void wrec_init(void)
{
	const char *image = getenv("KVFS_WREC_IMAGE"), *log = getenv("KVFS_WREC_LOG");
	struct stat st;
	int fd;

	if (!image || !log || !*image || !*log)
		return;
	if (stat(image, &st) != 0)
		die("KVFS_WREC_IMAGE must exist before the process starts");
	fd = REAL(open)(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		die("cannot open KVFS_WREC_LOG");
	w.log_fd = fcntl(fd, F_DUPFD_CLOEXEC, LOG_FD_MIN);
	if (w.log_fd < 0)
		die("cannot move the log descriptor");
	REAL(close)(fd);
	w.dev = st.st_dev;
	w.ino = st.st_ino;
	w.active = 1;
}

/* Append one record: the header, then payload iovecs totalling h->len bytes. */
static void log_rec(struct wrec *h, const struct iovec *payload, int n)
{
	struct iovec iov[MAX_IOV + 1];
	size_t total;
	ssize_t r;

	if (n > MAX_IOV)
		die("write of too many iovecs to log");
	h->magic = WREC_MAGIC;
	total = sizeof(*h) + wrec_payload(h);
	iov[0] = (struct iovec){h, sizeof(*h)};
	if (n)
		memcpy(iov + 1, payload, sizeof(*payload) * (size_t)n);
	pthread_mutex_lock(&w.lock);
	r = REAL(writev)(w.log_fd, iov, n + 1);
	pthread_mutex_unlock(&w.lock);
	/* a record cut short would make every later one garbage */
	if (r != (ssize_t)total)
		die("cannot append to the log");
}

/* A record without payload: off and len carry values (wrec.h). */
static void log_note(uint16_t type, uint64_t off, uint64_t len, uint16_t flags)
{
	struct wrec h = {.type = type, .flags = flags, .off = off, .len = len};

	log_rec(&h, NULL, 0);
}

static int find_locked(int fd)
{
	for (int i = 0; i < w.nfds; i++)
		if (w.fds[i].fd == fd)
			return i;
	return -1;
}

/* The open flags of fd if it is on the image, else -1. */
static int image_flags(int fd)
{
	int i, flags = -1;

	if (!w.active || fd < 0)
		return -1;
	pthread_mutex_lock(&w.lock);
	i = find_locked(fd);
	if (i >= 0)
		flags = w.fds[i].flags;
	pthread_mutex_unlock(&w.lock);
	return flags;
}

static void track(int fd, int flags)
{
	pthread_mutex_lock(&w.lock);
	if (find_locked(fd) < 0) {
		if (w.nfds == MAX_FDS)
			die("too many descriptors on the image");
		w.fds[w.nfds++] = (struct tracked){fd, flags};
	}
	pthread_mutex_unlock(&w.lock);
}

static void untrack(int fd)
{
	int i;

	if (!w.active)
		return;
	pthread_mutex_lock(&w.lock);
	i = find_locked(fd);
	if (i >= 0)
		w.fds[i] = w.fds[--w.nfds];
	pthread_mutex_unlock(&w.lock);
}

static void opened(int fd, int flags)
{
	struct stat st;

	if (!w.active || fd < 0 || fstat(fd, &st) != 0)
		return;
	if (st.st_dev != w.dev || st.st_ino != w.ino)
		return;
	track(fd, flags);
	log_note(WREC_OPEN, (uint64_t)fd, (uint64_t)(unsigned)flags, 0);
}

static mode_t open_mode(int flags, va_list ap)
{
	return flags & (O_CREAT | O_TMPFILE) ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;
	int fd;

	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	fd = REAL(open)(path, flags, mode);
	opened(fd, flags);
	return fd;
}

int open64(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;
	int fd;

	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	fd = REAL(open64)(path, flags, mode);
	opened(fd, flags);
	return fd;
}

int openat(int dir, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;
	int fd;

	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	fd = REAL(openat)(dir, path, flags, mode);
	opened(fd, flags);
	return fd;
}

int openat64(int dir, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;
	int fd;

	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	fd = REAL(openat64)(dir, path, flags, mode);
	opened(fd, flags);
	return fd;
}

int close(int fd)
{
	untrack(fd);
	return REAL(close)(fd);
}

/* After dup2/dup3 of old onto new: new is the image if old was (and the
 * call worked), or is what it was before (the call failed, nothing closed). */
static void redup(int old, int new, int rc, int old_flags, int new_flags)
{
	if (old == new)
		return;
	if (rc >= 0 && old_flags >= 0)
		track(new, old_flags);
	else if (rc < 0 && new_flags >= 0)
		track(new, new_flags);
}

int dup2(int old, int new)
{
	int old_flags = image_flags(old), new_flags = image_flags(new), rc;

	if (old != new)
		untrack(new); /* dup2 closes it (invariant 3) */
	rc = REAL(dup2)(old, new);
	redup(old, new, rc, old_flags, new_flags);
	return rc;
}

int dup3(int old, int new, int oflags)
{
	int old_flags = image_flags(old), new_flags = image_flags(new), rc;

	untrack(new);
	rc = REAL(dup3)(old, new, oflags);
	redup(old, new, rc, old_flags, new_flags);
	return rc;
}

/* Log what a write of n bytes at off did: the first n bytes of iov. */
static void log_write(int flags, uint64_t off, const struct iovec *iov, int cnt, ssize_t n)
{
	struct iovec part[MAX_IOV];
	struct wrec h = {.type = WREC_WRITE, .off = off, .len = (uint64_t)n};
	size_t left = (size_t)n;
	int k = 0;

	if (n <= 0)
		return;
	for (int i = 0; i < cnt && left; i++) {
		size_t take = iov[i].iov_len < left ? iov[i].iov_len : left;
		if (k == MAX_IOV)
			die("write of too many iovecs to log");
		part[k++] = (struct iovec){iov[i].iov_base, take};
		left -= take;
	}
	h.flags = flags & O_DSYNC ? WREC_DSYNC : 0; /* O_SYNC includes O_DSYNC's bit */
	log_rec(&h, part, k);
}

/* The offset a write(2) on fd is about to use. */
static uint64_t cur_off(int fd, int flags)
{
	struct stat st;

	if (flags & O_APPEND)
		return fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	return (uint64_t)lseek(fd, 0, SEEK_CUR);
}

/* A write call on fd (image open flags, or -1) returned n: log it if fd is
 * the image, keeping the call's errno. */
static ssize_t wrote(int flags, uint64_t off, const struct iovec *iov, int cnt, ssize_t n)
{
	int err = errno;

	if (flags >= 0)
		log_write(flags, off, iov, cnt, n);
	errno = err;
	return n;
}

ssize_t write(int fd, const void *buf, size_t len)
{
	int flags = image_flags(fd);
	uint64_t off = flags >= 0 ? cur_off(fd, flags) : 0;
	return wrote(flags, off, &(struct iovec){(void *)buf, len}, 1, REAL(write)(fd, buf, len));
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	int flags = image_flags(fd);
	uint64_t off = flags >= 0 ? cur_off(fd, flags) : 0;
	return wrote(flags, off, iov, cnt, REAL(writev)(fd, iov, cnt));
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	int flags = image_flags(fd);

	return wrote(flags, (uint64_t)off, &(struct iovec){(void *)buf, len}, 1,
		     REAL(pwrite)(fd, buf, len, off));
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off64_t off)
{
	int flags = image_flags(fd);

	return wrote(flags, (uint64_t)off, &(struct iovec){(void *)buf, len}, 1,
		     REAL(pwrite64)(fd, buf, len, off));
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	int flags = image_flags(fd);

	return wrote(flags, (uint64_t)off, iov, cnt, REAL(pwritev)(fd, iov, cnt, off));
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
	int flags = image_flags(fd);

	return wrote(flags, (uint64_t)off, iov, cnt, REAL(pwritev64)(fd, iov, cnt, off));
}

ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int rwf)
{
	int flags = image_flags(fd);
	uint64_t at = flags >= 0 && off == -1 ? cur_off(fd, flags) : (uint64_t)off;

	if (flags >= 0 && (rwf & (RWF_DSYNC | RWF_SYNC)))
		flags |= O_DSYNC;
	return wrote(flags, at, iov, cnt, REAL(pwritev2)(fd, iov, cnt, off, rwf));
}

/* fsync and fdatasync: the same barrier for the image's data (LMDB never
 * relies on fdatasync for metadata other than the size, which it syncs). */
static int logged_sync(int fd, int (*real)(int))
{
	uint64_t id;
	int rc, err;

	if (image_flags(fd) < 0)
		return real(fd);
	id = ((uint64_t)getpid() << 32) | atomic_fetch_add(&w.sync_seq, 1);
	log_note(WREC_SYNC_BEGIN, id, 0, 0);
	rc = real(fd);
	err = errno;
	log_note(WREC_SYNC_END, id, 0, rc == 0 ? WREC_OK : 0);
	errno = err;
	return rc;
}

int fsync(int fd)
{
	return logged_sync(fd, REAL(fsync));
}

int fdatasync(int fd)
{
	return logged_sync(fd, REAL(fdatasync));
}

/* An ftruncate of fd to len returned rc: log it if fd is the image. */
static int truncated(int fd, uint64_t len, int rc)
{
	int err = errno;

	if (rc == 0 && image_flags(fd) >= 0)
		log_note(WREC_TRUNC, len, 0, 0);
	errno = err;
	return rc;
}

int ftruncate(int fd, off_t len)
{
	return truncated(fd, (uint64_t)len, REAL(ftruncate)(fd, len));
}

int ftruncate64(int fd, off64_t len)
{
	return truncated(fd, (uint64_t)len, REAL(ftruncate64)(fd, len));
}

static void mapped(int fd, int prot, int flags)
{
	static const char msg[] = "writable shared map of the image (MDB_WRITEMAP?): "
				  "writes through memory are not recorded";
	struct wrec h = {.type = WREC_UNSUPPORTED, .len = sizeof(msg) - 1};

	if ((prot & PROT_WRITE) && (flags & MAP_SHARED) && image_flags(fd) >= 0)
		log_rec(&h, &(struct iovec){(void *)msg, sizeof(msg) - 1}, 1);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	mapped(fd, prot, flags);
	return REAL(mmap)(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	mapped(fd, prot, flags);
	return REAL(mmap64)(addr, len, prot, flags, fd, off);
}
