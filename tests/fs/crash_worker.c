/*
 * crash_worker.c - a mixed workload that records what it made durable, and
 * the check that runs after the daemon was killed under it.
 *
 *   crash_worker run DIR LOG SEED     work in DIR until the mount dies; each
 *                                     file fsync'd is appended to LOG (a file
 *                                     outside the mount) after fsync returns
 *   crash_worker check DIR LOG [SEED] every file in LOG has its size and
 *                                     bytes; every file under DIR reads
 *                                     without an error; with SEED, what the
 *                                     run left is a prefix of its work
 *
 * Durable files are never renamed or removed by the workload; everything else
 * (unsynced files, renames, unlinks, directories, files unlinked while open)
 * may or may not survive, but must never read back as an error. And a change
 * the mount acknowledged may be lost only with every change after it (the
 * window commits in order, whole): the files of step j < k, where k is the
 * last step any of whose files is there, are as the run left them (renamed,
 * removed or there, with all their bytes), and no file ever has other bytes
 * than it was written with (step k's may have none yet).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint64_t name_seed(const char *name)
{
	uint64_t h = 1469598103934665603ULL;
	const char *base = strrchr(name, '/');

	for (const char *p = base ? base + 1 : name; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	return h | 1;
}

/* A file's bytes, from its name: random, or for half the names text that
 * compresses (a mount with -o compress stores it so). */
static void content(const char *name, unsigned char *buf, size_t len)
{
	uint64_t s = name_seed(name);

	if (s & 2) {
		for (size_t i = 0; i < len; i++)
			buf[i] = (unsigned char)("crash and burn\n"[i % 15] + (i % 500 ? 0 : s));
		return;
	}
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(rnd(&s) >> 32);
}

static int dead(int err)
{
	return err == ENOTCONN || err == ECONNABORTED || err == EIO || err == ENODEV;
}

#define FILE_MAX (256 * 1024)

/* Step i of the run of a seed: the file it writes, and what it does then. */
enum act { ACT_RENAME, ACT_UNLINK, ACT_DIR, ACT_ORPHAN, ACT_NONE, ACT_KEEP };
struct step {
	size_t len;
	enum act act;
};

static struct step plan(uint64_t *s, unsigned long i)
{
	struct step p = {.len = rnd(s) % FILE_MAX};

	if (i % 3 == 0) {
		p.act = ACT_KEEP; /* fsync'd, then left alone */
		return p;
	}
	switch (rnd(s) % 5) {
	case 0: p.act = ACT_RENAME; break;
	case 1: p.act = ACT_UNLINK; break;
	case 2: p.act = ACT_DIR; break;
	case 3: p.act = ACT_ORPHAN; break;
	default: p.act = ACT_NONE; break;
	}
	return p;
}

static uint64_t plan_seed(uint64_t seed)
{
	return seed * 0x9E3779B97F4A7C15ULL + 1;
}

static int run(const char *dir, const char *logpath, uint64_t seed)
{
	static unsigned char buf[FILE_MAX];
	char name[4096], other[4096];
	int logfd, keep = -1;
	uint64_t s = plan_seed(seed);

	logfd = open(logpath, O_WRONLY | O_APPEND | O_CREAT, 0644);
	if (logfd < 0)
		return 2;
	for (unsigned long i = 0;; i++) {
		struct step p = plan(&s, i);
		size_t len = p.len;
		int durable = p.act == ACT_KEEP, fd;

		snprintf(name, sizeof(name), "%s/%s.%llu.%lu", dir, durable ? "keep" : "tmp",
			 (unsigned long long)seed, i);
		content(name, buf, len);
		fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd < 0)
			return dead(errno) ? 0 : 1;
		if (write(fd, buf, len) != (ssize_t)len || (durable && fsync(fd) != 0)) {
			int err = errno;
			close(fd);
			return dead(err) ? 0 : 1;
		}
		close(fd);
		if (durable) {
			char line[4200];
			int n = snprintf(line, sizeof(line), "%s %zu\n", name, len);
			if (write(logfd, line, (size_t)n) != n || fsync(logfd) != 0)
				return 2;
			continue;
		}
		switch (p.act) {
		case ACT_RENAME:
			snprintf(other, sizeof(other), "%s/ren.%llu.%lu", dir,
				 (unsigned long long)seed, i);
			rename(name, other);
			break;
		case ACT_UNLINK:
			unlink(name);
			break;
		case ACT_DIR:
			snprintf(other, sizeof(other), "%s/dir.%llu.%lu", dir,
				 (unsigned long long)seed, i % 16);
			if (mkdir(other, 0755) != 0 && errno == EEXIST)
				rmdir(other);
			break;
		case ACT_ORPHAN: /* unlinked while open: an orphan until closed */
			if (keep >= 0)
				close(keep);
			keep = open(name, O_RDWR);
			unlink(name);
			break;
		default:
			break;
		}
	}
}

static int failures;

static void fail(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "FAIL: ");
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
	failures++;
}

