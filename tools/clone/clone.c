/*
 * clone.c - kvfs-clone: an instant copy of a tree on a mounted kvfs.
 *
 *   kvfs-clone [-v] SRC DST
 *
 * DST (which must not exist) becomes a copy of SRC (a directory or a
 * regular file) made by the daemon in one change, sharing every block with
 * SRC: the tool opens SRC and sends KVFS_IOC_CLONE (common/kvfs_ioctl.h),
 * naming DST by its parent's inode number and its last component. Both
 * must be on the same kvfs mount. The kernel's dirty pages are written
 * back first (syncfs), so writes made through the cache before are copied.
 *
 * Exit codes: 0 done, 1 could not (a message says why), 16 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "kvfs_ioctl.h"

#define EXIT_USAGE 16

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [-v] SRC DST\n"
		"Make DST a copy of the tree at SRC on a mounted kvfs, in one change and at\n"
		"once: every file shares its blocks with the original until either changes\n"
		"them. DST must not exist; its parent must be on the same mount. Modes,\n"
		"owners, times, xattrs, ACLs and hard links are kept as cp -a keeps them.\n"
		"\n"
		"  -v, --verbose   say what the copy holds and how long it took\n"
		"  -h, --help      show this help and exit\n"
		"  -V, --version   show the version and exit\n"
		"\n"
		"Exit status: 0 done, 1 failed, 16 usage.\n",
		cli_prog);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* What an errno of the ioctl means here. */
static const char *why(int err)
{
	switch (err) {
	case ENOTTY:
	case ENOSYS:
	case EOPNOTSUPP:
		return "not on a kvfs mount, or its kvfs has no kvfs-clone";
	case EEXIST:
		return "DST exists";
	case EINVAL:
		return "DST lies within SRC, or its name is not valid";
	case EACCES:
		return "permission denied: SRC must be readable throughout and DST's parent "
		       "writable";
	default:
		return strerror(err);
	}
}

/* DST's parent and last component into dparent and dname (PATH_MAX bytes
 * each), checked: a name a copy can take, of nothing that exists. 0, or
 * -1 after a message. */
static int check_dst(const char *dst, char *dparent, char *dname)
{
	char a[PATH_MAX], b[PATH_MAX]; /* dirname and basename change them */
	struct stat st;

	if (strlen(dst) >= PATH_MAX) {
		cli_error_at(dst, "name too long");
		return -1;
	}
	snprintf(a, sizeof(a), "%s", dst);
	snprintf(b, sizeof(b), "%s", dst);
	snprintf(dparent, PATH_MAX, "%s", dirname(a));
	snprintf(dname, PATH_MAX, "%s", basename(b));
	if (strlen(dname) > KVFS_CLONE_NAME_MAX || !strcmp(dname, "/") || !strcmp(dname, ".") ||
	    !strcmp(dname, "..")) {
		cli_error_at(dst, "not a name a copy can take");
		return -1;
	}
	if (lstat(dst, &st) == 0) {
		cli_error_at(dst, "exists");
		return -1;
	}
	return 0;
}

/* SRC opened, a directory or a regular file, its stat in *st: the fd, or
 * -1 after a message. */
static int open_src(const char *src, struct stat *st)
{
	int fd;

	/* the type before the open: opening a fifo waits for a writer, and a
	 * device's open is the device's business; O_NONBLOCK covers a fifo put
	 * in SRC's place between the two */
	if (lstat(src, st) != 0) {
		cli_error_at(src, "%s", strerror(errno));
		return -1;
	}
	if (S_ISLNK(st->st_mode)) {
		cli_error_at(src, "a symlink: copy it with cp -a");
		return -1;
	}
	if (!S_ISDIR(st->st_mode) && !S_ISREG(st->st_mode)) {
		cli_error_at(src, "not a directory or a regular file");
		return -1;
	}
	fd = open(src, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, st) != 0) {
		cli_error_at(src, "%s", errno == ELOOP ? "a symlink: copy it with cp -a"
							: strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st->st_mode) && !S_ISREG(st->st_mode)) {
		cli_error_at(src, "not a directory or a regular file");
		return -1;
	}
	return fd;
}

/* DST's parent: a directory on SRC's mount (sst), its stat in *pst. 0, or
 * -1 after a message. */
static int check_parent(const char *src, const char *dparent, const struct stat *sst,
			struct stat *pst)
{
	if (stat(dparent, pst) != 0) {
		cli_error_at(dparent, "%s", strerror(errno));
		return -1;
	}
	if (!S_ISDIR(pst->st_mode)) {
		cli_error_at(dparent, "not a directory");
		return -1;
	}
	if (pst->st_dev != sst->st_dev) {
		cli_error("'%s' and '%s' are not on one mount", src, dparent);
		return -1;
	}
	return 0;
}

/* Ask the daemon, through SRC's fd, for the copy named dname in the
 * directory pst; with verbose, say what it holds. 0, or -1 after a
 * message. */
static int send_clone(int fd, const char *src, const char *dst, const char *dname,
		      const struct stat *pst, int verbose)
{
	struct kvfs_clone_arg arg;
	double t0;

	memset(&arg, 0, sizeof(arg));
	arg.dst_parent = (uint64_t)pst->st_ino;
	memcpy(arg.name, dname, strlen(dname));
	t0 = now_s();
	syncfs(fd); /* what the kernel caches reaches kvfs first */
	if (ioctl(fd, KVFS_IOC_CLONE, &arg) != 0) {
		cli_error("cannot copy '%s' to '%s': %s", src, dst, why(errno));
		return -1;
	}
	close(fd);
	if (verbose)
		printf("%s: %llu directories, %llu files, %llu bytes shared, in %.3f s\n", dst,
		       (unsigned long long)arg.dirs, (unsigned long long)arg.files,
		       (unsigned long long)arg.bytes, now_s() - t0);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	char dparent[PATH_MAX], dname[PATH_MAX];
	const char *src, *dst;
	struct stat sst, pst;
	int c, fd, verbose = 0;

	cli_init(argv);
	while ((c = getopt_long(argc, argv, "vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'v':
			verbose = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			cli_print_version();
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (argc - optind != 2) {
		cli_error("%s", argc - optind < 2 ? "SRC and DST are needed" : "too many arguments");
		usage(stderr);
		return EXIT_USAGE;
	}
	src = argv[optind];
	dst = argv[optind + 1];
	if (check_dst(dst, dparent, dname) != 0)
		return 1;
	fd = open_src(src, &sst);
	if (fd < 0 || check_parent(src, dparent, &sst, &pst) != 0)
		return 1;
	return send_clone(fd, src, dst, dname, &pst, verbose) ? 1 : 0;
}
