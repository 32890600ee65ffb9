/*
 * fsops.c - metadata benchmarks through plain syscalls (no stdio on the
 * files, no Python): many small files, and one large directory.
 *
 *   fsops smallfiles DIR COUNT SIZE [-t SECONDS] [-w]
 *       create COUNT files of SIZE bytes (open O_CREAT, write, close), stat
 *       them warm, drop the kernel's dentry and inode caches, stat them cold,
 *       drop again, read them cold (open, read, close), read them warm,
 *       delete them; then create and delete them again on 2 threads.
 *   fsops bigdir DIR COUNT [-t SECONDS]
 *       create COUNT empty files in one directory, drop caches, look each
 *       name up (stat), drop caches, list the directory (getdents64).
 *   fsops creates DIR FROM COUNT SIZE [-t SECONDS]
 *   fsops stats DIR FROM COUNT SIZE
 *       one phase alone, on files FROM to FROM + COUNT - 1 of DIR (made if
 *       missing): create them (as smallfiles does), or stat each (its size
 *       checked); for several processes at once into one directory, or
 *       into one directory from several mounts (bench/pg_two.sh).
 *
 * Prints one line per phase: "phase NAME OPS SECONDS" (ops/s = OPS /
 * SECONDS), and "cold 0" if the caches could not be dropped (not root), in
 * which case the cold phases ran warm. A phase stops early after -t seconds
 * (default: none) and the phases after it work on the files that exist, so
 * a very slow peer still gives a rate. -w: after the create phase, wait for
 * a byte on stdin (the caller measures the space the files take). A phase
 * also stops when the filesystem runs out of file descriptors ("limit
 * PHASE ERROR" is printed; see limit_hit). Exits 1 on any unexpected result
 * (a short read, wrong bytes, a missing entry): the figures of a broken
 * run are never printed as if they were good.
 *
 * Dropping caches writes "2" to /proc/sys/vm/drop_caches: dentries and
 * inodes only. A FUSE filesystem then gets FORGETs and must answer lookups
 * again; the page cache of files still open (an image a daemon holds)
 * stays, so "cold" means the kernel's caches, not the disk.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double limit_s; /* 0: no time limit per phase */
static int cold_ok = 1;
static int pause_after_create; /* -w */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *path)
{
	fprintf(stderr, "fsops: %s '%s': %s\n", what, path, strerror(errno));
	exit(1);
}

static void name_of(char *buf, size_t n, const char *dir, long i)
{
	snprintf(buf, n, "%s/f%07ld", dir, i);
}

#define DROP_WAIT_MS 30000

/* Write dir's filesystem back (syncfs: not every filesystem of the host, as
 * sync(2) would wait for), then drop. The drop is a child's: the kernel
 * drops every filesystem's caches in turn, and one wedged elsewhere on the
 * host holds the writer where no signal ends it; after DROP_WAIT_MS it is
 * left there, and the cold rows run warm (cold_ok). */
static void drop_caches(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY), status;
	pid_t pid;

	if (fd >= 0) {
		syncfs(fd);
		close(fd);
	}
	if (getenv("FSOPS_NO_DROP")) /* bench/run: a drop did not return before */
		cold_ok = 0;
	if (!cold_ok)
		return;
	pid = fork();
	if (pid == 0) {
		fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
		_exit(fd >= 0 && write(fd, "2", 1) == 1 ? 0 : 1);
	}
	for (int ms = 0; pid > 0; ms += 10) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				cold_ok = 0;
			break;
		}
		if (ms >= DROP_WAIT_MS) {
			kill(pid, SIGKILL);
			fprintf(stderr, "fsops: dropping the kernel's caches did not return in %d s: "
				"the cold rows run warm\n", DROP_WAIT_MS / 1000);
			printf("drop_wedged\n"); /* for bench/run */
			fflush(stdout);
			cold_ok = 0;
			break;
		}
		usleep(10000);
	}
	if (pid < 0)
		cold_ok = 0;
	usleep(200000); /* let the FORGETs the drop queued reach the daemon */
}

/* A peer that runs out of file descriptors (passthrough_ll keeps one per
 * inode the kernel knows, and RLIMIT_NOFILE may not be raised) answers
 * EMFILE or ENFILE, or EBADF from a flush that could not dup. The phase
 * stops there and says so; its rate is over the ops it did. */
static int limited; /* limit_hit said yes once: files may be left behind */

static int limit_hit(const char *phase, int err)
{
	if (err != EMFILE && err != ENFILE && err != EBADF)
		return 0;
	limited = 1;
	printf("limit %s %s\n", phase, strerror(err));
	fflush(stdout);
	return 1;
}

static void report(const char *phase, long ops, double t0)
{
	printf("phase %s %ld %.6f\n", phase, ops, now_s() - t0);
	fflush(stdout);
}

