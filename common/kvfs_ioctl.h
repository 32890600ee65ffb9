/*
 * kvfs_ioctl.h - the ioctls a kvfs mount answers, shared by the daemon
 * (fs/clone.c) and the tools that send them (tools/clone).
 *
 * FUSE forwards an ioctl whose number encodes its direction and size (a
 * "restricted" ioctl) on an open file or directory of the mount; the
 * argument is copied to the daemon and back whole.
 */
#ifndef KVFS_IOCTL_H
#define KVFS_IOCTL_H

#include <linux/ioctl.h>
#include <stdint.h>

/* KVFS_IOC_CLONE, on an open SRC (a directory or a regular file): make
 * name in the directory dst_parent (an inode number of the same mount, as
 * stat(2) gives it) a copy of SRC's tree, in one change, every file's
 * blocks shared with SRC's. The counts say what the copy holds. */
#define KVFS_CLONE_NAME_MAX 255
struct kvfs_clone_arg {
	uint64_t dst_parent;  /* in */
	uint64_t files;       /* out: regular files, symlinks and others made */
	uint64_t dirs;        /* out: directories made, DST's own included */
	uint64_t bytes;       /* out: the bytes of the files' data */
	char name[KVFS_CLONE_NAME_MAX + 1]; /* in: NUL-terminated (else
					     * ENAMETOOLONG), no '/' */
};
#define KVFS_IOC_CLONE _IOWR('K', 1, struct kvfs_clone_arg)

#endif
