/*
 * main.c - the kvfs daemon: options, mounting, the worker threads and a
 * clean shutdown.
 *
 *   kvfs IMAGE MOUNTPOINT [-f] [-d] [-o opt,...]
 *
 * Start-up runs in the process that stays (after the fork, unless -f), so
 * LMDB and every thread live where they were made; the parent waits for a
 * status line through a pipe and exits 0 once the filesystem is mounted, or
 * prints the child's message and exits 1.
 *
 * Invariants:
 *  1. A fixed pool of worker threads each loops receive -> process; their
 *     read transactions live as long as they do (no thread churn).
 *  2. SIGINT, SIGTERM and SIGHUP are taken by the main thread alone
 *     (sigwait): it unmounts, which ends the workers' reads; workers blocked
 *     on a busy lazily-unmounted mount are interrupted by SIGUSR2 (a no-op
 *     handler without SA_RESTART) and see the session has exited.
 *  3. The store is closed after every worker has been joined and the
 *     session's destroy (orphan purge) has run.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"

struct fs fs;

static __thread uint64_t cur_unique;
static pthread_t main_thread;
static _Atomic int status_fd = -1; /* the waiting parent's pipe */

uint64_t fs_req_unique(void)
{
	return cur_unique;
}

static const struct fuse_lowlevel_ops ops = {
	.init = fs_op_init,
	.destroy = fs_op_destroy,
	.lookup = fs_op_lookup,
	.forget = fs_op_forget,
	.forget_multi = fs_op_forget_multi,
	.getattr = fs_op_getattr,
	.setattr = fs_op_setattr,
	.readlink = fs_op_readlink,
	.mknod = fs_op_mknod,
	.mkdir = fs_op_mkdir,
	.unlink = fs_op_unlink,
	.rmdir = fs_op_rmdir,
	.symlink = fs_op_symlink,
	.rename = fs_op_rename,
	.link = fs_op_link,
	.open = fs_op_open,
	.read = fs_op_read,
	.write = fs_op_write,
	.flush = fs_op_flush,
	.release = fs_op_release,
	.fsync = fs_op_fsync,
	.opendir = fs_op_opendir,
	.readdir = fs_op_readdir,
	.readdirplus = fs_op_readdirplus,
	.releasedir = fs_op_releasedir,
	.fsyncdir = fs_op_fsyncdir,
	.statfs = fs_op_statfs,
	.setxattr = fs_op_setxattr,
	.getxattr = fs_op_getxattr,
	.listxattr = fs_op_listxattr,
	.removexattr = fs_op_removexattr,
	.create = fs_op_create,
	.fallocate = fs_op_fallocate,
	.lseek = fs_op_lseek,
};

/* ------------------------------------------------------------ messages -- */

static int use_syslog;

/* Every line names the image, so a log shared by several mounts says which. */
static void log_line(const char *line)
{
	const char *img = fs.cfg.image ? fs.cfg.image : "";
	const char *sep = fs.cfg.image ? ": " : "";

	if (strncmp(line, img, strlen(img)) == 0) /* the line names it already */
		img = sep = "";
	if (use_syslog)
		syslog(LOG_ERR, "%s%s%s", img, sep, line);
	else
		fprintf(stderr, "kvfs: %s%s%s\n", img, sep, line);
}

void fs_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_line(line);
}

