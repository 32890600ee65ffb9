/*
 * test_common.c - common/, the library below the daemon and the tools: the
 * sizes every program accepts and refuses, the message lines, the crash
 * guard's report as a crashed child sends it, growing arrays, and the
 * compress part of an image's mount defaults. Linked
 * with common/ alone: nothing here needs the store or FUSE.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"

/* -------------------------------------------------------------- sizes -- */

static const struct {
	const char *s;
	uint64_t v;
} sizes_ok[] = {
	{"0", 0},
	{"1", 1},
	{"007", 7},
	{"4096", 4096},
	{"4k", 4096},
	{"4K", 4096},
	{"4KB", 4096},
	{"4Kb", 4096},
	{"4KiB", 4096},
	{"4kib", 4096},
	{"4Ki", 4096},
	{"64K", 65536},
	{"1m", 1 << 20},
	{"1M", 1 << 20},
	{"1MB", 1 << 20},
	{"1MiB", 1 << 20},
	{"1g", 1ULL << 30},
	{"1G", 1ULL << 30},
	{"1GiB", 1ULL << 30},
	{"1gib", 1ULL << 30},
	{"1t", 1ULL << 40},
	{"1T", 1ULL << 40},
	{"1TiB", 1ULL << 40},
	{"16777215T", 16777215ULL << 40},
	{"18446744073709551615", UINT64_MAX},
};

static const struct {
	const char *s;
	int err;
} sizes_bad[] = {
	{"", -EINVAL},
	{" 1", -EINVAL},
	{"-1", -EINVAL},
	{"+1", -EINVAL},
	{"1 ", -EINVAL},
	{"1 K", -EINVAL},
	{"K", -EINVAL},
	{"KiB", -EINVAL},
	{"1B", -EINVAL},
	{"1iB", -EINVAL},
	{"1KK", -EINVAL},
	{"1KiBB", -EINVAL},
	{"1KIB", -EINVAL},
	{"1KBi", -EINVAL},
	{"1P", -EINVAL},
	{"1.5M", -EINVAL},
	{"1e3", -EINVAL},
	{"0x10", -EINVAL},
	{"4k2", -EINVAL},
	{"max", -EINVAL},
	{"16777216T", -ERANGE},
	{"17179869184G", -ERANGE},
	{"18446744073709551616", -ERANGE},
	{"99999999999999999999999", -ERANGE},
};

static void size_accepts(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(sizes_ok) / sizeof(sizes_ok[0]); i++) {
		uint64_t v = 12345;
		int rc = size_parse(sizes_ok[i].s, &v);

		if (rc != 0 || v != sizes_ok[i].v)
			fail_msg("'%s': rc %d, value %llu, want %llu", sizes_ok[i].s, rc,
				 (unsigned long long)v, (unsigned long long)sizes_ok[i].v);
	}
}

static void size_refuses(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(sizes_bad) / sizeof(sizes_bad[0]); i++) {
		uint64_t v = 12345;
		int rc = size_parse(sizes_bad[i].s, &v);

		if (rc != sizes_bad[i].err || v != 12345)
			fail_msg("'%s': rc %d, value %llu, want rc %d and the value untouched",
				 sizes_bad[i].s, rc, (unsigned long long)v, sizes_bad[i].err);
	}
}

static void size_refuses_null(void **state)
{
	uint64_t v = 1;

	(void)state;
	assert_int_equal(size_parse(NULL, &v), -EINVAL);
	assert_int_equal(v, 1);
}

/* ----------------------------------------------------------- messages -- */

static void format(char *buf, size_t len, const char *subject, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	msg_vformat(buf, len, subject, fmt, ap);
	va_end(ap);
}

static void msg_subject_once(void **state)
{
	char buf[128];

	(void)state;
	format(buf, sizeof(buf), "/img", "freed %d orphans", 3);
	assert_string_equal(buf, "/img: freed 3 orphans");
	/* a store message that names the image already */
	format(buf, sizeof(buf), "/img", "%s: cannot grow the map", "/img");
	assert_string_equal(buf, "/img: cannot grow the map");
	/* another image whose name merely begins the same */
	format(buf, sizeof(buf), "/img", "%s: cannot grow the map", "/img2");
	assert_string_equal(buf, "/img: /img2: cannot grow the map");
	format(buf, sizeof(buf), NULL, "plain %s", "text");
	assert_string_equal(buf, "plain text");
	format(buf, sizeof(buf), "", "plain");
	assert_string_equal(buf, "plain");
}

