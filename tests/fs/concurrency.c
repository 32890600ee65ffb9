/*
 * concurrency.c - readers and writers on shared files and directories of a
 * mounted kvfs, contents verified during and after.
 *
 *   concurrency DIR SECONDS MANIFEST     run, then write slot versions
 *   concurrency --verify DIR MANIFEST    check DIR against a manifest
 *
 * Writers replace slot files atomically (write a temporary file, rename it
 * over "slot.N"), append records to a shared log, and churn directories and
 * hard links. Readers open slots, read them whole and check every byte
 * against the version the file's header names (a renamed file is never
 * written again, so any tear is a bug), list the directory (no duplicates,
 * no stray names) and stat. At the end every slot must hold the version its
 * last rename put there, and the log must hold every appended record.
 *
 * Prints "N passed, N failed" (checks) and exits non-zero on any failure.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 32
#define READERS 8
#define WRITERS 2
#define MAXLEN (192 * 1024)
#define REC 64

static const char *dir;
static atomic_int stop;
static atomic_long checks, failures;
static pthread_mutex_t slot_lock[SLOTS];
static uint64_t slot_version[SLOTS];
static atomic_long appended[WRITERS];

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "FAIL: " __VA_ARGS__);                                             \
		fputc('\n', stderr);                                                               \
		atomic_fetch_add(&failures, 1);                                                    \
	} while (0)

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Content of (slot, version): a 24-byte header then a pattern. */
static size_t fill(unsigned char *buf, int slot, uint64_t version)
{
	uint64_t s = version * 2654435761u + (uint64_t)slot + 1;
	size_t len = 24 + rnd(&s) % (MAXLEN - 24);

	memcpy(buf, &version, 8);
	memcpy(buf + 8, &len, 8);
	memcpy(buf + 16, &slot, 4);
	memset(buf + 20, 0, 4);
	for (size_t i = 24; i < len; i++)
		buf[i] = (unsigned char)(rnd(&s) >> 24);
	return len;
}

static int check_content(const unsigned char *buf, size_t n, int slot, uint64_t *version)
{
	static __thread unsigned char want[MAXLEN];
	uint64_t v, len;
	int sl;

	if (n < 24)
		return -1;
	memcpy(&v, buf, 8);
	memcpy(&len, buf + 8, 8);
	memcpy(&sl, buf + 16, 4);
	if (sl != slot || len != n || fill(want, slot, v) != n || memcmp(want, buf, n) != 0)
		return -1;
	*version = v;
	return 0;
}

static ssize_t read_all(int fd, unsigned char *buf, size_t cap)
{
	size_t n = 0;
	ssize_t r;

	while (n < cap && (r = read(fd, buf + n, cap - n)) > 0)
		n += (size_t)r;
	return r < 0 ? -1 : (ssize_t)n;
}

static void write_slot(int w, int slot, unsigned char *buf)
{
	char tmp[4096], name[4096];
	size_t len;
	int fd;

	pthread_mutex_lock(&slot_lock[slot]);
	uint64_t v = slot_version[slot] + 1;
	len = fill(buf, slot, v);
	snprintf(tmp, sizeof(tmp), "%s/tmp.%d", dir, w);
	snprintf(name, sizeof(name), "%s/slot.%d", dir, slot);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len || close(fd) != 0)
		FAIL("write %s: %s", tmp, strerror(errno));
	else if (rename(tmp, name) != 0)
		FAIL("rename %s: %s", name, strerror(errno));
	else
		slot_version[slot] = v;
	pthread_mutex_unlock(&slot_lock[slot]);
	atomic_fetch_add(&checks, 1);
}

static void append_record(int w, int logfd)
{
	char rec[REC];
	long n = atomic_load(&appended[w]);

	memset(rec, ' ', sizeof(rec));
	snprintf(rec, sizeof(rec), "w%d r%ld", w, n);
	rec[REC - 1] = '\n';
	if (write(logfd, rec, REC) != REC)
		FAIL("append: %s", strerror(errno));
	else
		atomic_fetch_add(&appended[w], 1);
}