static void die_status(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Report a start-up failure (to the waiting parent, or stderr) and exit. */
static void die_status(int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	msg[0] = (char)code; /* the status line: exit code, then the message */
	vsnprintf(msg + 1, sizeof(msg) - 1, fmt, ap);
	va_end(ap);
	if (status_fd >= 0) {
		if (write(status_fd, msg, strlen(msg + 1) + 1) < 0) {
		}
	} else {
		fprintf(stderr, "kvfs: %s\n", msg + 1);
	}
	exit(code);
}

/* --------------------------------------------------------- crash guard -- */

#if !defined(__SANITIZE_ADDRESS__) && !defined(KVFS_NO_CRASH_GUARD)
/* LMDB trusts its B-tree pages: a page damaged on disk can crash it inside
 * any request. Instead of a silent death (the mount then answers ENOTCONN)
 * the daemon says what happened, where its messages go: to the parent
 * still waiting for the mount, to stderr in the foreground, or to syslog
 * through a socket made beforehand (syslog(3) is not safe in a handler;
 * sent to /dev/log at the time, so a restarted syslog daemon still gets
 * it). The first faulting thread speaks; any other waits for its _exit. */
struct crash_msg {
	char buf[2 * PATH_MAX + 512]; /* "<26>kvfs[pid]: " + the text */
	size_t text, len;             /* where the text starts; the whole length */
};
static struct crash_msg crash_msgs[2]; /* before and after the mount */
static volatile sig_atomic_t crash_mounted;
static atomic_flag crash_seen = ATOMIC_FLAG_INIT;
static int crash_log = -1;

static void on_crash(int sig)
{
	static const struct sockaddr_un log_addr = {.sun_family = AF_UNIX, .sun_path = "/dev/log"};
	const struct crash_msg *m = &crash_msgs[crash_mounted];
	const char *text = m->buf + m->text;
	size_t len = m->len - m->text;
	int fd;

	(void)sig;
	if (atomic_flag_test_and_set(&crash_seen))
		for (;;)
			pause();
	fd = atomic_load(&status_fd);
	if (fd >= 0) { /* still mounting: the status line, code 1 */
		if (write(fd, "\1", 1) < 0 || write(fd, text, len) < 0) {
		}
	} else if (crash_log >= 0) {
		if (sendto(crash_log, m->buf, m->len, MSG_DONTWAIT, (const struct sockaddr *)&log_addr,
			   sizeof(log_addr)) < 0) {
		}
	} else {
		if (write(STDERR_FILENO, "kvfs: ", 6) < 0 || write(STDERR_FILENO, text, len) < 0 ||
		    write(STDERR_FILENO, "\n", 1) < 0) {
		}
	}
	_exit(1);
}

static void crash_msg_make(struct crash_msg *m, const char *unmount)
{
	int n = snprintf(m->buf, sizeof(m->buf), "<%d>kvfs[%d]: ", LOG_DAEMON | LOG_CRIT,
			 (int)getpid());

	m->text = (size_t)n;
	n = snprintf(m->buf + m->text, sizeof(m->buf) - m->text,
		     "%s: crashed reading the image: it is damaged where the store cannot "
		     "check it; %s%srun fsck.kvfs on it, and restore it from a backup if fsck "
		     "cannot repair it (if fsck finds it sound, this is a bug)",
		     fs.cfg.image, unmount ? unmount : "", unmount ? ", then " : "");
	m->len = n < 0 ? m->text
		 : m->text + (size_t)n < sizeof(m->buf) ? m->text + (size_t)n : sizeof(m->buf) - 1;
}

static void crash_guard(void)
{
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE};
	struct sigaction sa = {.sa_handler = on_crash};
	char unmount[PATH_MAX + 32];

	snprintf(unmount, sizeof(unmount), "unmount %s", fs.cfg.mountpoint);
	crash_msg_make(&crash_msgs[0], NULL);
	crash_msg_make(&crash_msgs[1], unmount);
	if (!fs.cfg.foreground)
		crash_log = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	/* a fault inside the handler is blocked there: the default action */
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

static void crash_guard_mounted(void)
{
	crash_mounted = 1;
}
#else
static void crash_guard(void)
{
	/* a sanitizer build reports the crash itself */
}

static void crash_guard_mounted(void)
{
}
#endif

/* ------------------------------------------------------------- options -- */

struct cli {
	char *durability;
	char *max_size;
	char *commit;
	char *timeout, *max_write, *threads; /* checked here: each error its own */
	int nowriteback, nokeepcache, noskipopen, nocachedir, nocachesymlinks, noreaddirplus;
	int help, version;
	int nargs;
};

enum { KEY_HELP, KEY_VERSION, KEY_FG, KEY_DEBUG, KEY_RO, KEY_NOATIME, KEY_RELATIME,
       KEY_STRICTATIME };

#define OPT(t, f) {t, offsetof(struct cli, f), 1}

#define FS_RO_TIMEOUT 1.0 /* seconds: the cache timeout of a read-only mount */

static const struct fuse_opt cli_spec[] = {
	{"durability=%s", offsetof(struct cli, durability), 0},
	{"max_size=%s", offsetof(struct cli, max_size), 0},
	{"commit=%s", offsetof(struct cli, commit), 0},
	{"timeout=%s", offsetof(struct cli, timeout), 0},
	{"max_write=%s", offsetof(struct cli, max_write), 0},
	{"threads=%s", offsetof(struct cli, threads), 0},
	OPT("nowriteback", nowriteback),
	OPT("nokeepcache", nokeepcache),
	OPT("noskipopen", noskipopen),
	OPT("nocachedir", nocachedir),
	OPT("nocachesymlinks", nocachesymlinks),
	OPT("noreaddirplus", noreaddirplus),
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
		return 1;
	/* the kernel updates no atime on a FUSE inode: kvfs does it all, and
	 * libfuse refuses these two as mount options */
	case KEY_RELATIME:
		fs.cfg.atime = FS_ATIME_RELATIME;
		return 0;
	case KEY_STRICTATIME:
		fs.cfg.atime = FS_ATIME_STRICT;
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
"Mount the kvfs image IMAGE (made by mkfs.kvfs) on MOUNTPOINT.\n"
"\n"
"  -f                     stay in the foreground\n"
"  -d, -o debug           foreground, and print every request\n"
"  -h, --help             show this help\n"
"  -V, --version          show the version\n"
"\n"
"kvfs options:\n"
"  -o durability=MODE     full: every change is durable when its call returns\n"
"                         fsync (default): the image stays consistent across\n"
"                           power loss; fsync(2), fdatasync(2) and the commit\n"
"                           interval make changes durable\n"
"                         none: fastest, for scratch data: safe against a killed\n"
"                           daemon, not against an OS crash or power loss\n"
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
"  -o allow_other         let other users use the mount\n"
"  -o timeout=SECONDS     how long the kernel may cache names and attributes\n"
"                         (default 86400; kvfs is the image's only writer; 1\n"
"                         with ro, to follow a read-write mount of the image)\n"
"  -o max_write=BYTES     largest write request, 64K to 1M (default 1M)\n"
"  -o threads=N           request worker threads (default 8)\n"
"  -o nowriteback         no kernel writeback cache: each write goes to kvfs\n"
"  -o nokeepcache         drop the page cache of a file when it is opened\n"
"  -o noskipopen          send OPEN and OPENDIR to kvfs (default: skipped)\n"
"  -o nocachedir          do not let the kernel cache directory listings\n"
"  -o nocachesymlinks     do not let the kernel cache symlink targets\n"
"  -o noreaddirplus       list directories without attributes\n"
"Other -o options are libfuse's (fsname, subtype, default_permissions, ...).\n");
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
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
	se = fuse_session_new(&copy, &ops, sizeof(ops), NULL);
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
		if (parse_size(c->max_write, &v) || v < KV_XATTR_SIZE_MAX || v > (1 << 20)) {
			fprintf(stderr, "kvfs: max_write must be %d to %d bytes (64K to 1M), not "
					"'%s'\n", KV_XATTR_SIZE_MAX, 1 << 20, c->max_write);
			return -1;
		}
		*max_write = (unsigned)v;
	}
	if (c->threads) {
		if (parse_size(c->threads, &v) || v < 1 || v > 256) {
			fprintf(stderr, "kvfs: threads must be a number from 1 to 256, not '%s'\n",
				c->threads);
			return -1;
		}
		*threads = (unsigned)v;
	}
	return 0;
}

