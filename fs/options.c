/*
 * options.c - the daemon's command line: the arguments and -o options into
 * fs.cfg, their checks and messages, and --help.
 *
 *   kvfs IMAGE MOUNTPOINT [-f] [-d] [-o opt,...]
 *
 * Invariants:
 *  1. Every option is checked before anything is opened or mounted, each
 *     error with a message of its own naming the value; a bad option exits
 *     2, a path that cannot be used 1.
 *  2. The image and mountpoint paths are made absolute (an image URL stays as
 *     given): the daemon leaves its working directory, and unmounts by name.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "fs.h"

struct cli {
	char *durability;
	char *max_size;
	char *commit;
	char *window;
	char *timeout, *max_write, *threads; /* checked here: each error its own */
	int writeback, nowriteback, nokeepcache, noskipopen, nocachedir, nocachesymlinks, noreaddirplus;
	int noio_uring; /* the last of -o io_uring and -o noio_uring */
	int noacl, acl_given; /* the last of -o acl and -o noacl */
	char *compress;       /* the last of -o compress[=...] and -o nocompress: the value,
				 "" bare, NULL for nocompress */
	int compress_given;
	int help, version;
	int atime; /* an atime option was given */
	int nargs;
};

enum { KEY_HELP, KEY_VERSION, KEY_FG, KEY_DEBUG, KEY_RO, KEY_NOATIME, KEY_RELATIME,
       KEY_STRICTATIME, KEY_ACL, KEY_NOACL, KEY_COMPRESS, KEY_NOCOMPRESS, KEY_URING,
       KEY_NOURING };

#define OPT(t, f) {t, offsetof(struct cli, f), 1}

#define FS_RO_TIMEOUT 1.0 /* seconds: the cache timeout of a read-only mount */
/* The window of the fsync and none modes (kv/window.c): a change is told
 * once applied, and committed within this many milliseconds */
#define FS_WINDOW_MS 5

static const struct fuse_opt cli_spec[] = {
	{"durability=%s", offsetof(struct cli, durability), 0},
	{"max_size=%s", offsetof(struct cli, max_size), 0},
	{"commit=%s", offsetof(struct cli, commit), 0},
	{"window=%s", offsetof(struct cli, window), 0},
	{"timeout=%s", offsetof(struct cli, timeout), 0},
	{"max_write=%s", offsetof(struct cli, max_write), 0},
	{"threads=%s", offsetof(struct cli, threads), 0},
	OPT("writeback", writeback),
	OPT("nowriteback", nowriteback),
	OPT("nokeepcache", nokeepcache),
	OPT("noskipopen", noskipopen),
	OPT("nocachedir", nocachedir),
	OPT("nocachesymlinks", nocachesymlinks),
	OPT("noreaddirplus", noreaddirplus),
	FUSE_OPT_KEY("io_uring", KEY_URING),
	FUSE_OPT_KEY("noio_uring", KEY_NOURING),
	FUSE_OPT_KEY("acl", KEY_ACL),
	FUSE_OPT_KEY("noacl", KEY_NOACL),
	FUSE_OPT_KEY("compress", KEY_COMPRESS),
	FUSE_OPT_KEY("compress=", KEY_COMPRESS),
	FUSE_OPT_KEY("nocompress", KEY_NOCOMPRESS),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("-f", KEY_FG),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("debug", KEY_DEBUG),
	FUSE_OPT_KEY("ro", KEY_RO),
	FUSE_OPT_KEY("noatime", KEY_NOATIME),
	FUSE_OPT_KEY("relatime", KEY_RELATIME),
	FUSE_OPT_KEY("strictatime", KEY_STRICTATIME),
	FUSE_OPT_END,
};

static char *image_arg, *mnt_arg;

