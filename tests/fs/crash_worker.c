/*
 * crash_worker.c - a mixed workload that records what it made durable, and
 * the check that runs after the daemon was killed under it.
 *
 *   crash_worker run DIR LOG SEED     work in DIR until the mount dies; each
 *                                     file fsync'd is appended to LOG (a file
 *                                     outside the mount) after fsync returns
 *   crash_worker check DIR LOG        every file in LOG has its size and
 *                                     bytes; every file under DIR reads
 *                                     without an error
 *
 * Durable files are never renamed or removed by the workload; everything else
 * (unsynced files, renames, unlinks, directories, files unlinked while open)
 * may or may not survive, but must never read back as an error.
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

static void content(const char *name, unsigned char *buf, size_t len)
{
	uint64_t s = name_seed(name);
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(rnd(&s) >> 32);
}

static int dead(int err)
{
	return err == ENOTCONN || err == ECONNABORTED || err == EIO || err == ENODEV;
}

static int run(const char *dir, const char *logpath, uint64_t seed)
{
	static unsigned char buf[256 * 1024];
	char name[4096], other[4096];
	int logfd, keep = -1;
	uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;

	logfd = open(logpath, O_WRONLY | O_APPEND | O_CREAT, 0644);
	if (logfd < 0)
		return 2;
	for (unsigned long i = 0;; i++) {
		size_t len = rnd(&s) % sizeof(buf);
		int durable = i % 3 == 0, fd;

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
		switch (rnd(&s) % 5) {
		case 0:
			snprintf(other, sizeof(other), "%s/ren.%llu.%lu", dir,
				 (unsigned long long)seed, i);
			rename(name, other);
			break;
		case 1:
			unlink(name);
			break;
		case 2:
			snprintf(other, sizeof(other), "%s/dir.%llu.%lu", dir,
				 (unsigned long long)seed, i % 16);
			if (mkdir(other, 0755) != 0 && errno == EEXIST)
				rmdir(other);
			break;
		case 3: /* unlinked while open: an orphan until closed */
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

static int check(const char *dir, const char *logpath)
{
	static unsigned char want[256 * 1024], got[256 * 1024];
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
	printf("%zu fsync'd files checked, %d failures\n", n, failures);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "run"))
		return run(argv[2], argv[3], strtoull(argv[4], NULL, 10));
	if (argc == 4 && !strcmp(argv[1], "check"))
		return check(argv[2], argv[3]);
	fprintf(stderr, "usage: crash_worker run DIR LOG SEED | check DIR LOG\n");
	return 2;
}
