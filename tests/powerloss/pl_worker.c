/*
 * pl_worker.c - the power-loss harness's workload: mixed operations on a
 * small namespace of a kvfs mount, one at a time, with USER records in the
 * write log saying what each call changed and what each fsync(2) made
 * durable.
 *
 *   pl_worker DIR LOG SEED OPS
 *
 * DIR is the mount, LOG the recorder's log (wrec.h), which this appends to.
 * The namespace is 12 files in DIR and 6 in each of the subdirectories a and
 * b, which come and go: creates, whole-file writes, writes in the middle,
 * copies of one file over another (copy_file_range: kvfs shares blocks),
 * truncates, renames, unlinks, rmdir/mkdir. The run alternates phases: in a
 * synced phase (20-79 ops) a quarter of the changes are followed by an fsync
 * of the file or fdatasync (the same in kvfs), and a few ops fsync a
 * directory; a burst syncs nothing, so that many acknowledged changes wait
 * in kvfs's window when a cut comes: 20-80 ops, or one time in three
 * 400-1,200, long enough for a window of 200 ms to end by itself.
 *
 * Each call that changes the namespace is a step, and a step is one change
 * kvfs acknowledges (one FUSE request): creating open(2) (or its O_TRUNC),
 * the write(2) and the close(2) that writes it back (one contiguous range,
 * at most 512 KiB, below max_write: the kernel sends it as one request),
 * copy_file_range(2) of a file (one request, one change in kvfs up to 64 Ki
 * blocks), truncate(2), rename(2), unlink(2), mkdir(2), rmdir(2); fsync(2),
 * fdatasync(2) and an fsync of a directory are steps that change nothing.
 * The worker keeps a model of the namespace (each file's bytes, each
 * directory) and, after each step returned, appends "step N EFFECTS" (wrec.h)
 * with what the step did to the model, so that the replayer can rebuild the
 * namespace after any number of steps.
 *
 * Invariants:
 *  1. Steps run one at a time: step N+1 starts after step N's record, so at
 *     any point of the log at most one step is under way.
 *  2. A path is "claimed" from the record that says what it holds ("have
 *     PATH LEN HASH" after fsync of it returned, with the bytes read back;
 *     "gone PATH" after an unlink and the fsync of its directory returned)
 *     until a "drop PATH" record, appended before any call that may change
 *     the path starts. So at any point of the log, the claims standing are
 *     true of the filesystem whatever the daemon did since.
 *  3. The model is what the mount shows: every fsync reads the file back and
 *     compares it with the model, and the run ends by comparing every path;
 *     a difference ends the run with exit 1.
 *  4. Errors the namespace makes normal (ENOENT, EEXIST, ENOTEMPTY) are
 *     skipped and change nothing; any other error ends the run with exit 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "wrec.h"

#define NPATHS 24
#define MAX_LEN (512 * 1024) /* one write: below max_write, one request */
#define MAX_OFF (128 * 1024) /* where a write in the middle may start */
#define MAX_TRUNC 200000
#define FILE_CAP (MAX_OFF + MAX_LEN)

static const char *dir;
static int log_fd;
static uint64_t rng;
static char paths[NPATHS][16];
static int claimed[NPATHS];
static unsigned long n_have, n_gone, n_ops, n_steps, n_syncs, n_bursts;
static unsigned char buf[FILE_CAP];

/* The namespace as the steps left it (invariant 3). */
static struct {
	int exists;
	size_t len;
	unsigned char data[FILE_CAP];
} model[NPATHS];

/* The effects of the step under way, for its record. */
static char fx[1024];
static size_t fx_len;

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

static void mismatch(const char *path, const char *what)
{
	fprintf(stderr, "pl_worker: %s/%s: %s\n", dir, path, what);
	exit(1);
}

static int normal(int err)
{
	return err == ENOENT || err == EEXIST || err == ENOTEMPTY;
}

/* A USER record: one write, so it stays whole beside the daemon's. */
static void user(const char *fmt, ...)
{
	char line[sizeof(fx) + 64];
	struct wrec h = {.magic = WREC_MAGIC, .type = WREC_USER};
	unsigned char rec[sizeof(h) + sizeof(line)];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(line)) {
		errno = EOVERFLOW;
		die("a record too long for", "the log");
	}
	h.len = (uint64_t)n;
	memcpy(rec, &h, sizeof(h));
	memcpy(rec + sizeof(h), line, (size_t)n);
	if (write(log_fd, rec, sizeof(h) + (size_t)n) != (ssize_t)(sizeof(h) + (size_t)n))
		die("append to", "the log");
}

static void effect(const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(fx + fx_len, sizeof(fx) - fx_len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(fx) - fx_len) {
		errno = EOVERFLOW;
		die("too many effects for", "one step");
	}
	fx_len += (size_t)n;
}

static uint64_t model_hash(int i)
{
	return wrec_hash(WREC_HASH_INIT, model[i].data, model[i].len);
}

/* Effect: path i holds what the model says (wrec.h: "set"). */
static void fx_set(int i)
{
	effect(" set %s %zu %llu", paths[i], model[i].len, (unsigned long long)model_hash(i));
}

