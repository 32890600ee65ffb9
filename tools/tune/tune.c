/*
 * tune.c - kvfs-tune: change the label, the uuid or the mount defaults of a
 * kvfs image, in tune2fs's spirit, and list them.
 *
 *   kvfs-tune [-L LABEL] [-U UUID|random] [-o OPTIONS] [-O FEATURE] [-l] IMAGE
 *
 * -O compress[=zstd:LEVEL] and -O nocompress turn compression on or off for
 * the blocks mounts write from then on: they edit the compress part of the
 * mount defaults alone (after -o, when both are given), and no stored block
 * changes (a block is read as it was stored, compressed or not).
 *
 * Changes are one commit of an image opened read-write, so they are refused
 * while it is mounted read-write (kv_open names the mountpoint); -l alone
 * opens it read-only and may run on a mounted image.
 *
 * Exit codes: 0 done, 1 could not (a message says why), 16 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cli.h"
#include "kv.h"

struct tune {
	const char *label;   /* NULL: kept */
	int set_uuid;
	uint8_t uuid[16];
	const char *options; /* NULL: kept; "": none */
	int set_compress;    /* -O: the compress part of the defaults set to level */
	int level;           /* 0: nocompress */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [-L LABEL] [-U UUID|random] [-o OPTIONS] [-O FEATURE] [-l] IMAGE\n"
		"Change the label, the UUID or the mount defaults of the kvfs image IMAGE\n"
		"(not while it is mounted read-write), or show them.\n"
		"\n"
		"  -L, --label LABEL      new label, at most %d bytes ('' for none)\n"
		"  -U, --uuid UUID        new UUID: 32 hex digits as 8-4-4-4-12, or 'random'\n"
		"  -o, --options OPTS     mount defaults, which every mount of IMAGE uses\n"
		"                         unless its own -o options say otherwise ('' for\n"
		"                         none): durability=full|fsync|none, max_size=SIZE,\n"
		"                         commit=SECONDS, window=MS, noatime, relatime,\n"
		"                         strictatime, acl, noacl, compress[=zstd:LEVEL],\n"
		"                         nocompress (see kvfs(8))\n"
		"  -O, --features compress[=zstd:LEVEL]\n"
		"                         store the data blocks mounts write from now on\n"
		"                         compressed with zstd (level 1 to %d, default %d):\n"
		"                         sets the compress part of the mount defaults,\n"
		"                         keeping the others; stored blocks stay as they are\n"
		"  -O nocompress          store new data blocks as they are\n"
		"  -l, --list             show the label, UUID and mount defaults (after\n"
		"                         the changes, if any); the default with no option\n"
		"  -h, --help             show this help and exit\n"
		"  -V, --version          show the version and exit\n"
		"\n"
		"Exit status: 0 done, 1 failed, 16 usage.\n",
		cli_prog, KV_LABEL_MAX, COMPRESS_LEVEL_MAX, COMPRESS_LEVEL_DEFAULT);
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* "random", or 8-4-4-4-12 hex digits; 0, or -EINVAL. */
static int parse_uuid(const char *s, uint8_t out[16])
{
	size_t n = 0;

	if (strcmp(s, "random") == 0) {
		if (getrandom(out, 16, 0) != 16)
			return -errno;
		out[6] = (uint8_t)((out[6] & 0x0f) | 0x40); /* RFC 4122 version 4 */
		out[8] = (uint8_t)((out[8] & 0x3f) | 0x80);
		return 0;
	}
	if (strlen(s) != 36)
		return -EINVAL;
	for (size_t i = 0; i < 36;) {
		int hi, lo;

		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i++] != '-')
				return -EINVAL;
			continue;
		}
		hi = hexval(s[i]);
		lo = hexval(s[i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[n++] = (uint8_t)(hi << 4 | lo);
		i += 2;
	}
	return n == 16 ? 0 : -EINVAL;
}

static int apply_tune(kv_txn *t, void *arg)
{
	const struct tune *w = arg;
	int rc = 0;

	if (w->label || w->set_uuid)
		rc = kv_super_relabel(t, w->label, w->set_uuid ? w->uuid : NULL);
	if (rc == 0 && w->options)
		rc = kv_defaults_set(t, w->options);
	if (rc == 0 && w->set_compress)
		rc = cli_defaults_compress(t, w->level);
	return rc;
}

