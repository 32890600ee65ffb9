/*
 * main.c - the kvfs daemon's start and end: the command line (options.c),
 * daemonizing, the crash guard, opening the store, mounting, the signals
 * and a clean shutdown. The session (state, log, workers) is session.c.
 *
 *   kvfs IMAGE MOUNTPOINT [-f] [-d] [-o opt,...]
 *
 * Start-up runs in the process that stays (after the fork, unless -f), so
 * LMDB and every thread live where they were made; the parent waits for a
 * status line through a pipe and exits 0 once the filesystem is mounted, or
 * prints the child's message and exits 1.
 *
 * Invariants:
 *  1. SIGINT, SIGTERM and SIGHUP are taken by the main thread alone
 *     (sigwait): it unmounts, which ends the workers' reads; workers blocked
 *     on a busy lazily-unmounted mount are interrupted by SIGUSR2 (a no-op
 *     handler without SA_RESTART, session.c) and see the session has exited.
 *  2. The store is closed after every worker has been joined and the
 *     session's destroy (orphan purge) has run.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "common.h"
#include "fs.h"

static _Atomic int status_fd = -1; /* the waiting parent's pipe */

/* ------------------------------------------------------------ messages -- */

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

/* LMDB trusts its B-tree pages: a page damaged on disk can crash it inside
 * any request. Instead of a silent death (the mount then answers ENOTCONN)
 * the daemon says what happened (common.h's crash guard), where its
 * messages go at that moment: to the parent still waiting for the mount
 * (the status line, code 1), to stderr in the foreground, or to syslog
 * once detached. */
static struct crash_report crash_mounting[2]; /* [mounted]: before the status is sent */
static struct crash_report crash_detached;    /* after */

void fs_crash_text(char *buf, size_t len, int mounted)
{
	snprintf(buf, len,
		 "%s: crashed reading the image: it is damaged where the store cannot "
		 "check it; %s%s%srun fsck.kvfs on it, and restore it from a backup if fsck "
		 "cannot repair it (if fsck finds it sound, this is a bug)",
		 fs.cfg.image, mounted ? "unmount " : "", mounted ? fs.cfg.mountpoint : "",
		 mounted ? ", then " : "");
}

static void crash_guard(void)
{
	static char text[2][CRASH_REPORT_MAX];

	for (int m = 0; m < 2; m++) {
		fs_crash_text(text[m], sizeof(text[m]), m);
		if (status_fd >= 0)
			crash_report_fd(&crash_mounting[m], status_fd, "\1%s", text[m]);
		else
			crash_report_fd(&crash_mounting[m], STDERR_FILENO, "kvfs: %s\n", text[m]);
	}
	/* detached, stderr is /dev/null: without a socket nothing is said */
	if (!fs.cfg.foreground &&
	    crash_report_syslog(&crash_detached, "/dev/log", LOG_DAEMON, "kvfs", "%s", text[1]))
		crash_report_fd(&crash_detached, STDERR_FILENO, "kvfs: %s\n", text[1]);
	crash_guard_install(1);
	crash_guard_report(&crash_mounting[0]);
}

static void crash_guard_mounted(void)
{
	crash_guard_report(&crash_mounting[1]);
}

/* ------------------------------------------------------------ start-up -- */

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
		.window_ms = fs.cfg.window_ms,
		.alone_window_ms = fs.cfg.alone_window_ms,
		.mount = 1,
	};
	char err[512];
	int rc;

	rc = kv_open(fs.cfg.image, &o, &fs.env, err, sizeof(err));
	if (rc)
		die_status(1, "%s", err);
	fs.block_size = kv_block_size(fs.env);
	kv_set_compress(fs.env, fs.cfg.compress);
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
	crash_guard_report(&crash_detached);
	if (write(fd, "", 1) != 1) {
	}
	close(fd);
	fs_log_to_syslog();
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

/* ---------------------------------------------------------------- main -- */

/* Block the signals the main thread takes with sigwait (invariant 1). */
static void block_signals(sigset_t *sigs)
{
	sigemptyset(sigs);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGTERM);
	sigaddset(sigs, SIGHUP);
	sigaddset(sigs, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static void mount_session(struct fuse_args *args)
{
	char opt[PATH_MAX + 64], *fsname = NULL;

	fuse_opt_add_arg(args, "-odefault_permissions");
	/* escaped: an image path may hold commas (and backslashes) */
	snprintf(opt, sizeof(opt), "fsname=%s", fs.cfg.image);
	if (fuse_opt_add_opt_escaped(&fsname, opt) != 0 || fuse_opt_add_arg(args, "-o") != 0 ||
	    fuse_opt_add_arg(args, fsname) != 0) {
		free(fsname);
		kv_close(fs.env);
		die_status(1, "out of memory");
	}
	free(fsname);
	fuse_opt_add_arg(args, "-osubtype=kvfs");
	/* libfuse's own option: a ring per CPU once the kernel's INIT offers
	 * it (fs_op_init says which transport serves the mount) */
	if (fs.cfg.io_uring && fs_uring_built())
		fuse_opt_add_arg(args, "-oio_uring");
	fs.se = fuse_session_new(args, &fs_ops, sizeof(fs_ops), NULL);
	if (!fs.se) {
		kv_close(fs.env);
		die_status(2, "bad mount options (see kvfs --help)");
	}
	if (fuse_session_mount(fs.se, fs.cfg.mountpoint) != 0) {
		fuse_session_destroy(fs.se);
		kv_close(fs.env);
		die_status(1, "cannot mount on '%s'", fs.cfg.mountpoint);
	}
}

/* The signal that ends the mount: a user's, or SIGUSR1 from the last worker
 * once the session exited (the kernel unmounted it). */
static int wait_signal(const sigset_t *sigs)
{
	int sig;

	for (;;) {
		if (sigwait(sigs, &sig) != 0)
			continue;
		if (sig == SIGUSR1 && !fuse_session_exited(fs.se))
			continue;
		return sig;
	}
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	sigset_t sigs;
	int rc, sig;

	rc = fs_options_parse(&args);
	if (rc >= 0) {
		fuse_opt_free_args(&args);
		return rc;
	}
	if (!fs.cfg.foreground)
		daemonize();
	kv_set_log(fs_log_line);
	block_signals(&sigs);

	if (fs_itable_init())
		die_status(1, "out of memory");
	crash_guard();
	open_store();
	mount_session(&args);
	crash_guard_mounted();
	rc = fs_watch_others();
	if (rc)
		fs_log("%s: cannot hear the other mounts' changes (%s): what this one caches of "
		       "them holds up to %g s", fs.cfg.image, strerror(-rc), fs.cfg.timeout);
	if (fs_defer_start() || fs_workers_start())
		die_status(1, "out of memory");
	report_ready();

	sig = wait_signal(&sigs);
	if (sig != SIGUSR1)
		fs_log("%s: signal %d, unmounting", fs.cfg.image, sig);
	fuse_session_exit(fs.se);
	fuse_session_unmount(fs.se);
	if (kv_is_shared(fs.env))
		kv_watch(fs.env, NULL, NULL); /* no notice to the session from now on */
	fs_workers_stop();
	fs_defer_stop();
	fuse_session_destroy(fs.se); /* runs destroy: frees the orphans */
	kv_close(fs.env);
	fuse_opt_free_args(&args);
	free((char *)fs.cfg.image);
	free((char *)fs.cfg.mountpoint);
	return 0;
}
