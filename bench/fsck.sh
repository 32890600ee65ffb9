#!/bin/bash
# fsck.sh - time fsck.kvfs -n on an image of N inodes (default 1,000,000)
# made by tests' mkimage through the kv API: 1,000 directories of 999 files
# of 64-263 bytes (one block each), an xattr on every 100th file. Prints the
# median of 3 runs with the image in the page cache (warm) and with the
# image's pages dropped from it first (cold: this file only, by
# POSIX_FADV_DONTNEED through dd's nocache flag).
#
# usage: bench/fsck.sh [BUILD_DIR] [INODES]    (BUILD_DIR default ./build)
set -euo pipefail
BUILD=${1:-build}
N=${2:-1000000}
FSCK=$BUILD/tools/fsck.kvfs
MKIMAGE=$BUILD/tests/mkimage
T=$(mktemp -d /tmp/kvfs-fsck-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
IMG=$T/big.img

t0=$(date +%s.%N)
"$MKIMAGE" -n "$N" "$IMG"
t1=$(date +%s.%N)
printf 'image: %s inodes, %s MiB, made in %.1f s\n' "$N" $(($(stat -c %s "$IMG") >> 20)) \
	"$(awk "BEGIN {print $t1 - $t0}")"

median() { sort -n | sed -n 2p; }
run() { # cold|warm: prints the seconds of one fsck -n
	[ "$1" = cold ] && dd if="$IMG" iflag=nocache count=0 status=none
	local a b
	a=$(date +%s.%N)
	"$FSCK" -n "$IMG" >/dev/null
	b=$(date +%s.%N)
	awk "BEGIN {printf \"%.3f\", $b - $a}"
	echo
}
"$FSCK" -n "$IMG" | tail -1
if [ -x /usr/bin/time ]; then
	/usr/bin/time -f 'max RSS of fsck -n: %M KiB' "$FSCK" -n "$IMG" >/dev/null
fi
for mode in warm cold; do
	times=$(for i in 1 2 3; do run $mode; done)
	printf '%s: median of 3 %.2f s (runs: %s)\n' "$mode" "$(echo "$times" | median)" \
		"$(echo $times)"
done