/* The step under way returned: its record (invariant 1). */
static void step_done(void)
{
	user("step %lu%s\n", ++n_steps, fx);
	fx_len = 0;
	fx[0] = '\0';
}

static const char *full(int i)
{
	static char p[4096];

	snprintf(p, sizeof(p), "%s/%s", dir, paths[i]);
	return p;
}

/* The directory a path is in: 0 (a), 1 (b), or -1 (DIR itself). */
static int dir_of(int i)
{
	return i < 12 ? -1 : i < 18 ? 0 : 1;
}

/* Before a call that may change path i: its claim ends (invariant 2). */
static void touch(int i)
{
	if (claimed[i])
		user("drop %s\n", paths[i]);
	claimed[i] = 0;
}

/* Read path i back and compare it with the model (invariant 3): the
 * length and digest of what was read, through *len and *hash. */
static void read_back(int i, int fd, uint64_t *len, uint64_t *hash)
{
	ssize_t n;

	*len = 0;
	*hash = WREC_HASH_INIT;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		if (*len + (uint64_t)n > model[i].len ||
		    memcmp(buf, model[i].data + *len, (size_t)n) != 0)
			mismatch(paths[i], "reads other bytes than were written");
		*hash = wrec_hash(*hash, buf, (uint64_t)n);
		*len += (uint64_t)n;
	}
	if (n < 0)
		die("read", full(i));
	if (*len != model[i].len)
		mismatch(paths[i], "reads shorter than was written");
}

/* fsync path i (or fdatasync), read it back and claim what it holds. */
static void sync_claim(int i)
{
	uint64_t hash, len;
	int fd = open(full(i), O_RDONLY);

	if (fd < 0) {
		if (!normal(errno))
			die("open", full(i));
		if (model[i].exists)
			mismatch(paths[i], "missing, but created");
		return;
	}
	if (!model[i].exists)
		mismatch(paths[i], "there, but was never created, or was removed");
	if ((rnd() % 2 ? fsync(fd) : fdatasync(fd)) != 0)
		die("fsync", full(i));
	effect(" sync");
	step_done();
	n_syncs++;
	read_back(i, fd, &len, &hash);
	close(fd);
	user("have %s %llu %llu\n", paths[i], (unsigned long long)len, (unsigned long long)hash);
	claimed[i] = 1;
	n_have++;
}