/* Returns the exit code to use now, or -1 to go on. */
static int parse_args(struct fuse_args *args, struct cli *c)
{
	char path[PATH_MAX];
	uint64_t commit = 5;
	double timeout = 86400;
	unsigned max_write = 1 << 20, threads = 8;

	fs.cfg.atime = FS_ATIME_RELATIME;
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
	if (c->max_size && (parse_size(c->max_size, &fs.cfg.max_size) || fs.cfg.max_size < (1 << 20))) {
		fprintf(stderr, "kvfs: max_size '%s' is not a size of 1M or more\n", c->max_size);
		return 2;
	}
	if (c->commit && parse_size(c->commit, &commit)) {
		fprintf(stderr, "kvfs: commit '%s' is not a number of seconds\n", c->commit);
		return 2;
	}
	if (parse_limits(c, &timeout, &max_write, &threads) != 0)
		return 2;
	if (!realpath(image_arg, path)) {
		fprintf(stderr, "kvfs: cannot open '%s': %s\n", image_arg, strerror(errno));
		return 1;
	}
	fs.cfg.image = strdup(path);
	/* absolute: the daemon leaves its working directory, and unmounts by name */
	if (!realpath(mnt_arg, path)) {
		fprintf(stderr, "kvfs: bad mountpoint '%s': %s\n", mnt_arg, strerror(errno));
		return 1;
	}
	{
		struct stat st;
		if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
			fprintf(stderr, "kvfs: mountpoint '%s' is not a directory\n", mnt_arg);
			return 1;
		}
	}
	fs.cfg.mountpoint = strdup(path);
	/* a read-only mount may be a view of an image another mount writes
	 * (made before or after it): what the kernel caches, it holds for a
	 * second; cached pages and listings go when their file's mtime moves */
	fs.cfg.timeout = c->timeout || !fs.cfg.readonly ? timeout : FS_RO_TIMEOUT;
	fs.cfg.max_write = max_write;
	fs.cfg.threads = threads;
	fs.cfg.writeback = !c->nowriteback && !fs.cfg.readonly;
	fs.cfg.keep_cache = !c->nokeepcache;
	fs.cfg.skip_open = !c->noskipopen;
	fs.cfg.cache_dir = !c->nocachedir;
	fs.cfg.cache_symlinks = !c->nocachesymlinks;
	fs.cfg.readdirplus = !c->noreaddirplus;
	fs.cfg.commit_ms = (unsigned)(commit > 86400 ? 86400 : commit) * 1000;
	return -1;
}