static void churn(int w, uint64_t *s)
{
	char a[4096], b[4096];
	int k = (int)(rnd(s) % 8);

	snprintf(a, sizeof(a), "%s/d%d.%d", dir, w, k);
	snprintf(b, sizeof(b), "%s/d%d.%d/sub", dir, w, k);
	if (mkdir(a, 0755) == 0) {
		if (mkdir(b, 0700) != 0 || rmdir(b) != 0)
			FAIL("subdir %s: %s", b, strerror(errno));
	} else if (errno == EEXIST) {
		if (rmdir(a) != 0)
			FAIL("rmdir %s: %s", a, strerror(errno));
	} else {
		FAIL("mkdir %s: %s", a, strerror(errno));
	}
	snprintf(a, sizeof(a), "%s/slot.%d", dir, (int)(rnd(s) % SLOTS));
	snprintf(b, sizeof(b), "%s/link.%d", dir, w);
	unlink(b);
	if (link(a, b) != 0 && errno != ENOENT)
		FAIL("link %s: %s", b, strerror(errno));
	atomic_fetch_add(&checks, 1);
}

static void *writer(void *arg)
{
	int w = (int)(intptr_t)arg;
	uint64_t s = 0x9E3779B97F4A7C15ULL * (uint64_t)(w + 1);
	unsigned char *buf = malloc(MAXLEN);
	char path[4096];
	int logfd;

	snprintf(path, sizeof(path), "%s/log", dir);
	logfd = open(path, O_WRONLY | O_APPEND);
	if (!buf || logfd < 0) {
		FAIL("writer setup: %s", strerror(errno));
		return NULL;
	}
	while (!atomic_load(&stop)) {
		switch (rnd(&s) % 4) {
		case 0: case 1:
			write_slot(w, (int)(rnd(&s) % SLOTS), buf);
			break;
		case 2:
			append_record(w, logfd);
			break;
		default:
			churn(w, &s);
		}
	}
	close(logfd);
	free(buf);
	return NULL;
}

static void read_slot(int slot, uint64_t *seen, unsigned char *buf)
{
	char name[4096];
	uint64_t v;
	ssize_t n;
	int fd;

	snprintf(name, sizeof(name), "%s/slot.%d", dir, slot);
	fd = open(name, O_RDONLY);
	if (fd < 0) {
		if (errno != ENOENT || seen[slot])
			FAIL("open %s: %s", name, strerror(errno));
		return;
	}
	n = read_all(fd, buf, MAXLEN);
	close(fd);
	if (n < 0 || check_content(buf, (size_t)n, slot, &v) != 0)
		FAIL("%s: torn or wrong content (%zd bytes)", name, n);
	else if (v < seen[slot])
		FAIL("%s: version went back from %llu to %llu", name,
		     (unsigned long long)seen[slot], (unsigned long long)v);
	else
		seen[slot] = v;
	atomic_fetch_add(&checks, 1);
}

static void list_dir(void)
{
	char names[SLOTS] = {0};
	struct dirent *de;
	DIR *d = opendir(dir);
	int slot;

	if (!d) {
		FAIL("opendir: %s", strerror(errno));
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (sscanf(de->d_name, "slot.%d", &slot) == 1 && slot >= 0 && slot < SLOTS) {
			if (names[slot]++)
				FAIL("readdir: slot.%d listed twice", slot);
		} else if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
			   strncmp(de->d_name, "tmp.", 4) && strncmp(de->d_name, "d", 1) &&
			   strncmp(de->d_name, "link.", 5) && strcmp(de->d_name, "log")) {
			FAIL("readdir: stray name '%s'", de->d_name);
		}
	}
	closedir(d);
	atomic_fetch_add(&checks, 1);
}

