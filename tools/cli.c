/*
 * cli.c - helpers shared by the command-line tools: messages, the safe
 * printing of names and times read from an image (which may hold any bytes:
 * nothing read from disk reaches a terminal unescaped), the -O compress
 * option, and the bytes of a data block, compressed or not.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "kv.h"

const char *cli_prog = "kvfs";

void cli_init(char **argv)
{
	const char *slash = argv[0] ? strrchr(argv[0], '/') : NULL;

	cli_prog = slash ? slash + 1 : (argv[0] ? argv[0] : "kvfs");
	/* getopt(3) names the program by argv[0] in its own messages */
	argv[0] = (char *)cli_prog;
}

char *cli_quote(const void *s, size_t len)
{
	char *quoted = NULL;
	size_t qlen = 0;
	FILE *m = open_memstream(&quoted, &qlen);

	if (!m)
		return NULL;
	fputc('\'', m);
	cli_put_escaped(m, s, len);
	fputc('\'', m);
	if (fclose(m) != 0) {
		free(quoted);
		return NULL;
	}
	return quoted;
}

void cli_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cli_verror_at(NULL, fmt, ap);
	va_end(ap);
}

void cli_verror_at(const char *path, const char *fmt, va_list ap)
{
	char *quoted = path ? cli_quote(path, strlen(path)) : NULL;

	/* out of memory: the message still goes, the path unnamed */
	msg_vprint(stderr, cli_prog, quoted ? quoted : path ? "'?'" : NULL, fmt, ap);
	free(quoted);
}

void cli_error_at(const char *path, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cli_verror_at(path, fmt, ap);
	va_end(ap);
}

void cli_format_uuid(const uint8_t u[16], char out[37])
{
	snprintf(out, 37,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
		 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
		 u[14], u[15]);
}

/* Length of the valid UTF-8 sequence of more than one byte at p (n bytes
 * left) and its code point, or 0. */
static size_t utf8_seq(const unsigned char *p, size_t n, uint32_t *cpo)
{
	uint32_t cp;
	size_t len;

	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	*cpo = cp;
	return len;
}

/* The same, for a code point that prints (not a C1 control). */
static size_t utf8_printable(const unsigned char *p, size_t n)
{
	uint32_t cp;
	size_t len = utf8_seq(p, n, &cp);

	return len && cp >= 0xa0 ? len : 0;
}

void cli_put_escaped(FILE *f, const void *s, size_t len)
{
	const unsigned char *p = s;
	size_t i = 0;

	while (i < len) {
		unsigned char c = p[i];
		size_t u;

		if (c == '\\') {
			fputs("\\\\", f);
		} else if (c == '\n') {
			fputs("\\n", f);
		} else if (c == '\t') {
			fputs("\\t", f);
		} else if (c == '\r') {
			fputs("\\r", f);
		} else if (c >= 0x20 && c < 0x7f) {
			fputc(c, f);
		} else if (c >= 0x80 && (u = utf8_printable(p + i, len - i)) > 0) {
			fwrite(p + i, 1, u, f);
			i += u;
			continue;
		} else {
			fprintf(f, "\\x%02x", c);
		}
		i++;
	}
}

void cli_format_time(int64_t ns, char *out, size_t outlen)
{
	int64_t sec = ns / 1000000000, frac = ns % 1000000000;
	struct tm tm;
	time_t t;

	if (frac < 0) {
		frac += 1000000000;
		sec--;
	}
	t = (time_t)sec;
	if (!gmtime_r(&t, &tm)) {
		snprintf(out, outlen, "%lld ns", (long long)ns);
		return;
	}
	snprintf(out, outlen, "%04d-%02d-%02d %02d:%02d:%02d.%09lld UTC", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long long)frac);
}

void cli_format_bytes(uint64_t n, char *out, size_t outlen)
{
	static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)n;
	int u = 0;

	if (n < 1024) {
		snprintf(out, outlen, "%llu bytes", (unsigned long long)n);
		return;
	}
	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(out, outlen, "%.1f %s", v, units[u]);
}