static void msg_format_cuts_to_fit(void **state)
{
	char buf[12];

	(void)state;
	format(buf, sizeof(buf), "/img", "%s", "0123456789");
	assert_string_equal(buf, "/img: 01234");
	format(buf, sizeof(buf), "/a/long/subject", "%s", "text");
	assert_string_equal(buf, "/a/long/sub");
	format(buf, 1, "/img", "%s", "text");
	assert_string_equal(buf, "");
}

static char *print_line(const char *prog, const char *subject, const char *text)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	assert_non_null(f);
	msg_print(f, prog, subject, "%s", text);
	assert_int_equal(fclose(f), 0);
	return out;
}

static void msg_print_lines(void **state)
{
	char *s;

	(void)state;
	s = print_line("kvfs", "/img", "signal 15, unmounting");
	assert_string_equal(s, "kvfs: /img: signal 15, unmounting\n");
	free(s);
	s = print_line("mkfs.kvfs", NULL, "'x' exists");
	assert_string_equal(s, "mkfs.kvfs: 'x' exists\n");
	free(s);
	s = print_line("fsck.kvfs", "kv", "kv: already says so");
	assert_string_equal(s, "fsck.kvfs: kv: already says so\n");
	free(s);
}

static void msg_print_long_line_whole(void **state)
{
	size_t n = 10000;
	char *text = malloc(n + 1), *want = malloc(n + 32), *s;

	(void)state;
	assert_non_null(text);
	assert_non_null(want);
	memset(text, 'a', n);
	text[n] = '\0';
	snprintf(want, n + 32, "p: 's': %s\n", text);
	s = print_line("p", "'s'", text);
	assert_string_equal(s, want);
	free(s);
	free(want);
	free(text);
}

/* -------------------------------------------------------- crash guard -- */

/*
 * The guard is off under ASan (it keeps its own handlers), and the checks
 * below cannot hold under valgrind: it reports the deliberate fault and sets
 * the child's exit status to its own --error-exitcode.
 */
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(KVFS_NO_CRASH_GUARD)
#define GUARDED 0
#else
#define GUARDED (!RUNNING_ON_VALGRIND)
#endif

static void fault(void)
{
	volatile int *volatile p = NULL;

	*p = 1;
}

/* Run body in a child that crashes after it; the child's exit status. */
static int crash_child(void (*body)(void *), void *arg)
{
	int st;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		body(arg);
		_exit(99); /* not reached when the guard works */
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return st;
}

struct pipe_case {
	int fd, sig, code;
};

static void crash_to_fd(void *arg)
{
	static struct crash_report r;
	const struct pipe_case *c = arg;

	crash_report_fd(&r, c->fd, "\nprog: '%s': crashed\n", "img");
	crash_guard_install(c->code);
	crash_guard_report(&r);
	if (c->sig == SIGSEGV)
		fault();
	else
		raise(c->sig);
}

static void crash_reports_to_fd(void **state)
{
	static const int sigs[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
	char buf[256];
	int fds[2];

	(void)state;
	if (!GUARDED)
		skip(); /* the sanitizer reports the crash itself */
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct pipe_case c = {.sig = sigs[i], .code = 8};
		ssize_t n;
		int st;

		assert_int_equal(pipe(fds), 0);
		c.fd = fds[1];
		st = crash_child(crash_to_fd, &c);
		close(fds[1]);
		n = read(fds[0], buf, sizeof(buf) - 1);
		close(fds[0]);
		assert_true(n > 0);
		buf[n] = '\0';
		assert_string_equal(buf, "\nprog: 'img': crashed\n");
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 8);
	}
}

/* The report switched after the guard is installed is the one sent. */
static void crash_switch(void *arg)
{
	static struct crash_report before, after;
	const int *fd = arg;

	crash_report_fd(&before, *fd, "before");
	crash_report_fd(&after, *fd, "after");
	crash_guard_install(1);
	crash_guard_report(&before);
	crash_guard_report(&after);
	fault();
}