static void *reader(void *arg)
{
	uint64_t s = 0xD1B54A32D192ED03ULL * (uint64_t)((intptr_t)arg + 7);
	uint64_t seen[SLOTS] = {0};
	unsigned char *buf = malloc(MAXLEN);
	struct stat st;
	char name[4096];

	while (buf && !atomic_load(&stop)) {
		int r = (int)(rnd(&s) % 10);
		if (r < 7) {
			read_slot((int)(rnd(&s) % SLOTS), seen, buf);
		} else if (r < 8) {
			list_dir();
		} else {
			snprintf(name, sizeof(name), "%s/slot.%d", dir, (int)(rnd(&s) % SLOTS));
			if (stat(name, &st) == 0 && !S_ISREG(st.st_mode))
				FAIL("%s: not a regular file", name);
			atomic_fetch_add(&checks, 1);
		}
	}
	free(buf);
	return NULL;
}

static int verify(const char *manifest)
{
	unsigned char *buf = malloc(MAXLEN);
	uint64_t seen[SLOTS] = {0};
	char path[4096], line[256];
	long recs[WRITERS] = {0}, want;
	int slot, w;
	unsigned long long v;
	FILE *f = fopen(manifest, "r");
	struct stat st;

	if (!f || !buf) {
		FAIL("open manifest %s: %s", manifest, strerror(errno));
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "slot %d %llu", &slot, &v) == 2 && slot >= 0 && slot < SLOTS) {
			uint64_t got = 0;
			seen[slot] = 0;
			read_slot(slot, seen, buf);
			got = seen[slot];
			if (got != v)
				FAIL("slot.%d holds version %llu, its last rename wrote %llu", slot,
				     (unsigned long long)got, v);
		} else if (sscanf(line, "log %d %ld", &w, &want) == 2 && w >= 0 && w < WRITERS) {
			recs[w] = want;
		}
	}
	fclose(f);
	/* the log holds exactly the records appended */
	snprintf(path, sizeof(path), "%s/log", dir);
	if (stat(path, &st) != 0 || st.st_size != (recs[0] + recs[1]) * REC)
		FAIL("log: %lld bytes, wanted %ld", (long long)st.st_size, (recs[0] + recs[1]) * REC);
	atomic_fetch_add(&checks, 1);
	free(buf);
	return 0;
}

static int run(int seconds, const char *manifest)
{
	pthread_t r[READERS], w[WRITERS];
	char path[4096];
	FILE *f;
	int fd;

	snprintf(path, sizeof(path), "%s/log", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		FAIL("create log: %s", strerror(errno));
		return 1;
	}
	close(fd);
	for (int i = 0; i < SLOTS; i++)
		pthread_mutex_init(&slot_lock[i], NULL);
	for (intptr_t i = 0; i < WRITERS; i++)
		pthread_create(&w[i], NULL, writer, (void *)i);
	for (intptr_t i = 0; i < READERS; i++)
		pthread_create(&r[i], NULL, reader, (void *)i);
	sleep((unsigned)seconds);
	atomic_store(&stop, 1);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(w[i], NULL);
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i], NULL);
	f = fopen(manifest, "w");
	if (!f) {
		FAIL("write manifest: %s", strerror(errno));
		return 1;
	}
	for (int i = 0; i < SLOTS; i++)
		if (slot_version[i])
			fprintf(f, "slot %d %llu\n", i, (unsigned long long)slot_version[i]);
	for (int i = 0; i < WRITERS; i++)
		fprintf(f, "log %d %ld\n", i, atomic_load(&appended[i]));
	fclose(f);
	return verify(manifest);
}

int main(int argc, char **argv)
{
	int rc;

	if (argc == 4 && strcmp(argv[1], "--verify") == 0) {
		dir = argv[2];
		rc = verify(argv[3]);
	} else if (argc == 4) {
		dir = argv[1];
		rc = run(atoi(argv[2]), argv[3]);
	} else {
		fprintf(stderr, "usage: concurrency DIR SECONDS MANIFEST | --verify DIR MANIFEST\n");
		return 2;
	}
	printf("%ld passed, %ld failed\n", atomic_load(&checks) - atomic_load(&failures),
	       atomic_load(&failures));
	return rc || atomic_load(&failures) ? 1 : 0;
}
