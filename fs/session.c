/*
 * session.c - the daemon's session: its state (struct fs), its log, the
 * table of request handlers, the session's init and destroy, and the worker
 * threads that receive and process requests.
 *
 * Requests come through /dev/fuse to the workers, or, where the mount is
 * served over io_uring (-o io_uring, libfuse 3.18), through libfuse's ring
 * threads, one per CPU, which call the same handlers (the workers then
 * serve only what the kernel still sends through /dev/fuse). Work a ring
 * thread must not wait for goes to defer.c.
 *
 * Invariants:
 *  1. A fixed pool of worker threads each loops receive -> process; their
 *     read transactions live as long as they do (no thread churn).
 *  2. While a worker processes a request, fs_req_unique() is that request's
 *     id (file.c writes a read's reply header itself; never for a request
 *     of a ring, whose reply goes into its ring entry).
 *  3. Nothing the cores call needs a session: with fs.se NULL (the unit
 *     tests of the cores) notifications to the kernel are skipped.
 *  4. A thread holds no read transaction when it waits on the writer, nor
 *     across requests (fs.h: fs_read_begin and the others; asserted in a
 *     debug build).
 */
#include <assert.h>
#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "common.h"
#include "fs.h"

struct fs fs;

static __thread uint64_t cur_unique;

uint64_t fs_req_unique(void)
{
	return cur_unique;
}

const struct fuse_lowlevel_ops fs_ops = {
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
	.releasedir = fs_op_release,
	.fsyncdir = fs_op_fsync,
	.statfs = fs_op_statfs,
	.setxattr = fs_op_setxattr,
	.getxattr = fs_op_getxattr,
	.listxattr = fs_op_listxattr,
	.removexattr = fs_op_removexattr,
	.create = fs_op_create,
	.fallocate = fs_op_fallocate,
	.copy_file_range = fs_op_copy_file_range,
	.lseek = fs_op_lseek,
	.ioctl = fs_op_ioctl,
};

/* ------------------------------------------------------------ messages -- */

static int use_syslog;

/* Every line names the image (common.h's message line), so a log shared by
 * several mounts says which. */
static void log_v(int to_syslog, int prio, const char *fmt, va_list ap)
{
	char line[1024];

	if (to_syslog) {
		msg_vformat(line, sizeof(line), fs.cfg.image, fmt, ap);
		syslog(prio, "%s", line);
	} else {
		msg_vprint(stderr, "kvfs", fs.cfg.image, fmt, ap);
	}
}

void fs_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_v(use_syslog, LOG_ERR, fmt, ap);
	va_end(ap);
}

/* News, not trouble: never on the terminal of the command that mounts (a
 * daemon not yet detached sends it to syslog already). */
static void log_info(const char *fmt, ...)
{
	va_list ap;

	if (!fs.cfg.foreground)
		openlog("kvfs", LOG_PID, LOG_DAEMON); /* as fs_log_to_syslog */
	va_start(ap, fmt);
	log_v(!fs.cfg.foreground, LOG_INFO, fmt, ap);
	va_end(ap);
}

/* The store's messages (kv_set_log). */
void fs_log_line(const char *line)
{
	fs_log("%s", line);
}

void fs_log_to_syslog(void)
{
	openlog("kvfs", LOG_PID, LOG_DAEMON);
	use_syslog = 1;
}

#ifndef NDEBUG
__thread int fs_reading; /* invariant 4: this thread's read transactions */
#endif

/* -------------------------------------------------------------- kernel -- */

void fs_notify_inval(uint64_t ino, int64_t off, int64_t len)
{
	if (fs.se) /* invariant 3 */
		fuse_lowlevel_notify_inval_inode(fs.se, ino, off, len);
}

void fs_notify_inval_entry(uint64_t parent, const char *name, size_t len)
{
	if (fs.se) /* invariant 3 */
		fuse_lowlevel_notify_inval_entry(fs.se, parent, name, len);
}

/* Another mount of the store changed ino (name NULL) or a name in
 * directory ino: what the kernel caches of it goes (kv_watch's thread). */
static void other_changed(void *arg, uint64_t ino, const char *name, size_t len)
{
	(void)arg;
	if (name) {
		fs_notify_inval_entry(ino, name, len);
	} else {
		fs_itable_xattr_changing(ino); /* its xattrs may have: no "none" kept */
		fs_notify_inval(ino, 0, 0); /* attributes and every cached page */
	}
}

int fs_watch_others(void)
{
	return kv_is_shared(fs.env) ? kv_watch(fs.env, other_changed, NULL) : 0;
}

