/*
 * mkfs.h - mkfs.kvfs -d: fill a new image from a directory tree
 * (mkfs_dir.c).
 */
#ifndef KVFS_MKFS_H
#define KVFS_MKFS_H

#include <stdint.h>

struct mkfs_fill_stats {
	uint64_t inodes; /* inodes made, the root included */
	uint64_t bytes;  /* file bytes read */
};

/* Copy the tree at dir into the empty image at image (made by kv_mkfs and
 * not open elsewhere). level: the zstd level its data blocks are stored
 * compressed at (0: as they are). progress: show files and bytes on stderr
 * as it goes. Returns 0, or -1 after printing a message that names the
 * source path. */
int mkfs_fill(const char *image, const char *dir, int level, int progress,
	      struct mkfs_fill_stats *st);

#endif
