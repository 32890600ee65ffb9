/*
 * mkimage.c - make a kvfs image quickly through the kv API (no FUSE): a
 * sample tree holding one of everything (-s), and/or N inodes in bulk, made
 * by kv_write batches of BATCH creates. The fsck tests break the sample on
 * purpose; the fsck benchmark checks a bulk image of 1,000,000 inodes.
 *
 *   mkimage [-s] [-n INODES] [-w FILES_PER_DIR] IMAGE
 *
 * The bulk part: directories /dNNNNNN under the root, each holding up to
 * FILES_PER_DIR (default 1000) files fNNNNNN of 64 to 263 bytes (one block
 * each); every 100th file has an xattr. INODES counts them all.
 *
 * Invariants:
 *  1. The result is a consistent image (fsck -n exits 0): sizes, link
 *     counts, parents and nblocks are kept as the daemon keeps them.
 *  2. apply() may be replayed by the writer: it reads its starting state
 *     from its argument and the transaction, and writes only its result.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "kv.h"

#define BATCH 10000
#define T0 1700000000000000000LL /* fixed times: images are reproducible */

static int mk(kv_txn *t, struct kv_inode *dir, const char *name, uint32_t mode, uint64_t rdev,
	      const char *target, struct kv_inode *out)
{
	struct kv_inode in = {0};
	int rc = kv_ino_alloc(t, &in.ino);

	if (rc)
		return rc;
	in.mode = mode;
	in.uid = getuid();
	in.gid = getgid();
	in.nlink = S_ISDIR(mode) ? 2 : 1;
	in.rdev = rdev;
	in.atime_ns = in.mtime_ns = in.ctime_ns = in.btime_ns = T0;
	if (S_ISDIR(mode))
		in.parent = dir->ino;
	if (target) {
		in.inline_data = target;
		in.inline_len = (uint32_t)strlen(target);
		in.size = in.inline_len;
	}
	rc = kv_inode_put(t, &in);
	if (!rc)
		rc = kv_dirent_add(t, dir->ino, name, strlen(name), in.ino,
				   (uint8_t)((mode & S_IFMT) >> 12));
	if (rc)
		return rc;
	dir->size++;
	if (S_ISDIR(mode))
		dir->nlink++;
	*out = in;
	return 0;
}

static int write_file(kv_txn *t, struct kv_inode *in, uint64_t off, const void *buf, size_t len)
{
	int rc = kv_data_write(t, in, off, buf, len);
	return rc ? rc : kv_inode_put(t, in);
}

/* ------------------------------------------------------------- sample -- */

static int apply_sample(kv_txn *t, void *arg)
{
	struct kv_inode root, dir, sub, file, hello, sparse, link, hard, x, deep, xdir;
	uint32_t bs = *(uint32_t *)arg;
	size_t flen = 3 * (size_t)bs + 100;
	unsigned char *buf = malloc(flen);
	int rc;

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < flen; i++)
		buf[i] = (unsigned char)('a' + i % 26);
	rc = kv_inode_get(t, KV_ROOT_INO, &root);
	if (!rc)
		rc = mk(t, &root, "dir", S_IFDIR | 0755, 0, NULL, &dir);
	if (!rc)
		rc = mk(t, &dir, "sub", S_IFDIR | 0755, 0, NULL, &sub);
	if (!rc)
		rc = mk(t, &dir, "file", S_IFREG | 0644, 0, NULL, &file);
	if (!rc)
		rc = write_file(t, &file, 0, buf, flen);
	if (!rc)
		rc = kv_xattr_set(t, file.ino, "user.color", "blue", 4, 0);
	if (!rc)
		rc = mk(t, &root, "hello", S_IFREG | 0644, 0, NULL, &hello);
	if (!rc)
		rc = write_file(t, &hello, 0, "hello world\n", 12);
	if (!rc)
		rc = mk(t, &root, "sparse", S_IFREG | 0644, 0, NULL, &sparse);
	if (!rc)
		rc = write_file(t, &sparse, 2 * (uint64_t)bs, "tail", 4);
	if (!rc)
		rc = mk(t, &root, "link", S_IFLNK | 0777, 0, "hello", &link);
	if (!rc)
		rc = mk(t, &root, "hard1", S_IFREG | 0644, 0, NULL, &hard);
	if (!rc)
		rc = kv_dirent_add(t, dir.ino, "hard2", 5, hard.ino, (uint8_t)(S_IFREG >> 12));
	if (!rc) {
		dir.size++;
		hard.nlink = 2;
		rc = write_file(t, &hard, 0, "hard", 4);
	}
	if (!rc)
		rc = mk(t, &root, "fifo", S_IFIFO | 0644, 0, NULL, &x);
	if (!rc)
		rc = mk(t, &root, "null", S_IFCHR | 0666, makedev(1, 3), NULL, &x);
	if (!rc)
		rc = mk(t, &root, "empty", S_IFREG | 0644, 0, NULL, &x);
	if (!rc)
		rc = mk(t, &sub, "deep", S_IFREG | 0644, 0, NULL, &deep);
	if (!rc)
		rc = write_file(t, &deep, 0, "deep\n", 5);
	if (!rc)
		rc = mk(t, &root, "xdir", S_IFDIR | 0755, 0, NULL, &xdir);
	if (!rc)
		rc = kv_xattr_set(t, xdir.ino, "user.x", "1", 1, 0);
	if (!rc)
		rc = kv_inode_put(t, &xdir);
	if (!rc)
		rc = kv_inode_put(t, &sub);
	if (!rc)
		rc = kv_inode_put(t, &dir);
	if (!rc)
		rc = kv_inode_put(t, &root);
	free(buf);
	return rc;
}

