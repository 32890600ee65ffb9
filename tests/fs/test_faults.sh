#!/bin/bash
# test_faults.sh - faults from outside: the image's filesystem full, an
# unreadable image, a read-only image, a bad mountpoint, a kill while the
# mount is busy. Each gives a clear error, the daemon survives where it can,
# nothing committed is lost, and fsck -n is clean after.
. "$(dirname "$0")/lib.sh"
passes=0 fails=0
expect() { local name=$1; shift; if "$@"; then passes=$((passes + 1)); else echo "FAIL: $name"; fails=$((fails + 1)); fi; }
fsck_clean() { "$FSCK_BIN" -n "$1" >"$T/fsck.out" 2>&1 || { cat "$T/fsck.out"; return 1; }; }
SMALL=$T/small
mkdir -p "$SMALL"
CLEANUP_EXTRA='mountpoint -q "$SMALL/mnt" && fusermount3 -u "$SMALL/mnt"; mountpoint -q "$SMALL" && umount -l "$SMALL"; mountpoint -q "$T/ro" && umount -l "$T/ro"'

# 1. the image's filesystem fills up
mount -t tmpfs -o size=24m tmpfs "$SMALL" || { echo "SKIP: cannot mount tmpfs"; exit 77; }
mkdir "$SMALL/mnt"
"$MKFS_BIN" -q "$SMALL/img"
"$KVFS_BIN" "$SMALL/img" "$SMALL/mnt" -o durability=none || { echo "FAIL: mount"; exit 1; }
head -c 4M /dev/urandom > "$T/keep"
cp "$T/keep" "$SMALL/mnt/keep" && sync "$SMALL/mnt/keep"
dd if=/dev/zero of="$SMALL/mnt/fill" bs=1M count=64 conv=fsync status=none 2>"$T/err"; rc=$?
expect "disk full: the write fails" [ "$rc" -ne 0 ]
expect "disk full: ENOSPC" grep -q "No space left" "$T/err"
expect "disk full: still mounted" mountpoint -q "$SMALL/mnt"
expect "disk full: earlier file intact" cmp -s "$T/keep" "$SMALL/mnt/keep"
rm -f "$SMALL/mnt/fill"
ok=1
for i in $(seq 50); do
	cp "$T/keep" "$SMALL/mnt/again" 2>/dev/null && sync "$SMALL/mnt/again" && break
	ok=0; sleep 0.1
done
expect "disk full: writes work again after rm" cmp -s "$T/keep" "$SMALL/mnt/again"
fusermount3 -u "$SMALL/mnt"
while ! flock -n -x "$SMALL/img" true; do sleep 0.1; done
expect "disk full: fsck -n clean after" fsck_clean "$SMALL/img"
"$KVFS_BIN" "$SMALL/img" "$SMALL/mnt" && {
	expect "disk full: data after remount" cmp -s "$T/keep" "$SMALL/mnt/keep"
	fusermount3 -u "$SMALL/mnt"
}
while ! flock -n -x "$SMALL/img" true; do sleep 0.1; done
umount "$SMALL"

# 2. an image its user cannot read
kvfs_mkfs
chmod 000 "$IMG"
chmod 755 "$T"
chown nobody "$MNT"
setpriv --reuid=nobody --regid=nogroup --clear-groups "$KVFS_BIN" "$IMG" "$MNT" 2>"$T/err"; rc=$?
expect "unreadable: refused (exit $rc)" [ "$rc" -eq 1 ]
expect "unreadable: says why" grep -q "Permission denied" "$T/err"
expect "unreadable: not mounted" eval '! mountpoint -q "$MNT"'
chmod 600 "$IMG"
chown root "$MNT"

# 3. a read-only image (a read-only bind mount of its directory)
kvfs_mount
echo data > "$MNT/f"
kvfs_umount
mkdir "$T/ro"
mount --bind -o ro "$T" "$T/ro" 2>/dev/null || mount -o remount,ro,bind "$T/ro"
"$KVFS_BIN" "$T/ro/img" "$MNT" 2>"$T/err"; rc=$?
expect "read-only image: read-write mount refused" [ "$rc" -eq 1 ]
expect "read-only image: says why" grep -q "Read-only file system" "$T/err"
"$KVFS_BIN" "$T/ro/img" "$MNT" -o ro 2>"$T/err"; rc=$?
expect "read-only image: -o ro mounts" [ "$rc" -eq 0 ]
expect "read-only image: reads" grep -q data "$MNT/f"
expect "read-only image: writes refused" eval '! touch "$MNT/g" 2>/dev/null'
fusermount3 -u "$MNT"
sleep 0.5
umount "$T/ro"

# 4. bad mountpoints
"$KVFS_BIN" "$IMG" "$T/no/such/dir" 2>"$T/err"; rc=$?
expect "missing mountpoint: exit 1" [ "$rc" -eq 1 ]
expect "missing mountpoint: message" grep -q "mountpoint" "$T/err"
touch "$T/file"
"$KVFS_BIN" "$IMG" "$T/file" 2>"$T/err"; rc=$?
expect "file as mountpoint: refused" [ "$rc" -ne 0 ]
expect "file as mountpoint: image free again" flock -n -x "$IMG" true

# 5. SIGTERM while the mount is busy: the daemon leaves, nothing lost
kvfs_mount
echo committed > "$MNT/c"
sync "$MNT/c"
sleep 60 < "$MNT/c" &
holder=$!
kill -TERM "$(kvfs_pid)"
kvfs_wait_closed
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
umount -l "$MNT" 2>/dev/null
expect "busy SIGTERM: fsck -n clean" fsck_clean "$IMG"
kvfs_mount
expect "busy SIGTERM: data kept" grep -q committed "$MNT/c"
kvfs_umount

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
