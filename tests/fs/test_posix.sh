#!/bin/bash
# test_posix.sh - run the syscall-level suite (posix_ops) on a fresh kvfs
# mount, then once more after a remount on the same image; what the first run
# left must read back the same after the remount (the bytes then come from
# the image, not the page cache). First, the reference run: the suite on a
# tmpfs, so what it asserts is what this kernel's local filesystems give.
. "$(dirname "$0")/lib.sh"
POSIX_BIN=$1
snapshot() { (cd "$MNT/run1" && find . -printf '%p %y %m %s %n %l\n' | sort &&
	find . -type f -exec md5sum {} + | sort); }
run() {
	"$POSIX_BIN" "$1"
	local rc=$?
	[ "$rc" -eq 77 ] && exit 77
	[ "$rc" -eq 0 ] || { echo "FAIL: posix_ops $2"; exit 1; }
}
mkdir "$T/ref"
mount -t tmpfs -o size=64m kvfs-ref "$T/ref" ||
	{ echo "FAIL: mount a tmpfs for the reference run"; exit 1; }
CLEANUP_EXTRA='umount "$T/ref"'
run "$T/ref" "on tmpfs, the reference (the suite asserts what this kernel does not)"
umount "$T/ref"
CLEANUP_EXTRA=:
kvfs_mkfs
kvfs_mount
mkdir "$MNT/run1"
run "$MNT/run1" "on a fresh mount"
snapshot > "$T/before"
kvfs_umount
kvfs_mount
snapshot > "$T/after"
diff "$T/before" "$T/after" || { echo "FAIL: the first run's files changed across a remount"; exit 1; }
mkdir "$MNT/run2"
run "$MNT/run2" "after a remount"
kvfs_umount