static int cli_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct cli *c = data;

	(void)outargs;
	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (c->nargs == 0)
			image_arg = strdup(arg);
		else if (c->nargs == 1)
			mnt_arg = strdup(arg);
		else {
			fprintf(stderr, "kvfs: unexpected argument '%s'\n", arg);
			return -1;
		}
		c->nargs++;
		return 0;
	case KEY_HELP:
		c->help = 1;
		return 0;
	case KEY_ACL:
	case KEY_NOACL:
		c->noacl = key == KEY_NOACL;
		c->acl_given = 1;
		return 0;
	case KEY_URING:
	case KEY_NOURING:
		c->noio_uring = key == KEY_NOURING;
		return 0;
	case KEY_COMPRESS:
	case KEY_NOCOMPRESS:
		free(c->compress);
		c->compress = NULL;
		if (key == KEY_COMPRESS && !(c->compress = strdup(arg[8] == '=' ? arg + 9 : "")))
			return -1;
		c->compress_given = 1;
		return 0;
	case KEY_VERSION:
		c->version = 1;
		return 0;
	case KEY_FG:
		fs.cfg.foreground = 1;
		return 0;
	case KEY_DEBUG:
		fs.cfg.foreground = fs.cfg.debug = 1;
		return 1; /* libfuse prints each request */
	case KEY_RO:
		fs.cfg.readonly = 1;
		return 1; /* also a kernel mount flag */
	case KEY_NOATIME:
		fs.cfg.atime = FS_ATIME_NOATIME;
		c->atime = 1;
		return 1;
	/* the kernel updates no atime on a FUSE inode: kvfs does it all, and
	 * libfuse refuses these two as mount options */
	case KEY_RELATIME:
		fs.cfg.atime = FS_ATIME_RELATIME;
		c->atime = 1;
		return 0;
	case KEY_STRICTATIME:
		fs.cfg.atime = FS_ATIME_STRICT;
		c->atime = 1;
		return 0;
	default:
		/* libfuse takes no command-line option kvfs does not handle
		 * (mount.fuse3 passes only -o) */
		if (arg[0] == '-') {
			fprintf(stderr, "kvfs: unknown option '%s'\n", arg);
			return -1;
		}
		return 1; /* an -o option of libfuse's, or one it refuses */
	}
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: kvfs IMAGE MOUNTPOINT [-f] [-d] [-o opt[,opt...]]\n"
"Mount the kvfs image IMAGE (made by mkfs.kvfs: a file, or a postgresql:// URL)\n"
"on MOUNTPOINT.\n"
"\n"
"  -f                     stay in the foreground\n"
"  -d, -o debug           foreground, and print every request\n"
"  -h, --help             show this help\n"
"  -V, --version          show the version\n"
"\n"
"kvfs options (the image's mount defaults, set by kvfs-tune -o, count where\n"
"these say nothing):\n"
"  -o durability=MODE     full: every change is durable when its call returns\n"
"                         fsync (default): the image stays consistent across\n"
"                           power loss; fsync(2), fdatasync(2) and the commit\n"
"                           interval make changes durable\n"
"                         none: fastest, for scratch data: safe against a killed\n"
"                           daemon, not against an OS crash or power loss\n"
"  -o window=MS           fsync and none modes: a change is acknowledged once\n"
"                         applied, and committed within MS milliseconds\n"
"                         (default 5; 0: committed before it is acknowledged;\n"
"                         on a postgresql:// image the default is 5 while no\n"
"                         other mount is there, else 0)\n"
"  -o commit=SECONDS      fsync and none modes: make changes durable at most\n"
"                         this long after they are made (default 5; 0: only\n"
"                         on fsync)\n"
"  -o max_size=SIZE       largest size the image file may grow to (K, M, G, T)\n"
"  -o ro                  mount read-only\n"
"  -o relatime            update access times once after each change, or daily\n"
"                         (default; reads answered from the kernel's cache do not\n"
"                         reach kvfs and update nothing)\n"
"  -o noatime             never update access times\n"
"  -o strictatime         update access times on every read that reaches kvfs\n"
"  -o acl                 POSIX ACLs (acl(5)), kept and enforced (default)\n"
"  -o noacl               no POSIX ACLs: setfacl is refused, stored ones are\n"
"                         neither shown nor enforced\n"
"  -o compress[=zstd[:LEVEL]]  store new data blocks compressed with zstd where\n"
"                         that saves room (level 1 to 19, default 3); blocks\n"
"                         stored before stay as they are\n"
"  -o nocompress          store new data blocks as they are (default)\n"
"  -o allow_other         let other users use the mount\n"
"  -o timeout=SECONDS     how long the kernel may cache names and attributes\n"
"                         (default 86400; kvfs is the image's only writer; 1\n"
"                         with ro, to follow a read-write mount of the image,\n"
"                         and on a postgresql:// image other mounts write)\n"
"  -o max_write=BYTES     largest write request, 64K to 1M (default 1M)\n"
"  -o threads=N           request worker threads (default 8)\n"
"  -o writeback           the kernel's writeback cache: writes gather in the\n"
"                         page cache (faster small writes; a GETATTR after\n"
"                         every close of a file; ENOSPC at close or fsync)\n"
"  -o nowriteback         each write goes to kvfs at once (default)\n"
"  -o nokeepcache         drop the page cache of a file when it is opened\n"
"                         (always on a postgresql:// image: close-to-open)\n"
"  -o noskipopen          send OPEN and OPENDIR to kvfs (default: skipped)\n"
"  -o nocachedir          do not let the kernel cache directory listings\n"
"  -o nocachesymlinks     do not let the kernel cache symlink targets\n"
"  -o noreaddirplus       list directories without attributes\n"
"  -o io_uring            serve requests over io_uring where the kernel offers\n"
"                         it (default; needs kvfs built with libfuse 3.18+)\n"
"  -o noio_uring          serve requests over /dev/fuse\n"
"Other -o options are libfuse's (fsname, subtype, default_permissions, ...).\n");
}

