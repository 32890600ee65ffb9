#!/bin/bash
# test_crash.sh - kill -9 the daemon during a mixed workload, 20 rounds,
# across the durability modes, every other one with -o compress (half the
# files' bytes compress). After each kill: remount, every file fsync'd
# before the kill is intact, every file reads without error, what the run
# left is a prefix of its steps (acknowledged changes lost only whole and in
# order, with a window: never torn), and the orphans of the dead run are
# freed at mount.
. "$(dirname "$0")/lib.sh"
BIN=$1
ROUNDS=${KVFS_CRASH_ROUNDS:-$(depth 20 6)}
MODES=(fsync full none)
kvfs_mkfs
fails=0
for round in $(seq 1 "$ROUNDS"); do
	mode=${MODES[$((round % 3))]}
	# every other round stores the blocks that shrink compressed
	[ $((round % 2)) -eq 0 ] && mode=$mode,compress
	kvfs_mount -o durability=$mode
	pid=$(kvfs_pid)
	[ -n "$pid" ] || { echo "FAIL: no daemon pid"; exit 1; }
	"$BIN" run "$MNT" "$T/log" "$round" &
	worker=$!
	sleep "0.$((RANDOM % 9 + 1))"
	kill -9 "$pid"
	wait "$worker"
	rc=$?
	[ "$rc" -le 1 ] || { echo "FAIL: round $round: worker exit $rc"; fails=$((fails + 1)); }
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
	kvfs_wait_closed
	if [ -n "${FSCK_BIN:-}" ] && ! "$FSCK_BIN" -n "$IMG" >"$T/fsck.out" 2>&1; then
		cat "$T/fsck.out"
		echo "FAIL: round $round ($mode): fsck -n after the kill"
		fails=$((fails + 1))
	fi
	kvfs_mount -o durability=$mode
	if ! "$BIN" check "$MNT" "$T/log" "$round"; then
		echo "FAIL: round $round ($mode)"
		fails=$((fails + 1))
	fi
	if [ -n "${FSCK_BIN:-}" ] && ! "$FSCK_BIN" -n "$IMG" >"$T/fsck.out" 2>&1; then
		cat "$T/fsck.out"
		echo "FAIL: round $round ($mode): fsck -n of the live image"
		fails=$((fails + 1))
	fi
	orphans=$(mdb_stat -n -s orphan "$IMG" | sed -n 's/^ *Entries: //p')
	if [ "${orphans:-x}" != 0 ]; then
		echo "FAIL: round $round: $orphans orphans left after mount"
		fails=$((fails + 1))
	fi
	kvfs_umount
done
echo "$((ROUNDS - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
