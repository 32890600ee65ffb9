/*
 * mkfs.c - mkfs.kvfs: write a new kvfs filesystem into an image file, empty
 * or (-d DIR) filled from a directory tree by mkfs_dir.c.
 *
 * -O compress[=zstd:LEVEL] makes an image whose mounts store new data
 * blocks compressed: its mount defaults say compress=zstd:LEVEL (kvfs-tune
 * -O changes that later), -d stores the tree's blocks compressed too, and
 * the block size is 16360 unless -b says otherwise. A compressed block of a
 * few KiB is a value LMDB packs into a leaf page beside others; blocks of
 * 4072 compress to values of about 1 KiB, which leave leaf pages half full
 * (cp -a of /usr/include, 120 MB: 66 MB of image at 4072, 47.6 MB at 16360,
 * 42.5 MB at 65512), and 16360 keeps the read-modify-write of a partial
 * write at 16 KiB.
 *
 * Exit codes: 0 created, 1 could not create (a message says why), 16 usage.
 * A failed -d copy, or a failure to store the defaults, removes the
 * half-made image.
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

/* The block size of an image made with -O compress and no -b: four pages
 * less LMDB's header and the checksum (kv.h). */
#define BLOCK_SIZE_COMPRESSED (4 * 4096 - 24)

static void remove_image(const char *image)
{
	if (kv_image_is_url(image))
		return; /* a database's tables stay: mkfs -f replaces them */
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

/* The image's mount defaults with compress=zstd:LEVEL in (none are there
 * yet: merged all the same, as kvfs-tune -O does). */
static int apply_defaults(kv_txn *t, void *arg)
{
	return cli_defaults_compress(t, *(const int *)arg);
}

/* Store -O's compress level in the new image's mount defaults; 0, or -1
 * after saying why not. */
static int store_compress(const char *image, int level)
{
	struct kv_open_opts o = {.durability = KV_DURABLE_FULL};
	char err[512];
	kv_env *env;
	int rc;

	rc = kv_open(image, &o, &env, err, sizeof(err));
	if (rc) {
		cli_error("%s", err);
		return -1;
	}
	rc = kv_write(env, apply_defaults, &level, 0);
	kv_close(env);
	if (rc) {
		cli_error_at(image, "cannot store the mount defaults: %s", strerror(-rc));
		return -1;
	}
	return 0;
}

/* Read the new image back: what is reported is what was written. */
static int report(const char *image, const char *dir, const struct mkfs_fill_stats *fs)
{
	struct kv_super s;
	struct kv_env *env;
	char err[512], uuid[37], bytes[32], defaults[KV_DEFAULTS_MAX + 1] = "";
	kv_txn *t;
	int rc, level;

	rc = kv_open(image, &(struct kv_open_opts){.readonly = 1}, &env, err, sizeof(err));
	if (rc) {
		cli_error("%s", err);
		return 1;
	}
	kv_super_get(env, &s);
	if (kv_read_begin(env, &t) == 0) {
		if (kv_defaults_get(t, defaults, sizeof(defaults)) != 0)
			defaults[0] = '\0';
		kv_read_end(t);
	}
	kv_close(env);
	level = mount_defaults_level(defaults);
	cli_format_uuid(s.uuid, uuid);
	printf("created kvfs image '%s': format %u, block size %u, uuid %s%s%s%s\n", image,
	       s.version, s.block_size, uuid, s.label[0] ? ", label '" : "", s.label,
	       s.label[0] ? "'" : "");
	if (level > 0)
		printf("new data blocks are stored compressed (zstd level %d; mount defaults "
		       "'%s')\n", level, defaults);
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
		"usage: %s [-b BLOCKSIZE] [-L LABEL] [-O FEATURE] [-d DIR] [-f] [-q] IMAGE\n"
		"Create a kvfs filesystem in the file IMAGE, empty or a copy of DIR.\n"
		"\n"
		"  -b, --block-size N  data bytes per block, %d to %d (K and M suffixes\n"
		"                      allowed); default %d, or %d with -O compress.\n"
		"                      N = k*4096-24 fills k pages of the image exactly\n"
		"  -L, --label LABEL   filesystem label, at most %d bytes\n"
		"  -O, --features compress[=zstd:LEVEL]\n"
		"                      store data blocks compressed with zstd (level 1 to\n"
		"                      %d, default %d) where that saves room: the blocks\n"
		"                      -d copies, and those every mount writes (the image's\n"
		"                      mount defaults say compress=zstd:LEVEL; kvfs-tune -O\n"
		"                      changes it)\n"
		"  -O nocompress       store data blocks as they are (the default)\n"
		"  -d, --root-dir DIR  copy the tree at DIR into the new filesystem:\n"
		"                      contents, modes, owners, times, symlinks, hard\n"
		"                      links, xattrs, devices, FIFOs; holes and runs of\n"
		"                      zero blocks are not stored\n"
		"  -f, --force         replace IMAGE if it exists (not while it is mounted)\n"
		"  -q, --quiet         print nothing on success\n"
		"  -h, --help          show this help and exit\n"
		"  -V, --version       show the version and exit\n"
		"\n"
		"Exit status: 0 done, 1 failed, 16 usage.\n",
		cli_prog, KV_BLOCK_SIZE_MIN, KV_BLOCK_SIZE_MAX, KV_BLOCK_SIZE_DEFAULT,
		BLOCK_SIZE_COMPRESSED, KV_LABEL_MAX, COMPRESS_LEVEL_MAX, COMPRESS_LEVEL_DEFAULT);
}

int cmd_mkfs(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"block-size", required_argument, NULL, 'b'},
		{"label", required_argument, NULL, 'L'},
		{"features", required_argument, NULL, 'O'},
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
	int quiet = 0, level = 0, c, rc;
	uint64_t bs;

	while ((c = getopt_long(argc, argv, "b:L:O:d:fqhV", longopts, NULL)) != -1) {
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
		case 'O':
			if (cli_parse_compress(optarg, &level))
				return EXIT_USAGE;
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
		default: /* -h, -V, and the usage errors */
			return cli_other_option(c, argv, usage);
		}
	}
	if (cli_one_image(argc, optind, usage))
		return EXIT_USAGE;
	if (dir && check_dir(dir))
		return 1;
	o.root_uid = getuid();
	o.root_gid = getgid();
	if (level && !o.block_size)
		o.block_size = BLOCK_SIZE_COMPRESSED;
	rc = kv_mkfs(argv[optind], &o, err, sizeof(err));
	if (rc) {
		cli_error("%s", err);
		return 1;
	}
	if (level && store_compress(argv[optind], level) != 0) {
		cli_error("'%s' not made", argv[optind]);
		remove_image(argv[optind]);
		return 1;
	}
	if (dir && mkfs_fill(argv[optind], dir, level, !quiet && isatty(STDERR_FILENO), &fs) != 0) {
		cli_error("'%s' not made", argv[optind]);
		remove_image(argv[optind]);
		return 1;
	}
	if (dir || level)
		cli_remove_lock(argv[optind]);
	return quiet ? EXIT_OK : report(argv[optind], dir, &fs);
}

int main(int argc, char **argv)
{
	cli_init(argv);
	return cmd_mkfs(argc, argv);
}