/* libfuse refuses the -o options it does not know only when a session is
 * made: make one now, before anything is opened, so a bad option is named
 * first (by libfuse: "unknown option(s)"). */
static int check_fuse_opts(const struct fuse_args *args)
{
	struct fuse_args copy = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se;

	for (int i = 0; i < args->argc; i++)
		if (fuse_opt_add_arg(&copy, args->argv[i]) != 0)
			return -1;
	se = fuse_session_new(&copy, &fs_ops, sizeof(fs_ops), NULL);
	fuse_opt_free_args(&copy);
	if (!se)
		return -1;
	fuse_session_destroy(se);
	return 0;
}

/* The numeric options: 0, or -1 after saying which was wrong and why. */
static int parse_limits(const struct cli *c, double *timeout, unsigned *max_write,
			unsigned *threads)
{
	uint64_t v;
	char *end;

	if (c->timeout) {
		errno = 0;
		*timeout = strtod(c->timeout, &end);
		if (errno || end == c->timeout || *end || !(*timeout >= 0) || *timeout > 1e9) {
			fprintf(stderr, "kvfs: timeout must be a number of seconds, 0 or more, "
					"not '%s'\n", c->timeout);
			return -1;
		}
	}
	/* libfuse sizes its request buffer by max_write: below 64 KiB the
	 * kernel refuses the largest xattr values with E2BIG */
	if (c->max_write) {
		if (size_parse(c->max_write, &v) || v < KV_XATTR_SIZE_MAX || v > (1 << 20)) {
			fprintf(stderr, "kvfs: max_write must be %d to %d bytes (64K to 1M), not "
					"'%s'\n", KV_XATTR_SIZE_MAX, 1 << 20, c->max_write);
			return -1;
		}
		*max_write = (unsigned)v;
	}
	if (c->threads) {
		if (size_parse(c->threads, &v) || v < 1 || v > 256) {
			fprintf(stderr, "kvfs: threads must be a number from 1 to 256, not '%s'\n",
				c->threads);
			return -1;
		}
		*threads = (unsigned)v;
	}
	return 0;
}

/* compress, durability, max_size, commit and window: 0, or 2 after saying
 * which was wrong. */
static int parse_modes(const struct cli *c, uint64_t *commit)
{
	char err[160];

	fs.cfg.compress = 0;
	if (c->compress && compress_parse(c->compress, &fs.cfg.compress, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvfs: %s\n", err);
		return 2;
	}
	fs.cfg.durability = KV_DURABLE_NORMAL;
	if (c->durability) {
		if (!strcmp(c->durability, "full"))
			fs.cfg.durability = KV_DURABLE_FULL;
		else if (!strcmp(c->durability, "none"))
			fs.cfg.durability = KV_DURABLE_NONE;
		else if (strcmp(c->durability, "fsync")) {
			fprintf(stderr, "kvfs: durability must be full, fsync or none, not '%s'\n",
				c->durability);
			return 2;
		}
	}
	if (c->max_size && (size_parse(c->max_size, &fs.cfg.max_size) || fs.cfg.max_size < (1 << 20))) {
		fprintf(stderr, "kvfs: max_size '%s' is not a size of 1M or more\n", c->max_size);
		return 2;
	}
	if (c->commit && size_parse(c->commit, commit)) {
		fprintf(stderr, "kvfs: commit '%s' is not a number of seconds\n", c->commit);
		return 2;
	}
	if (c->window) {
		uint64_t ms;

		if (size_parse(c->window, &ms) || ms > MOUNT_WINDOW_MS_MAX) {
			fprintf(stderr, "kvfs: window must be 0 to %d milliseconds, not '%s'\n",
				MOUNT_WINDOW_MS_MAX, c->window);
			return 2;
		}
		fs.cfg.window_ms = (unsigned)ms;
	}
	return 0;
}

/* The image and the mountpoint, made absolute (invariant 2): 0, or 1 after
 * saying what is wrong. */
static int take_paths(void)
{
	char path[PATH_MAX];
	struct stat st;

	if (kv_image_is_url(image_arg)) {
		fs.cfg.image = strdup(image_arg); /* a database: no path to resolve */
	} else if (!realpath(image_arg, path)) {
		fprintf(stderr, "kvfs: cannot open '%s': %s\n", image_arg, strerror(errno));
		return 1;
	} else {
		fs.cfg.image = strdup(path);
	}
	if (!realpath(mnt_arg, path)) {
		fprintf(stderr, "kvfs: bad mountpoint '%s': %s\n", mnt_arg, strerror(errno));
		return 1;
	}
	if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "kvfs: mountpoint '%s' is not a directory\n", mnt_arg);
		return 1;
	}
	fs.cfg.mountpoint = strdup(path);
	return 0;
}