void fs_caller(fuse_req_t req, int need_groups, struct fs_cred *c, gid_t *groups)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	int n = 0;

	if (need_groups && ctx->uid != 0) { /* root's groups never matter */
		n = fuse_req_getgroups(req, NGROUPS_KEEP, groups);
		n = n < 0 ? 0 : (n > NGROUPS_KEEP ? NGROUPS_KEEP : n);
	}
	*c = (struct fs_cred){.uid = ctx->uid, .gid = ctx->gid, .ngroups = n, .groups = groups,
			      .umask = ctx->umask};
}

/* ------------------------------------------------------------- session -- */

int fs_uring_built(void)
{
	return FUSE_VERSION >= FUSE_MAKE_VERSION(3, 18);
}

/* The transport the kernel's INIT settles, and why, in the log: a user
 * who expects io_uring can see what it needs. */
static void log_transport(struct fuse_conn_info *conn)
{
	const char *why;

	(void)conn;
	if (!fs_uring_built()) {
		log_info("%s: requests over /dev/fuse: this kvfs is built with libfuse %s, which "
		       "has no io_uring (3.18 and later have)", fs.cfg.image, fuse_pkgversion());
		return;
	}
	if (!fs.cfg.io_uring)
		why = "-o noio_uring";
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 18)
	else if (conn->capable_ext & FUSE_CAP_OVER_IO_URING) {
		log_info("%s: requests over io_uring, a ring per CPU", fs.cfg.image);
		return;
	}
#endif
	else
		why = "the kernel offers no io_uring (as root: echo Y > "
		      "/sys/module/fuse/parameters/enable_uring)";
	log_info("%s: requests over /dev/fuse: %s", fs.cfg.image, why);
}

int fs_req_uring(fuse_req_t req)
{
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 18)
	return fuse_req_is_uring(req);
#else
	(void)req;
	return 0;
#endif
}


void fs_op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	if (fs.cfg.writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/* what the kernel will do, not what was asked for (setattr and lseek
	 * act on it) */
	fs.cfg.writeback = !!(conn->want & FUSE_CAP_WRITEBACK_CACHE);
	if (fs.cfg.cache_symlinks && (conn->capable & FUSE_CAP_CACHE_SYMLINKS))
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	if (!fs.cfg.readdirplus)
		conn->want &= ~(FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO);
	/* on a store on a server a listing's attributes come 32 entries a
	 * round trip (dir.c), a lookup after a plain listing takes two: each
	 * listing gives them, not the first alone (auto) */
	else if (kv_is_shared(fs.env))
		conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	/* O_TRUNC arrives as a SETATTR of size 0: with atomic_o_trunc the
	 * kernel leaves the truncation to OPEN, which skip_open never sends
	 * and fs_op_open would not do, and the old bytes stayed in the store */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	/* POSIX ACLs: the kernel enforces them; with DONT_MASK it leaves the
	 * umask to kvfs, which must not apply it under a default ACL (dir.c,
	 * create_acl). Without the kernel's part kvfs keeps none. */
	if (fs.cfg.acl && (conn->capable & FUSE_CAP_POSIX_ACL))
		conn->want |= FUSE_CAP_POSIX_ACL | (conn->capable & FUSE_CAP_DONT_MASK);
	fs.cfg.acl = !!(conn->want & FUSE_CAP_POSIX_ACL);
	conn->max_write = fs.cfg.max_write;
	if (conn->max_readahead > (1u << 20))
		conn->max_readahead = 1u << 20;
	conn->time_gran = 1;
	log_transport(conn);
}

void fs_op_destroy(void *userdata)
{
	(void)userdata;
	/* the kernel has let go of everything: free the orphans now */
	fs_purge_orphans();
}

/* ------------------------------------------------------------- workers -- */

static pthread_t main_thread;
static pthread_t *tids;

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
		assert(fs_reading == 0); /* invariant 4 */
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

int fs_workers_start(void)
{
	/* SIGUSR2 (no SA_RESTART) interrupts a worker's blocked read */
	sigaction(SIGUSR2, &(struct sigaction){.sa_handler = on_wake}, NULL);
	main_thread = pthread_self();
	tids = calloc(fs.cfg.threads, sizeof(*tids));
	if (!tids)
		return -ENOMEM;
	for (unsigned i = 0; i < fs.cfg.threads; i++)
		pthread_create(&tids[i], NULL, worker, NULL);
	return 0;
}

/* Wait until every worker has left its loop. When the kernel detaches the
 * mount, each blocked read ends (ENODEV) and this returns as soon as the
 * last worker does. A lazily unmounted busy mount leaves workers blocked on
 * a read: SIGUSR2 (no SA_RESTART) interrupts them and they see the session
 * has exited. A worker about to block when the signal came misses it, so
 * the signal is sent again while some still run; the wait itself ends on
 * the last worker's exit, never on the timer. */
static void workers_wait(void)
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

void fs_workers_stop(void)
{
	workers_wait();
	for (unsigned i = 0; i < fs.cfg.threads; i++)
		pthread_join(tids[i], NULL);
	free(tids);
	tids = NULL;
}