static int over(double t0)
{
	return limit_s > 0 && now_s() - t0 > limit_s;
}

/* ------------------------------------------------------------ phases -- */

struct range {
	const char *dir;
	long from, to; /* files [from, to) */
	size_t size;
	long done;     /* result */
};

/* 0: created; 1: created, then the daemon ran out of descriptors; -1: not
 * created, for the same reason. Any other failure ends the program. */
static int create_one(const char *dir, long i, const char *buf, size_t size)
{
	char path[4096];
	int fd;

	name_of(path, sizeof(path), dir, i);
	fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
	if (fd < 0) {
		if (limit_hit("create", errno))
			return -1;
		die("create", path);
	}
	if (size && write(fd, buf, size) != (ssize_t)size)
		die("write", path);
	if (close(fd) != 0) {
		if (limit_hit("create", errno))
			return 1;
		die("close", path);
	}
	return 0;
}

static void *create_range(void *arg)
{
	struct range *r = arg;
	char *buf = malloc(r->size ? r->size : 1);
	double t0 = now_s();

	if (!buf)
		die("malloc", r->dir);
	for (long i = r->from; i < r->to; i++) {
		int rc;
		memset(buf, (int)(i & 0xff), r->size);
		rc = create_one(r->dir, i, buf, r->size);
		if (rc >= 0)
			r->done++;
		if (rc != 0 || ((r->done & 63) == 0 && over(t0)))
			break;
	}
	free(buf);
	return NULL;
}

static void *delete_range(void *arg)
{
	struct range *r = arg;
	char path[4096];

	for (long i = r->from; i < r->to; i++) {
		name_of(path, sizeof(path), r->dir, i);
		if (unlink(path) != 0)
			die("unlink", path);
		r->done++;
	}
	return NULL;
}

/* Run fn on nthreads threads over [0, n); returns the ops done. */
static long run_threads(void *(*fn)(void *), const char *dir, long n, size_t size, int nthreads,
			long *done_per, int keep_per)
{
	pthread_t tid[8];
	struct range r[8];
	long total = 0;

	for (int j = 0; j < nthreads; j++) {
		r[j] = (struct range){.dir = dir, .from = n * j / nthreads,
				      .to = keep_per ? n * j / nthreads + done_per[j]
						     : n * (j + 1) / nthreads,
				      .size = size};
		pthread_create(&tid[j], NULL, fn, &r[j]);
	}
	for (int j = 0; j < nthreads; j++) {
		pthread_join(tid[j], NULL);
		total += r[j].done;
		if (done_per)
			done_per[j] = r[j].done;
	}
	return total;
}

static long stat_all(const char *dir, long n, size_t size)
{
	char path[4096];
	struct stat st;

	for (long i = 0; i < n; i++) {
		name_of(path, sizeof(path), dir, i);
		if (stat(path, &st) != 0) {
			if (limit_hit("stat", errno))
				return i;
			die("stat", path);
		}
		if ((size_t)st.st_size != size) {
			fprintf(stderr, "fsops: '%s' has size %lld, not %zu\n", path,
				(long long)st.st_size, size);
			exit(1);
		}
	}
	return n;
}

static long read_all(const char *dir, long n, size_t size, char *buf)
{
	char path[4096];

	for (long i = 0; i < n; i++) {
		ssize_t got;
		int fd;

		name_of(path, sizeof(path), dir, i);
		fd = open(path, O_RDONLY);
		if (fd < 0) {
			if (limit_hit("read", errno))
				return i;
			die("open", path);
		}
		got = read(fd, buf, size + 1);
		if (got != (ssize_t)size)
			die("short read of", path);
		if (size && ((unsigned char)buf[0] != (i & 0xff) ||
			     (unsigned char)buf[size - 1] != (i & 0xff))) {
			fprintf(stderr, "fsops: '%s' holds the wrong bytes\n", path);
			exit(1);
		}
		if (close(fd) != 0 && limit_hit("read", errno))
			return i + 1;
	}
	return n;
}

