/*
 * fsfix.h - the fixture of the unit tests of the daemon's cores: a
 * temporary image (tu_setup) with the global struct fs set up over it as
 * main.c would, no FUSE session; the teardown fails when an inode is still
 * referenced (a core's entry not forgotten). And the helpers those tests
 * share, each asserting its own success.
 */
#ifndef KVFS_FSFIX_H
#define KVFS_FSFIX_H

#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "fs.h"

int fsfix_setup(void **state);
/* The same with the kernel's caches of entries on and readdirplus. */
int fsfix_setup_cached(void **state);
/* The same as fsfix_setup_cached, with names in four hash buckets only:
 * listings and lookups walk collision lists. */
int fsfix_setup_collide(void **state);
int fsfix_teardown(void **state);

/* Make a name as root (a directory for S_IFDIR, else mknod) and forget its
 * reference, as the kernel does once it drops the entry. */
uint64_t fsfix_mk(uint64_t dir, const char *name, uint32_t mode);
/* The attributes getattr gives. */
struct stat fsfix_attr(uint64_t ino);
/* The inode a name leads to, or the lookup's error. */
int64_t fsfix_lookup(uint64_t dir, const char *name);
/* Whether the store still has inode ino (purged ones are gone). */
int fsfix_stored(uint64_t ino);
int64_t fsfix_ns(struct timespec ts);
/* len bytes of 'n', terminated, in buf. */
char *fsfix_long_name(char *buf, size_t len);

#endif
