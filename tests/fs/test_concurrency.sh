#!/bin/bash
# test_concurrency.sh - 8 readers and 2 writers on shared files and
# directories for 10 s; contents checked during, after, and after a remount.
. "$(dirname "$0")/lib.sh"
BIN=$1
SECONDS_RUN=${KVFS_CONCURRENCY_SECONDS:-10}
kvfs_mkfs
kvfs_mount
mkdir "$MNT/c"
"$BIN" "$MNT/c" "$SECONDS_RUN" "$T/manifest" || exit 1
kvfs_umount
kvfs_mount
"$BIN" --verify "$MNT/c" "$T/manifest" || { echo "FAIL: after remount"; exit 1; }
kvfs_umount