/* ------------------------------------------------------------- workers -- */

/* how many workers have left their loop; the main thread waits on the
 * condition for the last one */
static unsigned workers_done;
static pthread_mutex_t workers_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t workers_cond = PTHREAD_COND_INITIALIZER;

static void on_wake(int sig)
{
	(void)sig; /* only interrupts a blocked read */
}

static void *worker(void *arg)
{
	struct fuse_buf buf = {.mem = NULL};
	int res;

	(void)arg;
	while (!fuse_session_exited(fs.se)) {
		res = fuse_session_receive_buf(fs.se, &buf);
		if (res == -EINTR)
			continue;
		if (res <= 0)
			break;
		if ((size_t)res >= sizeof(struct fuse_in_header))
			cur_unique = ((const struct fuse_in_header *)buf.mem)->unique;
		fuse_session_process_buf(fs.se, &buf);
	}
	free(buf.mem);
	fuse_session_exit(fs.se);
	pthread_mutex_lock(&workers_lock);
	if (++workers_done == fs.cfg.threads)
		pthread_cond_signal(&workers_cond);
	pthread_mutex_unlock(&workers_lock);
	pthread_kill(main_thread, SIGUSR1); /* wake the main thread's sigwait */
	return NULL;
}

/* Wait until every worker has left its loop. When the kernel detaches the
 * mount, each blocked read ends (ENODEV) and this returns as soon as the
 * last worker does. A lazily unmounted busy mount leaves workers blocked on
 * a read: SIGUSR2 (no SA_RESTART) interrupts them and they see the session
 * has exited. A worker about to block when the signal came misses it, so
 * the signal is sent again while some still run; the wait itself ends on
 * the last worker's exit, never on the timer. */
static void workers_wait(pthread_t *tids)
{
	struct timespec ts;

	pthread_mutex_lock(&workers_lock);
	while (workers_done < fs.cfg.threads) {
		for (unsigned i = 0; i < fs.cfg.threads; i++)
			pthread_kill(tids[i], SIGUSR2); /* valid until joined */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&workers_cond, &workers_lock, &ts);
	}
	pthread_mutex_unlock(&workers_lock);
}

/* ---------------------------------------------------------------- main -- */

/* Whoever can read the image reads every file in it, whatever the files'
 * own permissions say (kvfs-dump export needs no mount); whoever can write
 * it can change them all. */
static void warn_mode(void)
{
	static const char *const is[] = {"", "writable", "readable", "readable and writable"};
	static const char *const can[] = {"", "change", "read", "read and change"};
	struct stat st;
	int who;

	if (stat(fs.cfg.image, &st) != 0 || !(st.st_mode & 066))
		return;
	who = (st.st_mode & 044 ? 2 : 0) | (st.st_mode & 022 ? 1 : 0);
	fs_log("the image is %s by other users (mode %04o): they can %s every file in it, "
	       "whatever its permissions; chmod 600 it to keep them out",
	       is[who], (unsigned)(st.st_mode & 07777), can[who]);
}

