#!/bin/bash
# pg_two.sh - metadata rates of one PostgreSQL-backed filesystem mounted
# twice (two hosts would), against the same work on one mount.
#
#   bench/pg_two.sh [-n FILES] [-s SIZE] [-r RUNS] [-b BUILD_DIR] [-o OPTS]
#
# Starts a throwaway cluster (tests/pg/cluster.sh: a Unix socket, fsync
# off), makes a filesystem on it, mounts it at A and at B (durability
# fsync, the default), and runs bench/fsops phases, each on fresh files:
#
#   create, 1 process, no   FILES files (open O_CREAT, SIZE bytes, close) on
#     other mount             A, before B is mounted: A sends no notices (300
#                             made first, not timed: its connections warm)
#   create, 1 process, the  the same with B mounted: each commit of A
#     other mounted           notifies B, whose kernel drops what it cached
#   create, 2 processes,    FILES each at once: on one mount, both on A; on
#     separate dirs         two mounts, one on A and one on B, a directory each
#   create, 2 processes,    the same into one directory
#     one dir
#   stat, 1 process         stat of FILES files, the kernel's dentry and inode
#   stat, 2 processes       caches dropped first (root), one or two at once
#
# and prints a Markdown table of files/s (the total of the processes; the
# median of RUNS runs, each on a new filesystem, and their range). Needs
# /dev/fuse and the server's binaries (exits 77 without them); root to drop
# caches (else the stat rows say "warm"). BUILD_DIR holds kvfs, mkfs.kvfs and fsops (default
# build-bench/, as bench/run builds it, else build/). OPTS: kvfs's -o
# options for both mounts (window=5, say).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
FILES=2000
SIZE=0
RUNS=3
BUILD=
OPTS=
while getopts "n:s:r:b:o:" o; do
	case $o in
	n) FILES=$OPTARG ;;
	s) SIZE=$OPTARG ;;
	r) RUNS=$OPTARG ;;
	b) BUILD=$OPTARG ;;
	o) OPTS=$OPTARG ;;
	*) echo "usage: $0 [-n FILES] [-s SIZE] [-r RUNS] [-b BUILD_DIR] [-o OPTS]" >&2; exit 2 ;;
	esac
done
if [ -z "$BUILD" ]; then
	BUILD=$ROOT/build-bench
	[ -x "$BUILD/bench/fsops" ] || BUILD=$ROOT/build
fi
KVFS=$BUILD/fs/kvfs MKFS=$BUILD/tools/mkfs.kvfs FSOPS=$BUILD/bench/fsops
for b in "$KVFS" "$MKFS" "$FSOPS"; do
	[ -x "$b" ] || { echo "pg_two.sh: $b missing (build first)" >&2; exit 1; }
done
[ -e /dev/fuse ] || { echo "SKIP: no /dev/fuse" >&2; exit 77; }