static void read_tree(const char *path)
{
	static unsigned char buf[65536];
	struct dirent *de;
	struct stat st;
	char sub[4096];
	DIR *d = opendir(path);

	if (!d) {
		fail("opendir %s: %s", path, strerror(errno));
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		if (lstat(sub, &st) != 0) {
			fail("listed but cannot stat %s: %s", sub, strerror(errno));
		} else if (S_ISDIR(st.st_mode)) {
			read_tree(sub);
		} else if (S_ISREG(st.st_mode)) {
			int fd = open(sub, O_RDONLY);
			ssize_t n;
			if (fd < 0) {
				fail("open %s: %s", sub, strerror(errno));
				continue;
			}
			while ((n = read(fd, buf, sizeof(buf))) > 0) {
			}
			if (n < 0)
				fail("read %s: %s", sub, strerror(errno));
			close(fd);
		}
	}
	closedir(d);
}

/* The file of step i as name (tmp, keep or ren), if there: 1 and its bytes
 * checked against what it was written with (all of them: full), 0 when
 * absent. */
static int step_file(const char *dir, const char *kind, const char *orig, uint64_t seed,
		     unsigned long i, size_t len, int full)
{
	static unsigned char want[FILE_MAX], got[FILE_MAX + 1];
	char name[4096];
	struct stat st;
	ssize_t r;
	int fd;

	snprintf(name, sizeof(name), "%s/%s.%llu.%lu", dir, kind, (unsigned long long)seed, i);
	if (lstat(name, &st) != 0)
		return 0;
	fd = open(name, O_RDONLY);
	r = fd >= 0 ? pread(fd, got, sizeof(got), 0) : -1;
	if (fd >= 0)
		close(fd);
	content(orig, want, len);
	if (r < 0 || (size_t)r > len || (full && (size_t)r != len) || memcmp(want, got, (size_t)r))
		fail("%s: other bytes than written, or torn (%s)", name,
		     full ? "an earlier step: all of them" : "the last step");
	return 1;
}

/* The last step of seed's run any of whose files dir holds: 1 and *last,
 * or 0 when none is there. */
static int last_step(const char *dir, uint64_t seed, unsigned long *last)
{
	static const char *const kinds[] = {"tmp.", "keep.", "ren."};
	char pre[64];
	struct dirent *de;
	int any = 0;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL) {
		for (int k = 0; k < 3; k++) {
			size_t n = (size_t)snprintf(pre, sizeof(pre), "%s%llu.", kinds[k],
						    (unsigned long long)seed);
			if (strncmp(de->d_name, pre, n) == 0) {
				unsigned long i = strtoul(de->d_name + n, NULL, 10);
				if (!any || i > *last)
					*last = i;
				any = 1;
			}
		}
	}
	closedir(d);
	return any;
}

/* What the run of seed left in dir is a prefix of its steps (see the top). */
static void check_prefix(const char *dir, uint64_t seed)
{
	char name[4096], orig[4096];
	uint64_t s = plan_seed(seed);
	unsigned long last = 0;

	if (!last_step(dir, seed, &last))
		return;
	for (unsigned long i = 0; i <= last; i++) {
		struct step p = plan(&s, i);
		const char *kind = p.act == ACT_KEEP ? "keep" : "tmp";
		int full = i < last, there;

		snprintf(orig, sizeof(orig), "%s/%s.%llu.%lu", dir, kind, (unsigned long long)seed, i);
		there = step_file(dir, kind, orig, seed, i, p.len, full);
		there += step_file(dir, "ren", orig, seed, i, p.len, full) * 2;
		if (!full)
			continue; /* the last step: any part of it */
		snprintf(name, sizeof(name), "step %lu", i);
		if (p.act == ACT_RENAME && there != 2)
			fail("%s in %s: renamed, but not (only) under its new name", name, dir);
		else if ((p.act == ACT_UNLINK || p.act == ACT_ORPHAN) && there)
			fail("%s in %s: removed, but there", name, dir);
		else if ((p.act == ACT_NONE || p.act == ACT_DIR || p.act == ACT_KEEP) && there != 1)
			fail("%s in %s: lost while a later step survived", name, dir);
	}
	printf("seed %llu: steps 0..%lu checked as a prefix\n", (unsigned long long)seed, last);
}

static int check(const char *dir, const char *logpath, const char *seed)
{
	static unsigned char want[FILE_MAX], got[FILE_MAX];
	char line[4200], name[4096];
	size_t len, n = 0;
	FILE *f = fopen(logpath, "r");

	if (f) {
		while (fgets(line, sizeof(line), f)) {
			int fd;
			if (sscanf(line, "%4095s %zu", name, &len) != 2)
				continue;
			n++;
			fd = open(name, O_RDONLY);
			if (fd < 0) {
				fail("fsync'd file %s lost: %s", name, strerror(errno));
				continue;
			}
			content(name, want, len);
			ssize_t r = pread(fd, got, sizeof(got), 0);
			close(fd);
			if (r != (ssize_t)len || memcmp(want, got, len) != 0)
				fail("fsync'd file %s has other bytes%s", name, "");
		}
		fclose(f);
	}
	read_tree(dir);
	if (seed)
		check_prefix(dir, strtoull(seed, NULL, 10));
	printf("%zu fsync'd files checked, %d failures\n", n, failures);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "run"))
		return run(argv[2], argv[3], strtoull(argv[4], NULL, 10));
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "check"))
		return check(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
	fprintf(stderr, "usage: crash_worker run DIR LOG SEED | check DIR LOG [SEED]\n");
	return 2;
}
