#!/bin/bash
# test_powerloss.sh - power loss, simulated: for durability=full, fsync and
# fsync with a 200 ms window, run a mixed workload on a kvfs mount whose
# daemon has the write recorder (wrec.so) preloaded, then build the images a
# disk could hold after a cut at chosen points of the run (pl_replay) and
# check each: fsck.kvfs -n exits 0, kvfs-dump exports it, every file fsync'd
# before the cut is intact, and the tree is the namespace after some prefix
# of the workload's steps, from the last one a sync covered (in full: the
# last one acknowledged) to the one under way: acknowledged changes are lost
# only whole and in order.
#
#   test_powerloss.sh WREC_SO PL_WORKER PL_REPLAY
#
# Environment: KVFS_POWERLOSS_MODES (default "full,writeback fsync,writeback
# fsync,window=200,writeback fsync,writeback,compress":
# each the value of -o durability=, so it may carry more options; add "none"
# to measure it: reported, never failed on, no image kept), KVFS_POWERLOSS_OPS
# (workload ops: 1500, 800 in a sanitizer build, whose daemon is slower),
# KVFS_POWERLOSS_POINTS (crash points per mode: 180, 60 in a sanitizer build,
# whose fsck and dump are slower, a third of that at KVFS_TEST_DEPTH=quick;
# 0: every sync and as many more),
# KVFS_POWERLOSS_SEED (default: random, printed). A failing image
# is kept with the log and the base copy under /tmp/kvfs-powerloss.*, with
# the command that rebuilds it. Each mode's time is printed.
#
# The modes run with the writeback cache: the workload's step "write, then
# close" then reaches kvfs as one WRITE at close. Without the cache (the
# default mount) the kernel may send one write(2) as several WRITEs (seen:
# 45,056 of a 49,555-byte write), each its own change, so a cut may leave
# part of a write(2) that was still under way, as on any Linux filesystem;
# the step check keeps digests, not contents, and cannot tell that from a
# torn step yet.
. "$(dirname "$0")/../fs/lib.sh"
SHIM=$1 WORKER=$2 REPLAY=$3
: "${FSCK_BIN:?}" "${DUMP_BIN:?}"
MODES=${KVFS_POWERLOSS_MODES:-full,writeback fsync,writeback fsync,window=200,writeback fsync,writeback,compress}
SEED=${KVFS_POWERLOSS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}

# A sanitizer build's runtime must be the first library loaded, before the
# shim (which then sits between it and libc in the chain of write hooks).
PRELOAD=$SHIM
POINTS=${KVFS_POWERLOSS_POINTS:-180}
OPS=${KVFS_POWERLOSS_OPS:-1500}
asan=$(ldd "$KVFS_DAEMON" | sed -n 's/^\s*libasan\.so[^ ]* => \([^ ]*\).*/\1/p')
if [ -n "$asan" ]; then
	PRELOAD="$asan:$SHIM"
	POINTS=${KVFS_POWERLOSS_POINTS:-60}
	OPS=${KVFS_POWERLOSS_OPS:-800}
fi
POINTS=$(depth "$POINTS" $(((POINTS + 2) / 3))) # quick: a third of the points

KEEP=$(mktemp -d /tmp/kvfs-powerloss.XXXXXX)
keep_cleanup() { rmdir "$KEEP" 2>/dev/null; }
CLEANUP_EXTRA=keep_cleanup
echo "seed $SEED"
passes=0 fails=0
for mode in $MODES; do
	start=$(date +%s%N)
	kvfs_mkfs
	cp "$IMG" "$T/base"
	: >"$T/log"
	KVFS_WREC_IMAGE=$IMG KVFS_WREC_LOG=$T/log LD_PRELOAD=$PRELOAD \
		"$KVFS_BIN" "$IMG" "$MNT" -o durability="$mode" ||
		{ echo "FAIL: $mode: mount with the recorder"; exit 1; }
	mountpoint -q "$MNT" || { echo "FAIL: $mode: not mounted"; exit 1; }
	if ! "$WORKER" "$MNT" "$T/log" "$SEED" "$OPS"; then
		echo "FAIL: $mode: the workload"
		fails=$((fails + 1))
	fi
	kvfs_umount
	ran=$(date +%s%N)
	mkdir -p "$T/work"
	keep=(-k "$KEEP")
	[ "${mode%%,*}" = none ] && keep=()
	# full: every step is durable once acknowledged
	acked=()
	[ "${mode%%,*}" = full ] && acked=(-a)
	"$REPLAY" "${acked[@]}" -s "$SEED" -n "$POINTS" -F "$FSCK_BIN" -D "$DUMP_BIN" \
		-w "$T/work" "${keep[@]}" -f "$IMG" "$T/log" "$T/base" >"$T/replay.out" 2>&1
	rc=$?
	sed "s/^/$mode: /" "$T/replay.out"
	if [ "$rc" -ne 0 ] && ls "$KEEP"/crash-* >/dev/null 2>&1; then
		mkdir -p "$KEEP/$mode"
		mv "$KEEP"/crash-* "$KEEP/$mode/"
		cp "$T/log" "$T/base" "$KEEP/$mode/"
		echo "$mode: kept in $KEEP/$mode; rebuild one image with:"
		echo "  $REPLAY ${acked[*]} -s $SEED -F $FSCK_BIN -D $DUMP_BIN -w DIR" \
			"-p POINT -v VARIANT $KEEP/$mode/log $KEEP/$mode/base"
	fi
	if [ "${mode%%,*}" = none ]; then
		echo "$mode: report only (not power-safe by design), replay exit $rc"
	elif [ "$rc" -eq 0 ]; then
		echo "ok - $mode: every crash image consistent, every fsync'd change there," \
			"acknowledged ones lost only whole and in order"
		passes=$((passes + 1))
	else
		echo "FAIL: $mode: replay exit $rc"
		fails=$((fails + 1))
	fi
	rm -rf "$T/work"
	now=$(date +%s%N)
	echo "$mode: workload $(((ran - start) / 1000000)) ms, replay $(((now - ran) / 1000000)) ms"
done
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