static int open_store(void)
{
	struct kv_open_opts o = {
		.readonly = fs.cfg.readonly,
		.durability = fs.cfg.durability,
		.max_size = fs.cfg.max_size,
		.sync_interval_ms = fs.cfg.commit_ms,
	};
	char err[512];
	int rc;

	rc = kv_open(fs.cfg.image, &o, &fs.env, err, sizeof(err));
	if (rc)
		die_status(1, "%s", err);
	fs.block_size = kv_block_size(fs.env);
	warn_mode();
	rc = fs_purge_orphans();
	if (rc > 0)
		fs_log("%s: freed %d orphaned inodes left by an earlier run", fs.cfg.image, rc);
	return 0;
}

/* Fork; the parent waits for the child's status and exits with it. */
static void daemonize(void)
{
	int fds[2];
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) != 0) {
		perror("kvfs: pipe");
		exit(1);
	}
	pid = fork();
	if (pid < 0) {
		perror("kvfs: fork");
		exit(1);
	}
	if (pid > 0) {
		char msg[1025];
		ssize_t n = 0, r;
		close(fds[1]);
		while (n < (ssize_t)sizeof(msg) - 1 &&
		       (r = read(fds[0], msg + n, sizeof(msg) - 1 - (size_t)n)) > 0)
			n += r;
		if (n <= 0) {
			fprintf(stderr, "kvfs: the daemon died while mounting\n");
			_exit(1);
		}
		msg[n] = '\0';
		if (msg[0] != 0)
			fprintf(stderr, "kvfs: %s\n", msg + 1);
		_exit((unsigned char)msg[0]);
	}
	close(fds[0]);
	status_fd = fds[1];
	setsid();
}

static void report_ready(void)
{
	/* taken first: a crash from here on goes to syslog, never to a
	 * closed (or reused) descriptor */
	int fd = atomic_exchange(&status_fd, -1);

	if (fd < 0)
		return;
	if (write(fd, "", 1) != 1) {
	}
	close(fd);
	openlog("kvfs", LOG_PID, LOG_DAEMON);
	use_syslog = 1;
	if (chdir("/") != 0) {
	}
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct cli c = {0};
	pthread_t *tids;
	sigset_t sigs;
	char opt[PATH_MAX + 64];
	int rc, sig;

	rc = parse_args(&args, &c);
	free(c.durability);
	free(c.max_size);
	free(c.commit);
	free(c.timeout);
	free(c.max_write);
	free(c.threads);
	free(image_arg);
	free(mnt_arg);
	if (rc >= 0) {
		fuse_opt_free_args(&args);
		return rc;
	}
	if (!fs.cfg.foreground)
		daemonize();
	kv_set_log(log_line);

	/* signals go to the main thread's sigwait alone */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigaction(SIGUSR2, &(struct sigaction){.sa_handler = on_wake}, NULL);
	main_thread = pthread_self();

	if (fs_itable_init())
		die_status(1, "out of memory");
	crash_guard();
	open_store();
	fuse_opt_add_arg(&args, "-odefault_permissions");
	snprintf(opt, sizeof(opt), "-ofsname=%s", fs.cfg.image);
	fuse_opt_add_arg(&args, opt);
	fuse_opt_add_arg(&args, "-osubtype=kvfs");
	fs.se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!fs.se) {
		kv_close(fs.env);
		die_status(2, "bad mount options (see kvfs --help)");
	}
	if (fuse_session_mount(fs.se, fs.cfg.mountpoint) != 0) {
		fuse_session_destroy(fs.se);
		kv_close(fs.env);
		die_status(1, "cannot mount on '%s'", fs.cfg.mountpoint);
	}
	crash_guard_mounted();
	tids = calloc(fs.cfg.threads, sizeof(*tids));
	if (!tids)
		die_status(1, "out of memory");
	for (unsigned i = 0; i < fs.cfg.threads; i++)
		pthread_create(&tids[i], NULL, worker, NULL);
	report_ready();

	for (;;) {
		if (sigwait(&sigs, &sig) != 0)
			continue;
		if (sig == SIGUSR1 && !fuse_session_exited(fs.se))
			continue;
		break;
	}
	if (sig != SIGUSR1)
		fs_log("%s: signal %d, unmounting", fs.cfg.image, sig);
	fuse_session_exit(fs.se);
	fuse_session_unmount(fs.se);
	workers_wait(tids);
	for (unsigned i = 0; i < fs.cfg.threads; i++)
		pthread_join(tids[i], NULL);
	free(tids);
	fuse_session_destroy(fs.se); /* runs destroy: frees the orphans */
	kv_close(fs.env);
	fuse_opt_free_args(&args);
	free((char *)fs.cfg.image);
	free((char *)fs.cfg.mountpoint);
	return 0;
}