/* --------------------------------------------------------------- bulk -- */

struct bulk {
	/* in: where the previous batch stopped */
	uint64_t made, total, per_dir;
	uint64_t dir;      /* current directory (0: make one first) */
	uint64_t in_dir;   /* files in it so far */
	uint64_t ndirs;
	/* out */
	uint64_t o_made, o_dir, o_in_dir, o_ndirs;
};

static int apply_bulk(kv_txn *t, void *arg)
{
	struct bulk *b = arg;
	uint64_t made = b->made, cur = b->dir, in_dir = b->in_dir, ndirs = b->ndirs;
	struct kv_inode root, dir = {0}, in;
	unsigned char data[264];
	char name[32];
	int rc, batch = 0;

	rc = kv_inode_get(t, KV_ROOT_INO, &root);
	if (!rc && cur)
		rc = kv_inode_get(t, cur, &dir);
	while (!rc && made < b->total && batch < BATCH) {
		if (!cur || in_dir == b->per_dir) {
			if (cur && (rc = kv_inode_put(t, &dir)) != 0)
				break;
			snprintf(name, sizeof(name), "d%06llu", (unsigned long long)ndirs++);
			rc = mk(t, &root, name, S_IFDIR | 0755, 0, NULL, &dir);
			cur = dir.ino;
			in_dir = 0;
		} else {
			size_t len = 64 + made % 200;
			snprintf(name, sizeof(name), "f%06llu", (unsigned long long)in_dir++);
			rc = mk(t, &dir, name, S_IFREG | 0644, 0, NULL, &in);
			for (size_t i = 0; !rc && i < len; i++)
				data[i] = (unsigned char)(made * 31 + i);
			if (!rc)
				rc = write_file(t, &in, 0, data, len);
			if (!rc && made % 100 == 0)
				rc = kv_xattr_set(t, in.ino, "user.tag", name, strlen(name), 0);
		}
		made++;
		batch++;
	}
	if (!rc && cur)
		rc = kv_inode_put(t, &dir);
	if (!rc)
		rc = kv_inode_put(t, &root);
	b->o_made = made;
	b->o_dir = cur;
	b->o_in_dir = in_dir;
	b->o_ndirs = ndirs;
	return rc;
}

static int bulk(kv_env *env, uint64_t total, uint64_t per_dir)
{
	struct bulk b = {.total = total, .per_dir = per_dir};
	int rc = 0;

	while (!rc && b.made < b.total) {
		rc = kv_write(env, apply_bulk, &b, 0);
		b.made = b.o_made;
		b.dir = b.o_dir;
		b.in_dir = b.o_in_dir;
		b.ndirs = b.o_ndirs;
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct kv_mkfs_opts mo = {.root_mode = 0755, .force = 1};
	uint64_t total = 0, per_dir = 1000;
	int sample = 0, c, rc;
	char err[512];
	kv_env *env;
	uint32_t bs;

	while ((c = getopt(argc, argv, "sn:w:")) != -1) {
		switch (c) {
		case 's': sample = 1; break;
		case 'n': total = strtoull(optarg, NULL, 10); break;
		case 'w': per_dir = strtoull(optarg, NULL, 10); break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || per_dir == 0)
		goto usage;
	mo.root_uid = getuid();
	mo.root_gid = getgid();
	rc = kv_mkfs(argv[optind], &mo, err, sizeof(err));
	if (!rc)
		rc = kv_open(argv[optind], &(struct kv_open_opts){.durability = KV_DURABLE_NONE},
			     &env, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "mkimage: %s\n", err);
		return 1;
	}
	bs = kv_block_size(env);
	if (sample)
		rc = kv_write(env, apply_sample, &bs, 0);
	if (!rc && total)
		rc = bulk(env, total, per_dir);
	if (!rc)
		rc = kv_sync(env);
	kv_close(env);
	if (rc) {
		fprintf(stderr, "mkimage: %s\n", strerror(-rc));
		return 1;
	}
	return 0;

usage:
	fprintf(stderr, "usage: mkimage [-s] [-n INODES] [-w FILES_PER_DIR] IMAGE\n");
	return 2;
}
