/*
 * mkfs.c - mkfs.kvfs: write an empty kvfs filesystem into a new image file.
 *
 * Exit codes: 0 created, 1 could not create (a message says why), 16 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "kv.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [-b BLOCKSIZE] [-L LABEL] [-f] [-q] IMAGE\n"
		"Create an empty kvfs filesystem in the file IMAGE.\n"
		"\n"
		"  -b, --block-size N  data bytes per block, %d to %d (K and M suffixes\n"
		"                      allowed); default %d. N = k*4096-24 fills k pages\n"
		"                      of the image exactly\n"
		"  -L, --label LABEL   filesystem label, at most %d bytes\n"
		"  -f, --force         replace IMAGE if it exists (not while it is mounted)\n"
		"  -q, --quiet         print nothing on success\n"
		"  -h, --help          show this help and exit\n"
		"  -V, --version       show the version and exit\n",
		cli_prog, KV_BLOCK_SIZE_MIN, KV_BLOCK_SIZE_MAX, KV_BLOCK_SIZE_DEFAULT, KV_LABEL_MAX);
}

int cmd_mkfs(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"block-size", required_argument, NULL, 'b'},
		{"label", required_argument, NULL, 'L'},
		{"force", no_argument, NULL, 'f'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct kv_mkfs_opts o = {.root_mode = 0755};
	struct kv_super s;
	struct kv_env *env;
	char err[512], uuid[37];
	int quiet = 0, c, rc;
	uint64_t bs;

	while ((c = getopt_long(argc, argv, "b:L:fqhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'b':
			if (cli_parse_size(optarg, &bs) || bs < KV_BLOCK_SIZE_MIN ||
			    bs > KV_BLOCK_SIZE_MAX) {
				cli_error("invalid block size '%s' (%d to %d bytes)", optarg,
					  KV_BLOCK_SIZE_MIN, KV_BLOCK_SIZE_MAX);
				return EXIT_USAGE;
			}
			o.block_size = (uint32_t)bs;
			break;
		case 'L':
			if (strlen(optarg) > KV_LABEL_MAX) {
				cli_error("label '%s' is longer than %d bytes", optarg, KV_LABEL_MAX);
				return EXIT_USAGE;
			}
			o.label = optarg;
			break;
		case 'f':
			o.force = 1;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case 'V':
			printf("mkfs.kvfs (kvfs) %s, image format %d\n", KVFS_VERSION,
			       KV_FORMAT_VERSION);
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		cli_error(optind == argc ? "no image given" : "too many arguments");
		usage(stderr);
		return EXIT_USAGE;
	}
	o.root_uid = getuid();
	o.root_gid = getgid();
	rc = kv_mkfs(argv[optind], &o, err, sizeof(err));
	if (rc) {
		cli_error("%s", err);
		return 1;
	}
	if (quiet)
		return EXIT_OK;
	/* read the new image back: what is reported is what was written */
	rc = kv_open(argv[optind], &(struct kv_open_opts){.readonly = 1}, &env, err, sizeof(err));
	if (rc) {
		cli_error("%s", err);
		return 1;
	}
	kv_super_get(env, &s);
	kv_close(env);
	cli_format_uuid(s.uuid, uuid);
	printf("created kvfs image '%s': format %u, block size %u, uuid %s%s%s%s\n", argv[optind],
	       s.version, s.block_size, uuid, s.label[0] ? ", label '" : "", s.label,
	       s.label[0] ? "'" : "");
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	cli_init(argv[0]);
	return cmd_mkfs(argc, argv);
}