/* Returns the exit code to use now, or -1 to go on. */
static int parse_args(struct fuse_args *args, struct cli *c)
{
	uint64_t commit = 5;
	double timeout = 86400;
	unsigned max_write = 1 << 20, threads = 8;
	int rc, shared;

	fs.cfg.atime = FS_ATIME_RELATIME;
	fs.cfg.window_ms = FS_WINDOW_MS;
	if (fuse_opt_parse(args, c, cli_spec, cli_proc) != 0) {
		fprintf(stderr, "kvfs: see 'kvfs --help' for the options\n");
		return 2;
	}
	if (c->help) {
		usage(stdout);
		return 0;
	}
	if (c->version) {
		printf("kvfs %s, image format %d, libfuse %s\n", KVFS_VERSION, KV_FORMAT_VERSION,
		       fuse_pkgversion());
		return 0;
	}
	if (check_fuse_opts(args) != 0) {
		fprintf(stderr, "kvfs: bad mount options (see 'kvfs --help')\n");
		return 2;
	}
	if (c->nargs != 2) {
		fprintf(stderr, "kvfs: %s\n", c->nargs ? "no mountpoint given" : "no image given");
		usage(stderr);
		return 2;
	}
	if (parse_modes(c, &commit) != 0 || parse_limits(c, &timeout, &max_write, &threads) != 0)
		return 2;
	rc = take_paths();
	if (rc)
		return rc;
	/* a read-only mount may be a view of an image another mount writes
	 * (made before or after it): what the kernel caches, it holds for a
	 * second; cached pages and listings go when their file's mtime moves.
	 * So does a mount of a database other mounts write too, whose changes
	 * come as notices (fs_watch_others) that a lost one must not outlast */
	shared = kv_image_is_url(fs.cfg.image);
	fs.cfg.timeout = c->timeout || (!fs.cfg.readonly && !shared) ? timeout : FS_RO_TIMEOUT;
	/* with other mounts, a change in the window costs a round trip (its
	 * child's commit waits for the server) as a commit does, and close(2)
	 * commits the window anyway (file.c): each change committed before it
	 * is told is no slower there, and leaves nothing for the close to
	 * commit, no reader waiting for the writer's role, no lock held for a
	 * window (a create and close: 4 round trips instead of 5). A mount
	 * alone holds the store's lease and keeps the window as on an image
	 * file: its changes wait for no server (kv/window.c invariant 7;
	 * bench/pg_two.sh) */
	if (shared && !c->window) {
		fs.cfg.window_ms = 0;
		fs.cfg.alone_window_ms = FS_WINDOW_MS;
	}
	fs.cfg.max_write = max_write;
	fs.cfg.threads = threads;
	/* off by default: with it the kernel drops a file's block count at
	 * every close, so the next stat of a file read is a round trip, and the
	 * user's day measured faster without it (docs/BENCHMARKS.md) */
	fs.cfg.writeback = c->writeback && !c->nowriteback && !fs.cfg.readonly;
	/* close-to-open across mounts: each open reads what the store holds */
	fs.cfg.keep_cache = !c->nokeepcache && !shared;
	fs.cfg.skip_open = !c->noskipopen;
	fs.cfg.cache_dir = !c->nocachedir;
	fs.cfg.cache_symlinks = !c->nocachesymlinks;
	fs.cfg.readdirplus = !c->noreaddirplus;
	fs.cfg.io_uring = !c->noio_uring;
	fs.cfg.acl = !c->noacl;
	fs.cfg.commit_ms = (unsigned)(commit > 86400 ? 86400 : commit) * 1000;
	return -1;
}

