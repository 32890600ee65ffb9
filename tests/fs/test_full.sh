#!/bin/bash
# test_full.sh - a full filesystem: fill it, delete, write again. With and
# without the writeback cache, at max_size and on a host filesystem that is
# really full (a small tmpfs under the image), across a remount, with
# max_size below the image's size, and over several fill/delete rounds:
# deleting always works, df says what is usable, fsck -n is clean after
# each step and nothing written before is lost.
. "$(dirname "$0")/lib.sh"
: "${FSCK_BIN:?}" "${DUMP_BIN:?}"
HOST=$T/host
mkdir -p "$HOST"
CLEANUP_EXTRA='mountpoint -q "$MNT" && fusermount3 -u "$MNT"; kvfs_wait_closed "$IMG"; mountpoint -q "$HOST" && umount -l "$HOST"'

fsck_clean() { # image: fsck -n exits 0 (also on a mounted image)
	"$FSCK_BIN" -n "$1" >"$T/fsck.out" 2>&1 || { cat "$T/fsck.out"; return 1; }
}
avail_kb() { df -k --output=avail "$MNT" | tail -1 | tr -d ' '; }
map_used() { sync -f "$MNT"; "$DUMP_BIN" "$IMG" summary | awk '/^map used:/ {print $3}'; }

head -c 300000 /dev/urandom > "$T/keep"
head -c 5000000 /dev/urandom > "$T/five"
head -c 8M /dev/urandom > "$T/src8"

# fill NAME: write files into fill/ until the filesystem is full; ENOSPC,
# at close for the writeback cache, at the write without it. With the
# writeback cache a write back that fails cuts off what was stored out of
# order past it, so more files may fit after the first, and what is left
# at the end is less than one write back request.
fill() {
	local name=$1 i rc
	mkdir "$MNT/fill"
	for i in 1 2 3 4 5 6 7 8 9 10; do
		dd if=/dev/urandom of="$MNT/fill/$i" bs=64k count=4000 status=none 2>"$T/dd.err"
		rc=$?
		[ "$i" = 1 ] && cp "$T/dd.err" "$T/dd1.err"
		[ "$(avail_kb)" -lt 2048 ] && break
	done
	expect "$name: fill fails" [ "$rc" -ne 0 ]
	expect "$name: fill says ENOSPC" grep -q "No space left" "$T/dd1.err"
	# the writeback cache writes back a MiB at a time: what is left is less
	expect "$name: df says full ($(avail_kb) KiB free)" [ "$(avail_kb)" -lt 2048 ]
	expect "$name: fsck -n clean when full" fsck_clean "$IMG"
}

# rm_and_write NAME FILE: rm FILE on the full filesystem, write a new file
# and check it and the one written before the fill
rm_and_write() {
	local name=$1 file=$2
	rm -r "$MNT/$file" 2>"$T/rm.err"
	expect "$name: rm on a full filesystem ($(cat "$T/rm.err"))" [ ! -e "$MNT/$file" ]
	cp "$T/five" "$MNT/five" 2>"$T/cp.err" && sync "$MNT/five"
	expect "$name: write again after rm ($(cat "$T/cp.err"))" cmp -s "$T/five" "$MNT/five"
	expect "$name: earlier file intact" cmp -s "$T/keep" "$MNT/keep"
	rm -f "$MNT/five"
}

# round NAME: fill, rm, write again, df, fsck
round() {
	fill "$1"
	rm_and_write "$1" fill
	expect "$1: df frees the space ($(avail_kb) KiB free)" [ "$(avail_kb)" -ge $((20 << 10)) ]
	expect "$1: fsck -n clean after rm" fsck_clean "$IMG"
}

# remount_round NAME OPTS: fill, unmount full, mount again, rm, write again
remount_round() {
	fill "$1"
	kvfs_umount
	expect "$1: fsck -n clean after unmount" fsck_clean "$IMG"
	kvfs_mount -o "$2"
	rm_and_write "$1" fill
	kvfs_umount
	expect "$1: fsck -n clean at the end" fsck_clean "$IMG"
}

for cache in writeback nowriteback; do
	wb=,$cache

	# at max_size
	kvfs_mkfs
	kvfs_mount -o "max_size=48M$wb"
	cp "$T/keep" "$MNT/keep"
	for r in 1 2 3; do round "max_size $cache round $r"; done
	kvfs_umount
	kvfs_mount -o "max_size=48M$wb"
	remount_round "max_size $cache remount" "max_size=48M$wb"

	# on a full host filesystem: the image may grow until the host is full
	mount -t tmpfs -o size=40m tmpfs "$HOST" || { echo "SKIP: cannot mount tmpfs"; exit 77; }
	IMG=$HOST/img
	kvfs_mkfs
	kvfs_mount -o "durability=fsync$wb"
	cp "$T/keep" "$MNT/keep"
	for r in 1 2; do round "host full $cache round $r"; done
	kvfs_umount
	kvfs_mount -o "durability=fsync$wb"
	remount_round "host full $cache remount" "durability=fsync$wb"
	umount "$HOST"
	IMG=$T/img