rc=0
out=$(bash "$ROOT/tests/pg/cluster.sh" start) || rc=$?
[ $rc -eq 0 ] || exit $rc # 77: no server
CLUSTER=$(sed -n 1p <<<"$out")
URL=$(sed -n 2p <<<"$out")
T=$(mktemp -d /tmp/kvfs-pgtwo.XXXXXX)
A=$T/a B=$T/b
mkdir -p "$A" "$B"
cleanup() {
	fusermount3 -u "$A" 2>/dev/null || true
	fusermount3 -u "$B" 2>/dev/null || true
	bash "$ROOT/tests/pg/cluster.sh" stop "$CLUSTER"
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_mounted() {
	for _ in $(seq 1 200); do
		mountpoint -q "$1" && return 0
		sleep 0.05
	done
	echo "pg_two.sh: $1 did not mount" >&2
	return 1
}

mount_a() {
	"$MKFS" -q -f "$URL" >/dev/null
	"$KVFS" "$URL" "$A" ${OPTS:+-o "$OPTS"} && wait_mounted "$A"
}

mount_b() {
	"$KVFS" "$URL" "$B" ${OPTS:+-o "$OPTS"} && wait_mounted "$B"
}

umount_both() {
	fusermount3 -u "$A"
	fusermount3 -u "$B"
}

COLD=1
drop() {
	sync
	echo 2 2>/dev/null >/proc/sys/vm/drop_caches || COLD=0
	sleep 0.2 # the FORGETs reach the daemons
}

# rate MODE DIR... : fsops MODE on each DIR at once (DIR:FROM), files/s in
# all, the wall time from the first start to the last end
rate() {
	local mode=$1 pids=() t0 t1 spec
	shift
	t0=$(date +%s%N)
	for spec in "$@"; do
		"$FSOPS" "$mode" "${spec%:*}" "${spec##*:}" "$FILES" "$SIZE" >/dev/null &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p" || { echo "pg_two.sh: fsops $mode failed" >&2; exit 1; }
	done
	t1=$(date +%s%N)
	echo $((FILES * $# * 1000000000 / (t1 - t0)))
}

declare -A R # "row col" -> list of rates

add() { R["$1|$2"]+="$3 "; }

# The directories made on A before the clock starts, and seen on B: a
# name B looked up while it was missing stays missing there until A's
# notice comes (a negative entry), and its mkdir would collide with A's.
dirs() {
	local d
	for d in c1 c2a c2b c3a c4 c5; do mkdir "$A/$d"; done
	for d in c3b c5; do
		[ "$d" = c5 ] || mkdir "$B/$d"
		for _ in $(seq 1 200); do
			[ -d "$A/$d" ] && [ -d "$B/$d" ] && break
			sleep 0.02
		done
	done
}

one_run() {
	mount_a
	mkdir "$A/c0" "$A/warm"
	# the steady state, as the rows after it: the mount's connections
	# have prepared their statements, the server has the tables cached
	"$FSOPS" creates "$A/warm" 0 300 "$SIZE" >/dev/null
	add c0 one "$(rate creates "$A/c0:0")"
	mount_b
	dirs
	add c1 one "$(rate creates "$A/c1:0")"
	add c2 one "$(rate creates "$A/c2a:0" "$A/c2b:0")"
	add c2 two "$(rate creates "$A/c3a:0" "$B/c3b:0")"
	add c3 one "$(rate creates "$A/c4:0" "$A/c4:$FILES")"
	add c3 two "$(rate creates "$A/c5:0" "$B/c5:$FILES")"
	drop
	add s1 one "$(rate stats "$A/c1:0")"
	drop
	add s2 one "$(rate stats "$A/c2a:0" "$A/c2b:0")"
	drop
	add s2 two "$(rate stats "$A/c3a:0" "$B/c3b:0")"
	umount_both
}

# the median of a cell's runs, then their range when there are several
med() {
	local v
	v=$(tr ' ' '\n' <<<"${R[$1|$2]:-}" | sed '/^$/d' | sort -n |
		awk '{a[NR] = $1} END { if (!NR) print "-"; else if (NR == 1) print a[1];
			else print a[int((NR + 1) / 2)] " (" a[1] "-" a[NR] ")" }')
	[ "$v" = - ] && { echo -; return; }
	sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$v" # thousands apart, as bench/run prints them
}

for i in $(seq 1 "$RUNS"); do
	echo "==> run $i/$RUNS" >&2
	one_run
done

warm=""
[ $COLD -eq 1 ] || warm=" (warm: caches could not be dropped)"
echo "Files/s, the total of the processes: the median of $RUNS runs (their range); $FILES files"
echo "each of $SIZE bytes; one PostgreSQL cluster on a Unix socket, fsync off; mount options:"
echo "${OPTS:-none}."
echo
echo "| job | one mount | two mounts |"
echo "|---|---:|---:|"
echo "| create, 1 process, no other mount | $(med c0 one) | - |"
echo "| create, 1 process, the other mounted | $(med c1 one) | - |"
echo "| create, 2 processes, a directory each | $(med c2 one) | $(med c2 two) |"
echo "| create, 2 processes, one directory | $(med c3 one) | $(med c3 two) |"
echo "| stat (cold dcache$warm), 1 process | $(med s1 one) | - |"
echo "| stat (cold dcache$warm), 2 processes | $(med s2 one) | $(med s2 two) |"