static void cli_free(struct cli *c)
{
	free(c->durability);
	free(c->max_size);
	free(c->commit);
	free(c->window);
	free(c->timeout);
	free(c->max_write);
	free(c->threads);
	free(c->compress);
	free(image_arg);
	free(mnt_arg);
	image_arg = mnt_arg = NULL;
	memset(c, 0, sizeof(*c));
}

/* The defaults the command line (parsed into c) leaves to the image: those
 * of the options it does not give, into out (as long as defaults). */
static void defaults_left(const char *defaults, const struct cli *c, char *out)
{
	char *p = out;

	for (const char *d = defaults; *d;) {
		size_t n = strcspn(d, ",");
		int given = c->atime && (!strncmp(d, "noatime", n) || !strncmp(d, "relatime", n) ||
					 !strncmp(d, "strictatime", n));

		given |= c->acl_given && (!strncmp(d, "acl", n) || !strncmp(d, "noacl", n));
		given |= c->compress_given &&
			 (!strncmp(d, "compress", 8) || !strncmp(d, "nocompress", n));
		given |= (c->durability && !strncmp(d, "durability=", 11)) ||
			 (c->max_size && !strncmp(d, "max_size=", 9)) ||
			 (c->commit && !strncmp(d, "commit=", 7)) ||
			 (c->window && !strncmp(d, "window=", 7));
		if (!given) {
			if (p != out)
				*p++ = ',';
			memcpy(p, d, n);
			p += n;
		}
		d += n + (d[n] == ',');
	}
	*p = '\0';
}

/* The mount defaults the image holds (kvfs-tune -o) count where the
 * command line says nothing: the whole command line is parsed again with
 * them in front (only those it leaves, so no option comes twice). Returns
 * as parse_args. */
static int with_defaults(struct fuse_args *args, const struct fuse_args *orig, struct cli *c)
{
	static struct crash_report crashed;
	char defaults[KV_DEFAULTS_MAX + 1], left[KV_DEFAULTS_MAX + 1], err[256];
	char text[CRASH_REPORT_MAX];
	int rc;

	/* the first read of the image: a damaged page may crash LMDB here
	 * already, which must say so as a crash at mount does (main.c) */
	fs_crash_text(text, sizeof(text), 0);
	crash_report_fd(&crashed, STDERR_FILENO, "kvfs: %s\n", text);
	crash_guard_install(1);
	crash_guard_report(&crashed);
	rc = kv_defaults_peek(fs.cfg.image, defaults, sizeof(defaults));
	crash_guard_report(NULL);
	/* an image that cannot be read is open_store's to report */
	if (rc != 0 || !defaults[0])
		return -1;
	if (mount_defaults_check(defaults, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvfs: '%s': the mount defaults it holds are wrong: %s (kvfs-tune -o "
			"sets them)\n", fs.cfg.image, err);
		return 2;
	}
	defaults_left(defaults, c, left);
	if (!left[0])
		return -1;
	free((char *)fs.cfg.image);
	free((char *)fs.cfg.mountpoint);
	memset(&fs.cfg, 0, sizeof(fs.cfg));
	cli_free(c);
	fuse_opt_free_args(args);
	rc = fuse_opt_add_arg(args, orig->argv[0]) || fuse_opt_add_arg(args, "-o") ||
	     fuse_opt_add_arg(args, left);
	for (int i = 1; rc == 0 && i < orig->argc; i++)
		rc = fuse_opt_add_arg(args, orig->argv[i]);
	if (rc) {
		fprintf(stderr, "kvfs: out of memory\n");
		return 1;
	}
	return parse_args(args, c);
}

int fs_options_parse(struct fuse_args *args)
{
	struct fuse_args orig = FUSE_ARGS_INIT(0, NULL);
	struct cli c = {0};
	int rc = 0;

	for (int i = 0; rc == 0 && i < args->argc; i++)
		rc = fuse_opt_add_arg(&orig, args->argv[i]);
	rc = rc ? 1 : parse_args(args, &c);
	if (rc == -1)
		rc = with_defaults(args, &orig, &c);
	fuse_opt_free_args(&orig);
	cli_free(&c);
	return rc;
}
