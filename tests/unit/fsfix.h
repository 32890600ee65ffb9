/*
 * fsfix.h - the fixture of the unit tests of the daemon's cores that live
 * outside test_fs.c: a temporary image (tu_setup) with the global struct fs
 * set up over it as main.c would, no FUSE session; the teardown fails when
 * an inode is still referenced (a core's entry not forgotten).
 */
#ifndef KVFS_FSFIX_H
#define KVFS_FSFIX_H

#include "fs.h"

int fsfix_setup(void **state);
int fsfix_teardown(void **state);

#endif