static int list(kv_env *env, const char *image)
{
	char uuid[37], defaults[KV_DEFAULTS_MAX + 1];
	struct kv_super s;
	kv_txn *t;
	int rc, level;

	kv_super_get(env, &s);
	rc = kv_read_begin(env, &t);
	if (rc == 0) {
		rc = kv_defaults_get(t, defaults, sizeof(defaults));
		kv_read_end(t);
	}
	if (rc) {
		cli_error_at(image, "cannot read the mount defaults: %s", strerror(-rc));
		return 1;
	}
	cli_format_uuid(s.uuid, uuid);
	printf("%-16s", "label:");
	cli_print_label(stdout, s.label);
	printf("uuid:           %s\n", uuid);
	printf("mount defaults: %s\n", defaults[0] ? defaults : "(none)");
	level = mount_defaults_level(defaults);
	if (level > 0)
		printf("compression:    zstd level %d (of new writes)\n", level);
	else
		printf("compression:    %s\n", level ? "(defaults damaged)" : "off");
	return EXIT_OK;
}

/* Change what w asks, or only show (read-only: a mounted image too); show
 * after a change too. An exit code. */
static int tune_image(const char *image, const struct tune *w, int show)
{
	int change = w->label || w->set_uuid || w->options || w->set_compress, rc;
	struct kv_open_opts o = {.readonly = !change, .durability = KV_DURABLE_FULL};
	char err[512];
	kv_env *env;

	rc = kv_open(image, &o, &env, err, sizeof(err));
	if (rc) {
		cli_error("%s", err);
		return 1;
	}
	rc = change ? kv_write(env, apply_tune, (void *)w, 0) : 0;
	if (rc == -E2BIG)
		cli_error_at(image, "not changed: the mount defaults would be longer than %d "
			     "bytes", KV_DEFAULTS_MAX);
	else if (rc)
		cli_error_at(image, "not changed: %s", strerror(-rc));
	else if (show || !change)
		rc = list(env, image);
	kv_close(env);
	return rc ? 1 : EXIT_OK;
}

int cmd_tune(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"label", required_argument, NULL, 'L'},
		{"uuid", required_argument, NULL, 'U'},
		{"options", required_argument, NULL, 'o'},
		{"features", required_argument, NULL, 'O'},
		{"list", no_argument, NULL, 'l'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct tune w = {0};
	char err[512];
	const char *image;
	int show = 0, c, rc, lock_existed;

	while ((c = getopt_long(argc, argv, "L:U:o:O:lhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'L':
			if (strlen(optarg) > KV_LABEL_MAX) {
				cli_error("label '%s' is longer than %d bytes", optarg, KV_LABEL_MAX);
				return EXIT_USAGE;
			}
			w.label = optarg;
			break;
		case 'U':
			if (parse_uuid(optarg, w.uuid) != 0) {
				cli_error("'%s' is not a UUID (8-4-4-4-12 hex digits) or 'random'",
					  optarg);
				return EXIT_USAGE;
			}
			w.set_uuid = 1;
			break;
		case 'o':
			if (mount_defaults_check(optarg, err, sizeof(err)) != 0) {
				cli_error("mount defaults '%s': %s", optarg, err);
				return EXIT_USAGE;
			}
			w.options = optarg;
			break;
		case 'O':
			if (cli_parse_compress(optarg, &w.level))
				return EXIT_USAGE;
			w.set_compress = 1;
			break;
		case 'l':
			show = 1;
			break;
		default: /* -h, -V, and the usage errors */
			return cli_other_option(c, argv, usage);
		}
	}
	if (cli_one_image(argc, optind, usage))
		return EXIT_USAGE;
	image = argv[optind];
	lock_existed = cli_lock_exists(image);
	rc = tune_image(image, &w, show);
	if (!lock_existed)
		cli_remove_lock(image); /* one this run made */
	return rc;
}

int main(int argc, char **argv)
{
	cli_init(argv);
	return cmd_tune(argc, argv);
}
