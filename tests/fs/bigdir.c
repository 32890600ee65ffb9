/*
 * bigdir.c - one directory of N entries: create, look up each, list it whole
 * (each name exactly once), unlink all, and find it empty.
 *
 *   bigdir DIR N
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures, checks;

static void check(int ok, const char *what, long i)
{
	checks++;
	if (!ok) {
		failures++;
		if (failures < 20)
			fprintf(stderr, "FAIL: %s (%ld): %s\n", what, i, strerror(errno));
	}
}

static long count_entries(const char *dir, long n)
{
	unsigned char *seen = calloc((size_t)n + 1, 1);
	struct dirent *de;
	long total = 0, i;
	DIR *d = opendir(dir);

	check(d != NULL && seen != NULL, "opendir", 0);
	if (!d || !seen) {
		if (d)
			closedir(d);
		free(seen);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		total++;
		if (sscanf(de->d_name, "entry-%ld", &i) != 1 || i < 0 || i >= n) {
			check(0, "stray name in listing", total);
			continue;
		}
		if (seen[i]++)
			check(0, "name listed twice", i);
		if (de->d_type != DT_REG)
			check(0, "d_type", i);
	}
	closedir(d);
	for (i = 0; i < n; i++)
		if (!seen[i])
			check(0, "name missing from listing", i);
	free(seen);
	return total;
}

int main(int argc, char **argv)
{
	char path[4096];
	struct stat st;
	long n, i;

	if (argc != 3 || (n = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: bigdir DIR N\n");
		return 2;
	}
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/entry-%ld", argv[1], i);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
		check(fd >= 0, "create", i);
		if (fd >= 0)
			close(fd);
	}
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/entry-%ld", argv[1], i);
		check(stat(path, &st) == 0 && S_ISREG(st.st_mode), "lookup", i);
	}
	snprintf(path, sizeof(path), "%s/entry-%ld", argv[1], n);
	check(stat(path, &st) != 0 && errno == ENOENT, "lookup of a missing name", n);
	check(count_entries(argv[1], n) == n, "full listing count", n);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/entry-%ld", argv[1], i);
		check(unlink(path) == 0, "unlink", i);
	}
	check(count_entries(argv[1], 0) == 0, "listing after unlinking all", 0);
	check(rmdir(argv[1]) == 0, "rmdir of the emptied directory", 0);
	printf("%d passed, %d failed\n", checks - failures, failures);
	return failures ? 1 : 0;
}