done

# the writeback cache: the kernel takes data before kvfs can store it, so
# ENOSPC comes at write back. A file's size never runs ahead of its data
# (no zero-filled stretch where the data was never stored), and once write
# back failed, the next write(2) fails too instead of filling the cache.
kvfs_mkfs
kvfs_mount -o max_size=32M,writeback
cp "$T/keep" "$MNT/keep"
head -c 96M /dev/urandom > "$T/src"
dd if="$T/src" of="$MNT/f" bs=64k status=none 2>"$T/dd.err"
expect "writeback: dd fails" [ -s "$T/dd.err" ]
expect "writeback: ENOSPC at a write(2), not only at close ($(cat "$T/dd.err"))" \
	grep -q "error writing.*No space left" "$T/dd.err"
kvfs_umount
expect "writeback: fsck -n clean" fsck_clean "$IMG"
kvfs_mount -o max_size=32M,writeback
n=$(stat -c %s "$MNT/f")
expect "writeback: the file's $n bytes are what was written" cmp -n "$n" "$MNT/f" "$T/src"
expect "writeback: no more than the filesystem holds ($n bytes)" [ "$n" -le $((32 << 20)) ]
rm_and_write "writeback" f
kvfs_umount
rm -f "$T/src"

# the default has no writeback cache: every write(2) is answered by kvfs,
# so what write(2) said it wrote is exactly what the file holds after a
# remount (with -o writeback the kernel takes more than fits into its cache
# and the file is cut back when its write back fails)
kvfs_mkfs
kvfs_mount -o max_size=32M
told=$(python3 - "$MNT/f" <<-'EOF'
	import os, sys
	fd, told = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644), 0
	try:
	    while told < (64 << 20):
	        told += os.write(fd, bytes(65536))
	except OSError:
	    pass
	try:
	    os.close(fd)
	except OSError:
	    pass
	print(told)
	EOF
)
kvfs_umount
kvfs_mount -o max_size=32M
n=$(stat -c %s "$MNT/f")
expect "default: write(2) said $told bytes, the file holds $n" [ "$told" = "$n" ]
expect "default: the writes stopped at ENOSPC" [ "$n" -gt 0 -a "$n" -lt $((32 << 20)) ]
kvfs_umount

# O_DIRECT on a writeback mount: each write(2) is answered to its caller,
# so a later one failing cuts off nothing it was told was written
kvfs_mkfs
kvfs_mount -o max_size=32M,writeback
dd if=/dev/urandom of="$MNT/filler" bs=1M count=24 conv=fsync status=none
head -c 1M /dev/urandom > "$T/one"
dd if="$T/one" of="$MNT/g" bs=1M seek=8 oflag=direct conv=notrunc status=none
dd if=/dev/urandom of="$MNT/g" bs=1M count=8 oflag=direct conv=notrunc status=none 2>"$T/dd.err"
expect "O_DIRECT: the write that does not fit fails" grep -q "No space left" "$T/dd.err"
kvfs_umount
kvfs_mount -o max_size=32M,writeback
dd if="$MNT/g" of="$T/got" bs=1M skip=8 count=1 status=none
expect "O_DIRECT: what it wrote before is kept" cmp -s "$T/one" "$T/got"
kvfs_umount

# many small deletes on a full host, each followed by appends until ENOSPC:
# appends never take what a delete freed from the reserve, so every delete
# works, round after round
mount -t tmpfs -o size=40m tmpfs "$HOST" || { echo "SKIP: cannot mount tmpfs"; exit 77; }
IMG=$HOST/img
kvfs_mkfs
kvfs_mount -o nowriteback
mkdir "$MNT/s"
for i in $(seq 300); do head -c 5000 /dev/urandom > "$MNT/s/$i"; done
fill "small deletes"
failed=0
for i in $(seq 300); do
	rm "$MNT/s/$i" 2>/dev/null || { failed=$i; break; }
	dd if=/dev/zero of="$MNT/app" bs=4k count=64 oflag=append conv=notrunc status=none 2>/dev/null
done
expect "small deletes: 300 deletes, each after appends filled the room (failed at $failed)" \
	[ "$failed" = 0 ]
kvfs_umount
expect "small deletes: fsck -n clean" fsck_clean "$IMG"
umount "$HOST"
IMG=$T/img