void cli_crash_guard(const char *image)
{
	static struct crash_report report; /* read by the handler: never on the stack */

	/* the newline ends a progress line the crash may cut */
	crash_report_fd(&report, STDERR_FILENO,
			"\n%s: '%s': crashed reading the image: it is damaged where the store "
			"cannot check it (restore it from a backup); if it is sound, this is a "
			"bug\n", cli_prog, image);
	crash_guard_install(EXIT_OPERATIONAL);
	crash_guard_report(&report);
}

void cli_print_version(void)
{
	printf("%s (kvfs) %s, image format %d\n", cli_prog, KVFS_VERSION, KV_FORMAT_VERSION);
}

int cli_one_image(int argc, int optind, void (*usage)(FILE *))
{
	if (optind == argc - 1)
		return 0;
	cli_error(optind == argc ? "no image given" : "too many arguments");
	usage(stderr);
	return EXIT_USAGE;
}

int cli_other_option(int c, char **argv, void (*usage)(FILE *))
{
	switch (c) {
	case 'h':
		usage(stdout);
		return EXIT_OK;
	case 'V':
		cli_print_version();
		return EXIT_OK;
	default:
		if (!opterr)
			cli_error("unknown option '%s'", argv[optind - 1]);
		usage(stderr);
		return EXIT_USAGE;
	}
}

void cli_print_label(FILE *f, const char *label)
{
	if (!label[0]) {
		fputs("(none)\n", f);
		return;
	}
	fputc('\'', f);
	cli_put_escaped(f, label, strlen(label));
	fputs("'\n", f);
}

int cli_parse_compress(const char *arg, int *level)
{
	char err[160];

	if (strcmp(arg, "nocompress") == 0) {
		*level = 0;
		return 0;
	}
	if (strcmp(arg, "compress") != 0 && strncmp(arg, "compress=", 9) != 0) {
		cli_error("unknown feature '%s' (-O takes compress, compress=zstd:LEVEL or "
			  "nocompress)", arg);
		return -1;
	}
	if (compress_parse(arg[8] ? arg + 9 : NULL, level, err, sizeof(err)) != 0) {
		cli_error("-O %s: %s", arg, err);
		return -1;
	}
	return 0;
}

int cli_defaults_compress(kv_txn *t, int level)
{
	char old[KV_DEFAULTS_MAX + 1], opt[32], merged[KV_DEFAULTS_MAX + 1];
	int rc = kv_defaults_get(t, old, sizeof(old));

	if (rc)
		return rc;
	snprintf(opt, sizeof(opt), "compress=zstd:%d", level);
	rc = mount_defaults_compress(old, level ? opt : NULL, merged, sizeof(merged));
	return rc ? rc : kv_defaults_set(t, merged);
}

int cli_block_data(kv_env *env, uint64_t ino, uint64_t idx, const void *val, size_t vlen,
		   void *buf, const void **data, size_t *len)
{
	int rc = kv_check_block(env, ino, idx, val, vlen, len);

	if (rc < 0)
		return -EIO;
	*data = val;
	if (rc == 0)
		return 0;
	rc = kv_block_unpack(val, vlen, buf, *len);
	if (rc)
		return rc == -EIO ? -EBADMSG : rc;
	*data = buf;
	return 1;
}

/* "IMAGE-lock" into buf; 0 when it does not fit. */
static int lock_path(const char *image, char *buf, size_t len)
{
	return (size_t)snprintf(buf, len, "%s-lock", image) < len;
}

int cli_lock_exists(const char *image)
{
	char lock[PATH_MAX];

	return lock_path(image, lock, sizeof(lock)) && access(lock, F_OK) == 0;
}

void cli_remove_lock(const char *image)
{
	char lock[PATH_MAX];

	if (lock_path(image, lock, sizeof(lock)))
		unlink(lock);
}
