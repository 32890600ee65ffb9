/*
 * crash.c - the one crash guard (common.h): the daemon's and the tools'.
 *
 * A report is prepared whole beforehand (its bytes, its destination), so
 * the handler only sends bytes and exits:
 *
 *   crash signal -> first thread?  no  -> pause until the first one's _exit
 *                        | yes
 *                        v
 *                   current report? -> write(2) to its fd, or sendto(2) to
 *                        |             the syslog socket
 *                        v
 *                   _exit(exit_code)
 *
 * Invariants:
 *  1. The handler calls only async-signal-safe functions (write, sendto,
 *     pause, _exit) and reads only lock-free atomics and prepared memory.
 *  2. The crash signals are blocked while the handler runs: a fault inside
 *     it gets the default action instead of recursing.
 *  3. A report is switched by publishing a pointer to another, never by
 *     rewriting the current one while a handler may be sending it.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include "common.h"

/* The length of a report formatted into buf of size cap by n (vsnprintf's
 * return), cut to fit. */
static size_t report_len(int n, size_t start, size_t cap)
{
	if (n < 0)
		return start;
	return start + (size_t)n < cap ? start + (size_t)n : cap - 1;
}

void crash_report_fd(struct crash_report *r, int fd, const char *fmt, ...)
{
	va_list ap;
	int n;

	memset(r, 0, sizeof(*r));
	r->fd = fd;
	va_start(ap, fmt);
	n = vsnprintf(r->buf, sizeof(r->buf), fmt, ap);
	va_end(ap);
	r->len = report_len(n, 0, sizeof(r->buf));
}

int crash_report_syslog(struct crash_report *r, const char *sock_path, int facility,
			const char *ident, const char *fmt, ...)
{
	va_list ap;
	int n;

	memset(r, 0, sizeof(*r));
	r->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (r->fd < 0)
		return -errno;
	r->dgram = 1;
	r->addr.sun_family = AF_UNIX;
	snprintf(r->addr.sun_path, sizeof(r->addr.sun_path), "%s", sock_path);
	n = snprintf(r->buf, sizeof(r->buf), "<%d>%s[%d]: ", facility | LOG_CRIT, ident,
		     (int)getpid());
	r->len = report_len(n, 0, sizeof(r->buf));
	va_start(ap, fmt);
	n = vsnprintf(r->buf + r->len, sizeof(r->buf) - r->len, fmt, ap);
	va_end(ap);
	r->len = report_len(n, r->len, sizeof(r->buf));
	return 0;
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(KVFS_NO_CRASH_GUARD)
static _Atomic(const struct crash_report *) current;
static volatile sig_atomic_t exit_code = 1;
static atomic_flag seen = ATOMIC_FLAG_INIT;

static void on_crash(int sig)
{
	const struct crash_report *r = atomic_load(&current);

	(void)sig;
	if (atomic_flag_test_and_set(&seen))
		for (;;)
			pause();
	if (r && r->dgram) {
		if (sendto(r->fd, r->buf, r->len, MSG_DONTWAIT, (const struct sockaddr *)&r->addr,
			   sizeof(r->addr)) < 0) {
			/* nothing more to do */
		}
	} else if (r) {
		if (write(r->fd, r->buf, r->len) < 0) {
			/* nothing more to do */
		}
	}
	_exit(exit_code);
}

void crash_guard_install(int code)
{
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE};
	struct sigaction sa = {.sa_handler = on_crash};

	exit_code = code;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

void crash_guard_report(const struct crash_report *r)
{
	atomic_store(&current, r);
}
#else
void crash_guard_install(int code)
{
	(void)code; /* a sanitizer build reports the crash itself */
}

void crash_guard_report(const struct crash_report *r)
{
	(void)r;
}
#endif