static int smallfiles(const char *dir, long n, size_t size)
{
	char *buf = malloc(size + 1);
	long per[2] = {0, 0}, done;
	double t0;

	if (!buf || (mkdir(dir, 0755) != 0 && errno != EEXIST))
		die("mkdir", dir);
	t0 = now_s();
	done = run_threads(create_range, dir, n, size, 1, per, 0);
	report("create", done, t0);
	if (pause_after_create) { /* the driver measures the space taken */
		char c;
		if (read(0, &c, 1) != 1)
			die("read", "stdin");
	}
	n = done;
	t0 = now_s();
	report("stat", stat_all(dir, n, size), t0);
	drop_caches(dir);
	t0 = now_s();
	report("stat_cold", stat_all(dir, n, size), t0);
	drop_caches(dir);
	t0 = now_s();
	report("read_cold", read_all(dir, n, size, buf), t0);
	t0 = now_s();
	report("read_warm", read_all(dir, n, size, buf), t0);
	t0 = now_s();
	report("delete", run_threads(delete_range, dir, n, size, 1, per, 1), t0);

	/* the same on two threads: what the writer's batching gives */
	t0 = now_s();
	done = run_threads(create_range, dir, n, size, 2, per, 0);
	report("create_2t", done, t0);
	t0 = now_s();
	report("delete_2t", run_threads(delete_range, dir, n, size, 2, per, 1), t0);
	/* a delete phase stopped by the limit leaves files: not an error */
	if (rmdir(dir) != 0 && !(limited && errno == ENOTEMPTY))
		die("rmdir", dir);
	free(buf);
	return 0;
}

/* ----------------------------------------------------------- big dir -- */

static int bigdir(const char *dir, long n)
{
	char path[4096], buf[1 << 16];
	long per[1] = {0}, done, seen = 0;
	double t0;
	int fd;

	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		die("mkdir", dir);
	t0 = now_s();
	done = run_threads(create_range, dir, n, 0, 1, per, 0);
	report("create", done, t0);
	n = done;
	drop_caches(dir);
	t0 = now_s();
	for (long i = 0; i < n; i++) {
		struct stat st;
		name_of(path, sizeof(path), dir, i);
		if (stat(path, &st) != 0) {
			if (limit_hit("lookup", errno)) {
				n = i;
				break;
			}
			die("lookup", path);
		}
		if ((i & 63) == 0 && over(t0)) {
			n = i + 1;
			break;
		}
	}
	report("lookup_cold", n, t0);
	drop_caches(dir);
	t0 = now_s();
	fd = open(dir, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		die("open", dir);
	for (;;) {
		long got = syscall(SYS_getdents64, fd, buf, sizeof(buf));
		if (got < 0)
			die("getdents64", dir);
		if (got == 0)
			break;
		for (long off = 0; off < got;) {
			unsigned short reclen = *(unsigned short *)(buf + off + 16);
			seen++;
			off += reclen;
		}
	}
	close(fd);
	report("list_cold", seen, t0);
	if (seen < done + 2) {
		fprintf(stderr, "fsops: listed %ld entries, expected %ld\n", seen, done + 2);
		return 1;
	}
	return 0;
}

/* creates and stats: one phase on files [from, from + n). */
static int one_phase(const char *mode, const char *dir, long from, long n, size_t size)
{
	struct range r = {.dir = dir, .from = from, .to = from + n, .size = size};
	char path[4096];
	struct stat st;
	double t0;

	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		die("mkdir", dir);
	t0 = now_s();
	if (!strcmp(mode, "creates")) {
		create_range(&r);
		report("create", r.done, t0);
		return 0;
	}
	for (long i = from; i < from + n; i++) {
		name_of(path, sizeof(path), dir, i);
		if (stat(path, &st) != 0)
			die("stat", path);
		if ((size_t)st.st_size != size) {
			fprintf(stderr, "fsops: '%s' has size %lld, not %zu\n", path,
				(long long)st.st_size, size);
			return 1;
		}
	}
	report("stat", n, t0);
	return 0;
}

int main(int argc, char **argv)
{
	int rc;

	for (int i = 1; i < argc;) {
		if (!strcmp(argv[i], "-t") && i + 1 < argc) {
			limit_s = atof(argv[i + 1]);
			memmove(&argv[i], &argv[i + 2], (size_t)(argc - i - 1) * sizeof(*argv));
			argc -= 2;
		} else if (!strcmp(argv[i], "-w")) {
			pause_after_create = 1;
			memmove(&argv[i], &argv[i + 1], (size_t)(argc - i) * sizeof(*argv));
			argc--;
		} else {
			i++;
		}
	}
	if (argc == 5 && !strcmp(argv[1], "smallfiles"))
		rc = smallfiles(argv[2], atol(argv[3]), (size_t)atol(argv[4]));
	else if (argc == 4 && !strcmp(argv[1], "bigdir"))
		rc = bigdir(argv[2], atol(argv[3]));
	else if (argc == 6 && (!strcmp(argv[1], "creates") || !strcmp(argv[1], "stats")))
		rc = one_phase(argv[1], argv[2], atol(argv[3]), atol(argv[4]),
			       (size_t)atol(argv[5]));
	else {
		fprintf(stderr, "usage: fsops smallfiles DIR COUNT SIZE [-t SECONDS] [-w]\n"
				"       fsops bigdir DIR COUNT [-t SECONDS]\n"
				"       fsops creates|stats DIR FROM COUNT SIZE [-t SECONDS]\n");
		return 2;
	}
	if (!cold_ok)
		printf("cold 0\n");
	return rc;
}
