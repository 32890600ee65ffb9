/*
 * pl_worker.c - the power-loss harness's workload: mixed operations on a
 * small namespace of a kvfs mount, with USER records in the write log saying
 * what each fsync(2) made durable.
 *
 *   pl_worker DIR LOG SEED OPS
 *
 * DIR is the mount, LOG the recorder's log (wrec.h), which this appends to.
 * The namespace is 12 files in DIR and 6 in each of the subdirectories a and
 * b, which come and go: creates, whole-file writes, writes in the middle,
 * truncates, renames, unlinks, rmdir/mkdir. A quarter of the changes are
 * followed by an fsync of the file or fdatasync (the same in kvfs).
 *
 * Invariants:
 *  1. A path is "claimed" from the record that says what it holds ("have
 *     PATH LEN HASH" after fsync of it returned, with the bytes read back;
 *     "gone PATH" after an unlink and the fsync of its directory returned)
 *     until a "drop PATH" record, appended before any call that may change
 *     the path starts. So at any point of the log, the claims standing are
 *     true of the filesystem whatever the daemon did since.
 *  2. Errors the namespace makes normal (ENOENT, EEXIST, ENOTEMPTY) are
 *     skipped; any other error ends the run with exit 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "wrec.h"

#define NPATHS 24
#define MAX_LEN (512 * 1024)

static const char *dir;
static int log_fd;
static uint64_t rng;
static char paths[NPATHS][16];
static int claimed[NPATHS];
static unsigned long n_have, n_gone, n_ops;
static unsigned char buf[MAX_LEN];

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void die(const char *what, const char *path)
{
	fprintf(stderr, "pl_worker: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

static int normal(int err)
{
	return err == ENOENT || err == EEXIST || err == ENOTEMPTY;
}

/* A USER record: one write, so it stays whole beside the daemon's. */
static void user(const char *fmt, const char *path, uint64_t len, uint64_t hash)
{
	char line[256];
	int n = snprintf(line, sizeof(line), fmt, path, (unsigned long long)len,
			 (unsigned long long)hash);
	struct wrec h = {.magic = WREC_MAGIC, .type = WREC_USER, .len = (uint64_t)n};
	unsigned char rec[sizeof(h) + sizeof(line)];

	memcpy(rec, &h, sizeof(h));
	memcpy(rec + sizeof(h), line, (size_t)n);
	if (write(log_fd, rec, sizeof(h) + (size_t)n) != (ssize_t)(sizeof(h) + (size_t)n))
		die("append to", "the log");
}

static const char *full(int i)
{
	static char p[4096];

	snprintf(p, sizeof(p), "%s/%s", dir, paths[i]);
	return p;
}

/* Before a call that may change path i: its claim ends (invariant 1). */
static void touch(int i)
{
	if (claimed[i])
		user("drop %s\n", paths[i], 0, 0);
	claimed[i] = 0;
}

/* fsync path i (or fdatasync), read it back and claim what it holds. */
static void sync_claim(int i)
{
	uint64_t hash = WREC_HASH_INIT, len = 0;
	int fd = open(full(i), O_RDONLY);
	ssize_t n;

	if (fd < 0) {
		if (normal(errno))
			return;
		die("open", full(i));
	}
	if ((rnd() % 2 ? fsync(fd) : fdatasync(fd)) != 0)
		die("fsync", full(i));
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		hash = wrec_hash(hash, buf, (uint64_t)n);
		len += (uint64_t)n;
	}
	if (n < 0)
		die("read", full(i));
	close(fd);
	user("have %s %llu %llu\n", paths[i], len, hash);
	claimed[i] = 1;
	n_have++;
}

static size_t pick_len(void)
{
	unsigned r = (unsigned)(rnd() % 100);

	if (r < 70)
		return rnd() % 8192;
	if (r < 95)
		return rnd() % 65536;
	return rnd() % MAX_LEN;
}

static void fill(size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(rnd() >> 32);
}

/* Write len bytes at off (whole file: O_TRUNC first). */
static int put(int i, int whole)
{
	size_t len = pick_len();
	off_t off = whole ? 0 : (off_t)(rnd() % 131072);
	int fd = open(full(i), whole ? O_WRONLY | O_CREAT | O_TRUNC : O_WRONLY, 0644);

	if (fd < 0)
		return -1;
	fill(len);
	if (pwrite(fd, buf, len, off) != (ssize_t)len)
		die("write", full(i));
	close(fd);
	return 0;
}

static int remove_path(int i)
{
	char d[4096], *slash;
	int fd;

	if (unlink(full(i)) != 0)
		return -1;
	if (rnd() % 2)
		return 0;
	snprintf(d, sizeof(d), "%s", full(i));
	slash = strrchr(d, '/');
	*slash = '\0';
	fd = open(d, O_RDONLY | O_DIRECTORY);
	if (fd < 0 || fsync(fd) != 0)
		die("fsync directory", d);
	close(fd);
	user("gone %s\n", paths[i], 0, 0);
	claimed[i] = 1;
	n_gone++;
	return 0;
}

static int subdir(void)
{
	char d[4096];

	snprintf(d, sizeof(d), "%s/%s", dir, rnd() % 2 ? "a" : "b");
	if (rnd() % 2)
		return mkdir(d, 0755);
	return rmdir(d); /* only when empty: no file claim can be "have" */
}

static int move(int i, int j)
{
	char to[4096];

	touch(j);
	snprintf(to, sizeof(to), "%s/%s", dir, paths[j]);
	return rename(full(i), to);
}

/* One operation on random paths; -1 with errno for a failed call. */
static int one_op(void)
{
	int i = (int)(rnd() % NPATHS), j = (int)(rnd() % NPATHS), rc;
	unsigned r = (unsigned)(rnd() % 100);

	if (r >= 76) {
		sync_claim(i);
		return 0;
	}
	if (r >= 71)
		return subdir();
	touch(i);
	if (r >= 63)
		return remove_path(i);
	if (r >= 53) {
		rc = move(i, j);
		i = j;
	} else if (r >= 45) {
		rc = truncate(full(i), (off_t)(rnd() % 200000));
	} else {
		rc = put(i, r < 30);
	}
	if (rc == 0 && rnd() % 4 == 0)
		sync_claim(i);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned long ops;

	if (argc != 5) {
		fprintf(stderr, "usage: pl_worker DIR LOG SEED OPS\n");
		return 2;
	}
	dir = argv[1];
	rng = strtoull(argv[3], NULL, 10) * 0x9E3779B97F4A7C15ULL + 1;
	ops = strtoul(argv[4], NULL, 10);
	log_fd = open(argv[2], O_WRONLY | O_APPEND);
	if (log_fd < 0)
		die("open", argv[2]);
	for (int i = 0; i < NPATHS; i++) {
		const char *fmt = i < 12 ? "f%02d" : i < 18 ? "a/f%02d" : "b/f%02d";
		snprintf(paths[i], sizeof(paths[i]), fmt, i);
	}
	for (n_ops = 0; n_ops < ops; n_ops++) {
		if (one_op() != 0 && !normal(errno))
			die("operation on", dir);
	}
	printf("pl_worker: %lu ops, %lu fsync claims, %lu unlink claims\n", n_ops, n_have, n_gone);
	return 0;
}
