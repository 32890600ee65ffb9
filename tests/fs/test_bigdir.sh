#!/bin/bash
# test_bigdir.sh - a directory of 100,000 entries: create, lookup, full
# readdir, unlink all. durability=none: this tests names, not syncs.
. "$(dirname "$0")/lib.sh"
BIN=$1
N=${KVFS_BIGDIR_N:-100000}
kvfs_mkfs
kvfs_mount -o durability=none
mkdir "$MNT/big"
"$BIN" "$MNT/big" "$N" || exit 1
kvfs_umount
