/*
 * common.h - the small library below the daemon and the tools: what both
 * need and neither may take from the other (the daemon may not use tools/,
 * the tools have no FUSE). No LMDB, no FUSE, no kv/: anything here links
 * into any program of the project.
 *
 *   size.c   the one parser of sizes ("4K", "1GiB") for options
 *   msg.c    the one formatter of message lines ("PROG: SUBJECT: TEXT")
 *   crash.c  the one crash guard: a prepared report sent from a signal
 *            handler, then _exit
 *   array.c  room for one more element of a growing array
 *   defaults.c  the mount options an image may hold as its defaults
 *
 * Functions return 0 or a negative errno, or a pointer that is NULL on
 * failure, and print nothing unless printing is what they are for.
 */
#ifndef KVFS_COMMON_H
#define KVFS_COMMON_H

#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/un.h>

/* -------------------------------------------------------------- sizes -- */

/* Parse a size: decimal digits, then optionally a unit K, M, G or T (either
 * case; powers of 1024), which may be followed by "i" and then by "B" or
 * "b": "4096", "4k", "4K", "4KB", "4KiB", "1gib". Nothing else: no sign,
 * no space, no fraction, no "B" without a unit.
 * Returns 0 and sets *out, -EINVAL for anything that is not such a size
 * (NULL and "" included), -ERANGE for one that does not fit 64 bits. *out
 * is left alone on an error. */
int size_parse(const char *s, uint64_t *out);

/* ----------------------------------------------------- mount defaults -- */

/* What an image may hold as its mount defaults (kvfs-tune -o; the daemon
 * puts them before its own -o options): a comma-separated list of
 * durability=full|fsync|none, max_size=SIZE (1M or more), commit=SECONDS,
 * window=MS, noatime, relatime, strictatime; "" for none. 0, or -EINVAL
 * with a message for the first option that is wrong in err (defaults.c). */
#define MOUNT_DEFAULTS_MAX 255 /* bytes (kv.h's KV_DEFAULTS_MAX) */
#define MOUNT_WINDOW_MS_MAX 60000
int mount_defaults_check(const char *opts, char *err, size_t errlen);
/* The zstd level of a compress option's value (after "compress="; NULL or
 * "" for the bare option): "zstd" (level 3) or "zstd:N", N 1 to 19; 0, or
 * -EINVAL with err set. */
#define COMPRESS_LEVEL_DEFAULT 3
#define COMPRESS_LEVEL_MAX 19
int compress_parse(const char *v, int *level, char *err, size_t errlen);
/* The defaults opts ("" for none) with their compress options (compress,
 * compress=..., nocompress) replaced by opt (NULL: by none), into out:
 * what kvfs-tune -O and mkfs.kvfs -O store, the other defaults kept in
 * their order. 0, or -E2BIG when the result is longer than
 * MOUNT_DEFAULTS_MAX bytes or outlen - 1. */
int mount_defaults_compress(const char *opts, const char *opt, char *out, size_t outlen);
/* The zstd level new writes get under the defaults opts, as the daemon
 * reads them (the last compress option wins): 0 for none or nocompress;
 * -EINVAL for a value compress_parse refuses. */
int mount_defaults_level(const char *opts);

/* ----------------------------------------------------------- messages -- */

/* The text of a message line into buf (always terminated, cut to len):
 * "SUBJECT: TEXT", TEXT being fmt expanded. The subject (what the message
 * is about: an image, a quoted path) is left out when NULL or "", and when
 * TEXT already begins with "SUBJECT:" (a store message that names the
 * image). */
void msg_vformat(char *buf, size_t len, const char *subject, const char *fmt, va_list ap);
/* Print "PROG: " and the line of msg_vformat, then a newline, to f in one
 * stdio call (a line from one thread is never cut by another's). Never
 * cut: a text longer than a stack buffer is formatted on the heap (and
 * printed cut only when that fails). */
void msg_vprint(FILE *f, const char *prog, const char *subject, const char *fmt, va_list ap);
void msg_print(FILE *f, const char *prog, const char *subject, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* -------------------------------------------------------- crash guard -- */

/* A program that reads an image through liblmdb can fault inside it on a
 * page damaged on disk (liblmdb trusts its B-tree pages). The crash guard
 * turns that into a message instead of a silent death: the handler sends
 * the current report, as prepared beforehand, and exits.
 *
 *   crash_report_fd / crash_report_syslog   prepare a report (any time)
 *   crash_guard_install(code)                handle the crash signals
 *   crash_guard_report(r)                    make r the report to send
 *
 * The handler is async-signal-safe: it sends bytes made beforehand with
 * one write(2) or sendto(2) and calls _exit(2). The first thread to fault
 * sends; any other that faults meanwhile waits for its _exit. A fault
 * inside the handler gets the default action (the signals are blocked
 * there). In a sanitizer build (or with KVFS_NO_CRASH_GUARD) nothing is
 * installed: the sanitizer reports the crash itself. */

#define CRASH_REPORT_MAX (2 * PATH_MAX + 512)

struct crash_report {
	int fd;                  /* where the bytes go */
	int dgram;               /* fd is a datagram socket: sent to addr */
	struct sockaddr_un addr; /* with dgram: the syslog socket (/dev/log) */
	size_t len;
	char buf[CRASH_REPORT_MAX];
};

/* A report written to fd (a pipe, stderr) as fmt expands, byte for byte:
 * the caller writes any "PROG: " and newline. Cut at CRASH_REPORT_MAX. */
void crash_report_fd(struct crash_report *r, int fd, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A report for syslog: one datagram "<PRI>IDENT[PID]: TEXT" (the syslog
 * wire format, priority LOG_CRIT of facility) sent to the socket at
 * sock_path ("/dev/log") when the crash comes, so a syslog daemon started
 * meanwhile still gets it. Opens a socket for it (close-on-exec, kept for
 * the life of the process). Returns 0, or -errno when no socket could be
 * made (r is then unusable). */
int crash_report_syslog(struct crash_report *r, const char *sock_path, int facility,
			const char *ident, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Handle SIGSEGV, SIGBUS, SIGABRT, SIGILL and SIGFPE from now on: send the
 * current report (if any) and _exit(exit_code). */
void crash_guard_install(int exit_code);
/* Make r the report a crash sends from now on (NULL: none). r must stay
 * as it is while current: prepare another and switch to it. */
void crash_guard_report(const struct crash_report *r);

/* ------------------------------------------------------------- arrays -- */

/* Room for need elements of size bytes (size > 0) in the array v of *cap
 * elements: v itself when it is not NULL and *cap >= need; else v
 * reallocated to the largest of need, twice *cap and first (the first
 * capacity), *cap set to that. Returns the array, never NULL on success
 * (even for need 0); NULL with errno ENOMEM when out of memory or when
 * need * size overflows, v and *cap then untouched (v still the
 * caller's). */
void *array_reserve(void *v, size_t *cap, size_t need, size_t size, size_t first);

#endif
