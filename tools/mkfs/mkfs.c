/*
 * mkfs.c - mkfs.kvfs: write a new kvfs filesystem into an image file, empty
 * or (-d DIR) filled from a directory tree by mkfs_dir.c.
 *
 * Exit codes: 0 created, 1 could not create (a message says why), 16 usage.
 * A failed -d copy removes the half-made image.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "kv.h"
#include "mkfs.h"

static void remove_image(const char *image)
{
	unlink(image);
	cli_remove_lock(image); /* nobody else has the new image open */
}

static int check_dir(const char *dir)
{
	struct stat st;

	if (stat(dir, &st) != 0) {
		cli_error("'%s': %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		cli_error("'%s' is not a directory", dir);
		return -1;
	}
	return 0;
}

/* Read the new image back: what is reported is what was written. */
static int report(const char *image, const char *dir, const struct mkfs_fill_stats *fs)
{
	struct kv_super s;
	struct kv_env *env;
	char err[512], uuid[37], bytes[32];
	int rc;

	rc = kv_open(image, &(struct kv_open_opts){.readonly = 1}, &env, err, sizeof(err));
	if (rc) {
		cli_error("%s", err);
		return 1;
	}
	kv_super_get(env, &s);
	kv_close(env);
	cli_format_uuid(s.uuid, uuid);
	printf("created kvfs image '%s': format %u, block size %u, uuid %s%s%s%s\n", image,
	       s.version, s.block_size, uuid, s.label[0] ? ", label '" : "", s.label,
	       s.label[0] ? "'" : "");
	if (dir) {
		cli_format_bytes(fs->bytes, bytes, sizeof(bytes));
		printf("copied %llu inodes and %s of file data from '%s'\n",
		       (unsigned long long)fs->inodes, bytes, dir);
	}
	return EXIT_OK;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [-b BLOCKSIZE] [-L LABEL] [-d DIR] [-f] [-q] IMAGE\n"
		"Create a kvfs filesystem in the file IMAGE, empty or a copy of DIR.\n"
		"\n"
		"  -b, --block-size N  data bytes per block, %d to %d (K and M suffixes\n"
		"                      allowed); default %d. N = k*4096-24 fills k pages\n"
		"                      of the image exactly\n"
		"  -L, --label LABEL   filesystem label, at most %d bytes\n"
		"  -d, --root-dir DIR  copy the tree at DIR into the new filesystem:\n"
		"                      contents, modes, owners, times, symlinks, hard\n"
		"                      links, xattrs, devices, FIFOs; holes and runs of\n"
		"                      zero blocks are not stored\n"
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
		{"root-dir", required_argument, NULL, 'd'},
		{"force", no_argument, NULL, 'f'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct kv_mkfs_opts o = {.root_mode = 0755};
	struct mkfs_fill_stats fs = {0};
	const char *dir = NULL;
	char err[512];
	int quiet = 0, c, rc;
	uint64_t bs;

	while ((c = getopt_long(argc, argv, "b:L:d:fqhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'b':
			if (size_parse(optarg, &bs) || bs < KV_BLOCK_SIZE_MIN ||
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
		case 'd':
			dir = optarg;
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
			cli_print_version();
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (cli_one_image(argc, optind, usage))
		return EXIT_USAGE;
	if (dir && check_dir(dir))
		return 1;
	o.root_uid = getuid();
	o.root_gid = getgid();
	rc = kv_mkfs(argv[optind], &o, err, sizeof(err));
	if (rc) {
		cli_error("%s", err);
		return 1;
	}
	if (dir && mkfs_fill(argv[optind], dir, !quiet && isatty(STDERR_FILENO), &fs) != 0) {
		cli_error("'%s' not made", argv[optind]);
		remove_image(argv[optind]);
		return 1;
	}
	if (dir)
		cli_remove_lock(argv[optind]);
	return quiet ? EXIT_OK : report(argv[optind], dir, &fs);
}

int main(int argc, char **argv)
{
	cli_init(argv);
	return cmd_mkfs(argc, argv);
}