/* fsync a directory (d: 0 a, 1 b, -1 DIR); 0 done, -1 with errno. */
static int sync_dir(int d)
{
	char p[4096];
	int fd;

	snprintf(p, sizeof(p), "%s%s", dir, d < 0 ? "" : d ? "/b" : "/a");
	fd = open(p, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return -1;
	if (fsync(fd) != 0)
		die("fsync directory", p);
	close(fd);
	effect(" sync");
	step_done();
	n_syncs++;
	return 0;
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

/* A write's bytes: random, or half the time lines that differ a little,
 * which compress (a mount with -o compress stores them so). */
static void fill(size_t len)
{
	uint64_t x = rnd();

	if (x % 2) {
		for (size_t i = 0; i < len; i++)
			buf[i] = (unsigned char)("a line of text\n"[i % 15] + (i % 600 == 0 ? x : 0));
		return;
	}
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(rnd() >> 32);
}

/* Zeros in path i's model from its end up to `to`: the hole that a write
 * or truncate past the end leaves (the length is the caller's to set). */
static void model_grow(int i, size_t to)
{
	if (to > model[i].len)
		memset(model[i].data + model[i].len, 0, to - model[i].len);
}

/* Write len bytes at off; whole file: created or cut to 0 first, a step
 * of its own. */
static int put(int i, int whole)
{
	size_t len = pick_len();
	off_t off = whole ? 0 : (off_t)(rnd() % MAX_OFF);
	int fd = open(full(i), whole ? O_WRONLY | O_CREAT | O_TRUNC : O_WRONLY, 0644);

	if (fd < 0)
		return -1;
	if (!model[i].exists && !whole)
		mismatch(paths[i], "opens, but was never created, or was removed");
	if (whole) {
		model[i].exists = 1;
		model[i].len = 0;
		fx_set(i);
		step_done();
	}
	fill(len);
	if (pwrite(fd, buf, len, off) != (ssize_t)len)
		die("write", full(i));
	if (close(fd) != 0)
		die("close", full(i));
	model_grow(i, (size_t)off);
	memcpy(model[i].data + off, buf, len);
	if ((size_t)off + len > model[i].len)
		model[i].len = (size_t)off + len;
	fx_set(i);
	step_done();
	return 0;
}

static int cut(int i)
{
	size_t len = (size_t)(rnd() % MAX_TRUNC);

	if (truncate(full(i), (off_t)len) != 0)
		return -1;
	model_grow(i, len);
	model[i].len = len;
	fx_set(i);
	step_done();
	return 0;
}

/* Unlink path i; with sync, then fsync its directory and claim it gone. */
static int remove_path(int i, int sync)
{
	if (unlink(full(i)) != 0)
		return -1;
	model[i].exists = 0;
	effect(" del %s", paths[i]);
	step_done();
	if (!sync || rnd() % 2)
		return 0;
	if (sync_dir(dir_of(i)) != 0)
		die("open the directory of", full(i));
	user("gone %s\n", paths[i]);
	claimed[i] = 1;
	n_gone++;
	return 0;
}

static int subdir(void)
{
	int d = (int)(rnd() % 2);
	const char *name = d ? "b" : "a";
	char p[4096];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (rnd() % 2) {
		if (mkdir(p, 0755) != 0)
			return -1;
		effect(" mkdir %s", name);
	} else {
		if (rmdir(p) != 0) /* only when empty: no file claim can be "have" */
			return -1;
		for (int i = 0; i < NPATHS; i++)
			if (dir_of(i) == d && model[i].exists)
				mismatch(paths[i], "written, but its directory was removed");
		effect(" rmdir %s", name);
	}
	step_done();
	return 0;
}

static int move(int i, int j)
{
	char to[4096];

	touch(j);
	snprintf(to, sizeof(to), "%s/%s", dir, paths[j]);
	if (rename(full(i), to) != 0)
		return -1;
	if (i != j) {
		model[j].exists = 1;
		model[j].len = model[i].len;
		memcpy(model[j].data, model[i].data, model[i].len);
		model[i].exists = 0;
		fx_set(j);
		effect(" del %s", paths[i]);
	}
	step_done();
	return 0;
}

/* copy_file_range(2) of path i, whole, over path j at a multiple of 4072
 * bytes (the image's block size: kvfs shares the whole blocks, copies the
 * partial one at the end, in one change): a step. */
static int copy_over(int i, int j)
{
	size_t len = model[i].len;
	loff_t in_off = 0, out_off = (loff_t)(rnd() % 4) * 4072;
	int in, out;
	ssize_t n;

	if (i == j || !model[i].exists || !model[j].exists) {
		errno = ENOENT; /* nothing to copy: not a step */
		return -1;
	}
	if ((size_t)out_off + len > FILE_CAP)
		out_off = 0;
	in = open(full(i), O_RDONLY);
	if (in < 0)
		die("open", full(i));
	out = open(full(j), O_WRONLY);
	if (out < 0)
		die("open", full(j));
	n = copy_file_range(in, &in_off, out, &out_off, len, 0);
	if (n != (ssize_t)len)
		die("copy_file_range to", full(j));
	close(in);
	if (close(out) != 0)
		die("close", full(j));
	out_off -= (loff_t)len;
	model_grow(j, (size_t)out_off);
	memcpy(model[j].data + out_off, model[i].data, len);
	if ((size_t)out_off + len > model[j].len)
		model[j].len = (size_t)out_off + len;
	fx_set(j);
	step_done();
	return 0;
}

/* One operation on random paths; -1 with errno for a failed call. In a
 * burst (sync 0) nothing is synced. */
static int one_op(int sync)
{
	int i = (int)(rnd() % NPATHS), j = (int)(rnd() % NPATHS), rc;
	unsigned r = (unsigned)(rnd() % (sync ? 100 : 76));

	if (r >= 79) {
		sync_claim(i);
		return 0;
	}
	if (r >= 76)
		return sync_dir((int)(rnd() % 3) - 1);
	if (r >= 71)
		return subdir();
	touch(i);
	if (r >= 63)
		return remove_path(i, sync);
	if (r >= 53) {
		rc = move(i, j);
		i = j;
	} else if (r >= 45) {
		rc = cut(i);
	} else if (r >= 40) {
		touch(j);
		rc = copy_over(i, j);
		i = j;
	} else {
		rc = put(i, r < 30);
	}
	if (rc == 0 && sync && rnd() % 4 == 0)
		sync_claim(i);
	return rc;
}

/* The run ends: everything synced, every path as the model says. */
static void final_check(void)
{
	uint64_t len, hash;

	if (sync_dir(-1) != 0)
		die("open", dir);
	for (int i = 0; i < NPATHS; i++) {
		int fd = open(full(i), O_RDONLY);

		if (fd < 0 && !normal(errno))
			die("open", full(i));
		if ((fd >= 0) != model[i].exists)
			mismatch(paths[i], fd >= 0 ? "there, but removed" : "missing");
		if (fd < 0)
			continue;
		read_back(i, fd, &len, &hash);
		close(fd);
	}
}

int main(int argc, char **argv)
{
	unsigned long ops, phase = 0;
	int sync = 0; /* flipped: the run begins synced */

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
		if (phase == 0) {
			sync = !sync;
			phase = sync ? 20 + rnd() % 60
				     : rnd() % 3 ? 20 + rnd() % 61 : 400 + rnd() % 801;
			n_bursts += !sync;
		}
		phase--;
		if (one_op(sync) != 0 && !normal(errno))
			die("operation on", dir);
	}
	final_check();
	printf("pl_worker: %lu ops, %lu steps (%lu syncs), %lu bursts, %lu fsync claims, "
	       "%lu unlink claims\n",
	       n_ops, n_steps, n_syncs, n_bursts, n_have, n_gone);
	return 0;
}