# a commit of acknowledged changes fails (another program fills the host
# while a window holds them): they are lost, fsync says EIO, every change
# after EROFS until the next mount, which finds the last commit, fsck clean
mount -t tmpfs -o size=40m tmpfs "$HOST" || { echo "SKIP: cannot mount tmpfs"; exit 77; }
IMG=$HOST/img
kvfs_mkfs
"$KVFS_BIN" "$IMG" "$MNT" -o window=60000,nowriteback -f 2>"$T/daemon.err" &
for i in $(seq 100); do mountpoint -q "$MNT" && break; sleep 0.05; done
cp "$T/keep" "$MNT/keep" && sync "$MNT"
dd if=/dev/urandom of="$MNT/lost" bs=1M count=3 status=none
dd if=/dev/zero of="$HOST/filler" bs=1M status=none 2>/dev/null
sync "$MNT" 2>"$T/sync.err"; rc=$?
expect "failed commit: fsync fails ($rc: $(cat "$T/sync.err"))" grep -q "Input/output error" "$T/sync.err"
echo more 2>"$T/more.err" >"$MNT/more"
expect "failed commit: no more changes ($(cat "$T/more.err"))" grep -q "Read-only file system" "$T/more.err"
expect "failed commit: reads go on" cmp -s "$T/keep" "$MNT/keep"
kvfs_umount
expect "failed commit: said in the log" grep -q "a commit failed.*acknowledged" "$T/daemon.err"
rm -f "$HOST/filler"
expect "failed commit: fsck -n clean after" fsck_clean "$IMG"
kvfs_mount
expect "failed commit: the last commit's file kept" cmp -s "$T/keep" "$MNT/keep"
expect "failed commit: the lost window's file gone" [ ! -e "$MNT/lost" ]
echo more > "$MNT/more"
expect "failed commit: changes taken again after a mount" [ -s "$MNT/more" ]
kvfs_umount
umount "$HOST"
IMG=$T/img

# fallocate reserves: what it promises fits is counted as used, and is
# written later even when everything else filled up; what cannot fit is
# ENOSPC at once (posix_fallocate's promise), with or without the cache
for cache in writeback nowriteback; do
	wb=,$cache
	kvfs_mkfs
	kvfs_mount -o "max_size=32M$wb"
	fallocate -l 500M "$MNT/huge" 2>"$T/fa.err"
	expect "fallocate $cache: more than fits is ENOSPC ($(cat "$T/fa.err"))" \
		grep -q "No space left" "$T/fa.err"
	expect "fallocate $cache: nothing kept of it ($(stat -c %s "$MNT/huge" 2>&1))" \
		[ "$(stat -c %s "$MNT/huge" 2>/dev/null || echo 0)" -eq 0 ]
	rm -f "$MNT/huge"
	before=$(avail_kb)
	used_before=$(map_used)
	fallocate -l 8M "$MNT/held" 2>"$T/fa.err"
	expect "fallocate $cache: 8M fits ($(cat "$T/fa.err"))" [ ! -s "$T/fa.err" ]
	expect "fallocate $cache: df counts it ($before -> $(avail_kb) KiB free)" \
		[ "$(avail_kb)" -le $((before - (8 << 10))) ]
	# unwritten blocks: the room is kept, nothing written yet
	expect "fallocate $cache: no bytes stored ($used_before -> $(map_used) bytes in use)" \
		[ "$(map_used)" -lt $((used_before + (512 << 10))) ]
	expect "fallocate $cache: du counts it ($(du -k "$MNT/held" | cut -f1) KiB)" \
		[ "$(du -k "$MNT/held" | cut -f1)" -ge $((8 << 10)) ]
	expect "fallocate $cache: reads zeros" cmp -s -n 8388608 "$MNT/held" /dev/zero
	fill "fallocate $cache"
	dd if="$T/src8" of="$MNT/held" bs=1M conv=notrunc,fsync status=none 2>"$T/dd.err"
	expect "fallocate $cache: the space it held is written when full ($(cat "$T/dd.err"))" \
		cmp -s "$T/src8" "$MNT/held"
	kvfs_umount
	expect "fallocate $cache: fsck -n clean" fsck_clean "$IMG"
	kvfs_mount -o "max_size=32M$wb"
	expect "fallocate $cache: the data after remount" cmp -s "$T/src8" "$MNT/held"
	kvfs_umount
done

# max_size below the image's size: no growth, deletes still work
kvfs_mkfs
kvfs_mount
cp "$T/keep" "$MNT/keep"
dd if=/dev/urandom of="$MNT/big" bs=1M count=24 status=none
kvfs_umount
size=$(stat -c %s "$IMG")
kvfs_mount -o max_size=8M 2>"$T/mount.err"
expect "max_size below the image: mounts" mountpoint -q "$MNT"
dd if=/dev/urandom of="$MNT/new" bs=1M count=4 conv=fsync status=none 2>"$T/dd.err"
expect "max_size below the image: no growth" grep -q "No space left" "$T/dd.err"
rm -f "$MNT/new"
rm_and_write "max_size below the image" big
kvfs_umount
expect "max_size below the image: the image did not grow past its reserve" \
	[ "$(stat -c %s "$IMG")" -le $((size + (1 << 20))) ]
expect "max_size below the image: fsck -n clean" fsck_clean "$IMG"

kvfs_results