/* No report: the exit code alone. */
static void crash_silent(void *arg)
{
	(void)arg;
	crash_guard_install(3);
	crash_guard_report(NULL);
	fault();
}

static void crash_report_switches(void **state)
{
	char buf[64];
	int fds[2], st;
	ssize_t n;

	(void)state;
	if (!GUARDED)
		skip();
	assert_int_equal(pipe(fds), 0);
	st = crash_child(crash_switch, &fds[1]);
	close(fds[1]);
	n = read(fds[0], buf, sizeof(buf) - 1);
	close(fds[0]);
	assert_int_equal(n, 5);
	buf[n] = '\0';
	assert_string_equal(buf, "after");
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 1);
	st = crash_child(crash_silent, NULL);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 3);
}

static void crash_to_syslog(void *arg)
{
	static struct crash_report r;

	if (crash_report_syslog(&r, arg, LOG_DAEMON, "kvfs", "%s: crashed", "/img") != 0)
		_exit(98);
	crash_guard_install(1);
	crash_guard_report(&r);
	fault();
}

static void crash_reports_to_syslog(void **state)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	char dir[] = "/tmp/kvfs-crash-XXXXXX", want[128], buf[256];
	int sock, st;
	ssize_t n;

	(void)state;
	if (!GUARDED)
		skip();
	assert_non_null(mkdtemp(dir));
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/log", dir);
	sock = socket(AF_UNIX, SOCK_DGRAM, 0);
	assert_true(sock >= 0);
	assert_int_equal(bind(sock, (struct sockaddr *)&addr, sizeof(addr)), 0);
	st = crash_child(crash_to_syslog, addr.sun_path);
	n = recv(sock, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	close(sock);
	unlink(addr.sun_path);
	rmdir(dir);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 1);
	assert_true(n > 0);
	buf[n] = '\0';
	/* the child's pid is in the line: match around it */
	snprintf(want, sizeof(want), "<%d>kvfs[", LOG_DAEMON | LOG_CRIT);
	assert_memory_equal(buf, want, strlen(want));
	assert_non_null(strstr(buf, "]: /img: crashed"));
	assert_string_equal(strstr(buf, "]: ") + 3, "/img: crashed");
}

static void crash_report_cut_to_fit(void **state)
{
	static struct crash_report r;
	char *big = malloc(CRASH_REPORT_MAX * 2);

	(void)state;
	assert_non_null(big);
	memset(big, 'x', CRASH_REPORT_MAX * 2 - 1);
	big[CRASH_REPORT_MAX * 2 - 1] = '\0';
	crash_report_fd(&r, 2, "%s", big);
	assert_int_equal(r.len, CRASH_REPORT_MAX - 1);
	assert_int_equal(strlen(r.buf), CRASH_REPORT_MAX - 1);
	free(big);
}

/* ------------------------------------------------------------- arrays -- */

static void array_grows_keeping_content(void **state)
{
	int *v = NULL, *nv;
	size_t cap = 0;

	(void)state;
	for (int i = 0; i < 1000; i++) {
		nv = array_reserve(v, &cap, (size_t)i + 1, sizeof(*v), 16);
		assert_non_null(nv);
		v = nv;
		assert_true(cap >= (size_t)i + 1);
		v[i] = i;
	}
	assert_int_equal(cap, 1024); /* 16, 32, ... 1024 */
	for (int i = 0; i < 1000; i++)
		assert_int_equal(v[i], i);
	/* room already there: the same array */
	assert_ptr_equal(array_reserve(v, &cap, 1000, sizeof(*v), 16), v);
	/* a need beyond doubling is met at once */
	nv = array_reserve(v, &cap, 5000, sizeof(*v), 16);
	assert_non_null(nv);
	assert_int_equal(cap, 5000);
	assert_int_equal(nv[999], 999);
	free(nv);
}

/* A NULL array is allocated even for no element: NULL means failure only. */
static void array_allocates_when_empty(void **state)
{
	size_t cap = 0;
	int *v = array_reserve(NULL, &cap, 0, sizeof(*v), 8);

	(void)state;
	assert_non_null(v);
	assert_int_equal(cap, 8);
	free(v);
}

