#!/bin/bash
# test_bigdir.sh - a directory of 100,000 entries: create, lookup, full
# readdir, unlink all. durability=none: this tests names, not syncs.
# KVFS_TEST_DEPTH=quick (the sanitizer pass): 5,000, still several dirent
# pages deep.
. "$(dirname "$0")/lib.sh"
BIN=$1
# A sanitizer build's write costs ~5 ms, not ~0.1 (LMDB allocates 3 MiB of
# lists for every nested transaction, which ASan maps and poisons afresh):
# 100,000 entries took over 900 s there, so its full depth is 20,000.
FULL=100000
ldd "$KVFS_DAEMON" | grep -q libasan && FULL=20000
N=${KVFS_BIGDIR_N:-$(depth $FULL 5000)}
kvfs_mkfs
kvfs_mount -o durability=none
mkdir "$MNT/big"
"$BIN" "$MNT/big" "$N" || exit 1
kvfs_umount
