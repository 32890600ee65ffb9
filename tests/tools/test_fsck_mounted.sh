#!/bin/bash
# test_fsck_mounted.sh - fsck.kvfs on an image the daemon has mounted: -n
# checks one consistent snapshot (exit 0: with files of every kind, with an
# open unlinked file on the orphan list, and while another process writes),
# a repair is refused (exit 8, the image untouched); once unmounted, -n and
# -y find it clean. Skipped (77) where /dev/fuse is missing.
#
# usage: test_fsck_mounted.sh FSCK   (KVFS_BIN, MKFS_BIN in the environment)
FSCK=$1
. "$(dirname "$0")/../fs/lib.sh"
run_fsck() { # WANT NAME ARGS...
	local want=$1 name=$2 got
	shift 2
	"$FSCK" "$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" -eq "$want" ]; then
		ok
	else
		bad "$name: fsck $* exited $got, wanted $want"
		sed 's/^/    /' "$T/out" "$T/err" | head -30
	fi
}

kvfs_mkfs
kvfs_mount
mkdir -p "$MNT/a/b"
echo hello >"$MNT/a/b/f"
ln "$MNT/a/b/f" "$MNT/a/g"
ln -s f "$MNT/a/b/s"
mkfifo "$MNT/p"
dd if=/dev/urandom of="$MNT/big" bs=1M count=3 status=none
truncate -s 10M "$MNT/sparse"
printf 'x%.0s' {1..5000} | dd of="$MNT/sparse" bs=1 seek=7000000 conv=notrunc status=none
for i in $(seq 200); do echo "$i" >"$MNT/a/f$i"; done
command -v setfattr >/dev/null && setfattr -n user.k -v v "$MNT/a/b/f"
mv "$MNT/a/b" "$MNT/moved"
rm "$MNT/a/f7"

run_fsck 0 "mounted: -n is clean" -n "$IMG"
expect "mounted: -n saw the files" grep -q "inodes, 3 directories" "$T/out"

# an open unlinked file: on the orphan list, a note only
exec 3<"$MNT/big"
rm "$MNT/big"
run_fsck 0 "mounted, open unlinked file: -n is clean" -n "$IMG"
expect "the orphan is a note" grep -q "^note: inode .*orphan with no links" "$T/out"

# repairs are refused while mounted; the image is not touched (after the
# lazy work of the rm above, the unlinked file's new ctime, is committed:
# within 50 ms)
sleep 0.5
cp "$IMG" "$T/before"
run_fsck 8 "mounted: -y refused" -y "$IMG"
expect "-y refused: says why" grep -q "in use: it is mounted on $MNT; .*unmount it" "$T/err"
run_fsck 8 "mounted: -p refused" -p "$IMG"
expect "refused repairs: image untouched" cmp -s "$IMG" "$T/before"

# a consistent snapshot while another process writes
(
	for i in $(seq 400); do
		echo "$i" >"$MNT/w$i"
		mkdir "$MNT/wd$i"
		[ $((i % 3)) -eq 0 ] && rm "$MNT/w$((i - 1))" && rmdir "$MNT/wd$((i - 2))"
	done
) &
writer=$!
for n in 1 2 3 4 5; do
	run_fsck 0 "mounted, while writing: -n is clean ($n)" -n "$IMG"
done
wait "$writer"
run_fsck 0 "mounted, after the writes: -n is clean" -n "$IMG"

exec 3<&-
kvfs_umount
run_fsck 0 "unmounted: -n is clean" -n "$IMG"
run_fsck 0 "unmounted: -y is clean" -y "$IMG"
kvfs_mount
expect "still mounts, files intact" grep -qx hello "$MNT/moved/f"
kvfs_umount

kvfs_results