static void array_refuses_overflow(void **state)
{
	size_t cap = 4;
	char *v = malloc(4 * 8), *nv;

	(void)state;
	assert_non_null(v);
	nv = array_reserve(v, &cap, SIZE_MAX / 8 + 1, 8, 16);
	assert_null(nv);
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(cap, 4);
	free(v); /* still the caller's */
}

/* The compress part of the defaults replaced, the rest kept in order. */
static void defaults_compress_replaced(void **state)
{
	char out[MOUNT_DEFAULTS_MAX + 1], big[MOUNT_DEFAULTS_MAX + 1];

	(void)state;
	assert_int_equal(mount_defaults_compress("", "compress=zstd:3", out, sizeof(out)), 0);
	assert_string_equal(out, "compress=zstd:3");
	assert_int_equal(mount_defaults_compress("noatime,compress,durability=full",
						 "compress=zstd:9", out, sizeof(out)), 0);
	assert_string_equal(out, "noatime,durability=full,compress=zstd:9");
	assert_int_equal(mount_defaults_compress("compress=zstd:2,noacl,nocompress", NULL, out,
						 sizeof(out)), 0);
	assert_string_equal(out, "noacl");
	assert_int_equal(mount_defaults_compress("compress", NULL, out, sizeof(out)), 0);
	assert_string_equal(out, "");
	/* names that only begin like one are not compress options */
	assert_int_equal(mount_defaults_compress("compressx", NULL, out, sizeof(out)), 0);
	assert_string_equal(out, "compressx");
	/* too long for the record: refused, whatever room out has */
	memset(big, 'a', 250);
	big[250] = '\0';
	assert_int_equal(mount_defaults_compress(big, "compress=zstd:3", out, sizeof(out)),
			 -E2BIG);
	assert_int_equal(mount_defaults_compress("noatime", "compress", out, 8), -E2BIG);
}

static void defaults_level_is_the_last(void **state)
{
	(void)state;
	assert_int_equal(mount_defaults_level(""), 0);
	assert_int_equal(mount_defaults_level("noatime"), 0);
	assert_int_equal(mount_defaults_level("compress"), COMPRESS_LEVEL_DEFAULT);
	assert_int_equal(mount_defaults_level("compress=zstd"), COMPRESS_LEVEL_DEFAULT);
	assert_int_equal(mount_defaults_level("noacl,compress=zstd:7,noatime"), 7);
	assert_int_equal(mount_defaults_level("compress=zstd:7,nocompress"), 0);
	assert_int_equal(mount_defaults_level("nocompress,compress=zstd:1"), 1);
	assert_int_equal(mount_defaults_level("compress=lz4"), -EINVAL);
	assert_int_equal(mount_defaults_level("compress=zstd:20"), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest size_tests[] = {
		cmocka_unit_test(size_accepts),
		cmocka_unit_test(size_refuses),
		cmocka_unit_test(size_refuses_null),
	};
	const struct CMUnitTest msg_tests[] = {
		cmocka_unit_test(msg_subject_once),
		cmocka_unit_test(msg_format_cuts_to_fit),
		cmocka_unit_test(msg_print_lines),
		cmocka_unit_test(msg_print_long_line_whole),
	};
	const struct CMUnitTest crash_tests[] = {
		cmocka_unit_test(crash_reports_to_fd),
		cmocka_unit_test(crash_report_switches),
		cmocka_unit_test(crash_reports_to_syslog),
		cmocka_unit_test(crash_report_cut_to_fit),
	};
	const struct CMUnitTest array_tests[] = {
		cmocka_unit_test(array_grows_keeping_content),
		cmocka_unit_test(array_allocates_when_empty),
		cmocka_unit_test(array_refuses_overflow),
	};
	const struct CMUnitTest defaults_tests[] = {
		cmocka_unit_test(defaults_compress_replaced),
		cmocka_unit_test(defaults_level_is_the_last),
	};
	int failed = 0;

	failed += cmocka_run_group_tests_name("size", size_tests, NULL, NULL);
	failed += cmocka_run_group_tests_name("msg", msg_tests, NULL, NULL);
	failed += cmocka_run_group_tests_name("crash", crash_tests, NULL, NULL);
	failed += cmocka_run_group_tests_name("array", array_tests, NULL, NULL);
	failed += cmocka_run_group_tests_name("defaults", defaults_tests, NULL, NULL);
	return failed ? 1 : 0;
}
