#!/bin/bash
# test_difftest.sh - the differential tester, bounded for CI (about a minute):
# seeds 1..A with -o writeback (the kernel's writeback cache), then seeds
# A+1..B with -o nowriteback (the default), then a few with -o strictatime
# (kvfs updates atime on every read it sees), then some with a window of a
# minute, with and without the writeback cache (every read meets changes
# told but not committed: the window's read-your-writes), and last some on
# an image of 4096-byte blocks (tmpfs's page size) with SEEK_DATA and
# SEEK_HOLE in the mix (--seek), then some with -o compress on an image of
# 16360-byte blocks (mkfs -O compress's), each run against tmpfs and
# compared again after a remount.
# POSIX ACLs and the umask of creates are in every run's mix (acl_ops.c).
# Every seed must agree; a failure prints the seed and its reduced sequence.
#
#   bash test_difftest.sh DIFFTEST_BIN
#
# Environment: KVFS_BIN, MKFS_BIN; KVFS_DIFFTEST_SEEDS (default 75),
# KVFS_DIFFTEST_NOWB_SEEDS (40), KVFS_DIFFTEST_ATIME_SEEDS (8) and
# KVFS_DIFFTEST_WINDOW_SEEDS (12, twice), KVFS_DIFFTEST_SEEK_SEEDS (30) seeds of
# KVFS_DIFFTEST_OPS (2000) ops each; a fifth of the seeds (at least one of
# each kind) at KVFS_TEST_DEPTH=quick (lib.sh). Long runs: difftest --minutes 60 MNT/dir /dev/shm/dir by hand.
. "$(dirname "$0")/../fs/lib.sh"
BIN=$1
WB=${KVFS_DIFFTEST_SEEDS:-75}
NOWB=${KVFS_DIFFTEST_NOWB_SEEDS:-40}
ATIME=${KVFS_DIFFTEST_ATIME_SEEDS:-8}
WIN=${KVFS_DIFFTEST_WINDOW_SEEDS:-12}
SEEK=${KVFS_DIFFTEST_SEEK_SEEDS:-30}
ZSTD=${KVFS_DIFFTEST_COMPRESS_SEEDS:-20}
DT_ARGS=
OPS=${KVFS_DIFFTEST_OPS:-2000}
fifth() { depth "$1" $((($1 + 4) / 5)); }
WB=$(fifth "$WB") NOWB=$(fifth "$NOWB") ATIME=$(fifth "$ATIME")
WIN=$(fifth "$WIN") SEEK=$(fifth "$SEEK") ZSTD=$(fifth "$ZSTD")
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" != tmpfs ]; then
	echo "SKIP: no tmpfs at /dev/shm for the reference"
	exit 77
fi
REF=$(mktemp -d /dev/shm/kvfs-difftest.XXXXXX)
remove_ref() { rm -rf "$REF"; }
CLEANUP_EXTRA=remove_ref

# the remount difftest runs after each seed, with the options of the moment
if [ -n "$PGDB" ]; then # a database (lib.sh): no lock to wait for, the daemon to go
	closed="pgrep -f -- ' $MNT( |\$)' >/dev/null || break"
else
	closed="flock -n -x '$IMG' true 2>/dev/null && break"
fi
cat > "$T/remount" <<EOF
#!/bin/bash
fusermount3 -u "$MNT" || exit 1
for i in \$(seq 300); do $closed; sleep 0.1; done
exec "$KVFS_BIN" "$IMG" "$MNT" \$(cat "$T/opts")
EOF
chmod +x "$T/remount"

run() { # first last [mount options]
	local first=$1 last=$2 rc
	shift 2
	echo "$*" > "$T/opts"
	kvfs_mount "$@"
	mkdir "$MNT/d"
	mkdir -p "$REF/d"
	# shellcheck disable=SC2086
	"$BIN" --ops "$OPS" --remount "$T/remount" --seeds "$first-$last" $DT_ARGS "$MNT/d" "$REF/d"
	rc=$?
	[ "$rc" -eq 0 ] || { echo "FAIL: difftest ${*:-(default options)}: exit $rc"; exit 1; }
	rm -rf "$MNT/d" "$REF/d"
	kvfs_umount
}

kvfs_mkfs
run 1 "$WB" -o writeback
run $((WB + 1)) $((WB + NOWB)) -o nowriteback
run $((WB + NOWB + 1)) $((WB + NOWB + ATIME)) -o strictatime
first=$((WB + NOWB + ATIME + 1))
run "$first" $((first + WIN - 1)) -o window=60000,writeback
run $((first + WIN)) $((first + 2 * WIN - 1)) -o window=60000,nowriteback
# SEEK_DATA/SEEK_HOLE: answered by kvfs only without the writeback cache,
# and comparable with tmpfs's pages only for blocks of a page
kvfs_mkfs -b 4096
first=$((first + 2 * WIN))
DT_ARGS=--seek
run "$first" $((first + SEEK - 1)) -o nowriteback
# blocks stored compressed (a third of the writes compress): the image of
# mkfs -O compress's block size, with and without the writeback cache
kvfs_mkfs -b 16360
first=$((first + SEEK))
DT_ARGS=
run "$first" $((first + ZSTD / 2 - 1)) -o compress,writeback
run $((first + ZSTD / 2)) $((first + ZSTD - 1)) -o compress=zstd:1,nowriteback
