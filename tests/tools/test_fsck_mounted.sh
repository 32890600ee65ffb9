#!/bin/bash
# test_fsck_mounted.sh - fsck.kvfs on an image the daemon has mounted: -n
# checks one consistent snapshot (exit 0: with files of every kind, with an
# open unlinked file on the orphan list, and while another process writes),
# a repair is refused (exit 8, the image untouched); once unmounted, -n and
# -y find it clean. Then xattr names an older kvfs stored: fsck keeps them in
# every mode and the daemon reads, lists and removes them (but sets no such
# name). Then ACLs fsck drops: those a mount cannot remove (-p), a damaged
# one the daemon refuses to chmod under (-y). Skipped (77) where /dev/fuse
# is missing.
#
# usage: test_fsck_mounted.sh FSCK FSCK_BREAK   (KVFS_BIN, MKFS_BIN in the
# environment)
FSCK=$1
BRK=$2
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
# what a snapshot holds is what was committed: the window, once an fsync
# (here of the root directory) committed it
sync "$MNT"

run_fsck 0 "mounted: -n is clean" -n "$IMG"
expect "mounted: -n saw the files" grep -q "inodes, 3 directories" "$T/out"

# shared blocks: a copy within the mount borrows the original's blocks (cp
# uses copy_file_range); a copy of the copy borrows them too
cp "$MNT/big" "$MNT/big.copy" && cp "$MNT/big.copy" "$MNT/a/big.copy2"
md5=$(md5sum <"$MNT/big")
sync "$MNT"
run_fsck 0 "mounted, shared blocks: -n is clean" -n "$IMG"
n=$((($(stat -c %s "$MNT/big") + 4071) / 4072)) # its blocks, a short last one too
expect "mounted, shared blocks: counted" grep -q "; $((2 * n)) blocks borrowed from $n shared" \
	"$T/out"

# an open unlinked file: on the orphan list, a note only (it lends its
# blocks: once freed, they stay while borrowed)
exec 3<"$MNT/big"
rm "$MNT/big"
sync "$MNT"
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
		if [ $((i % 40)) -eq 0 ]; then # shares come and go too
			cp "$MNT/big.copy" "$MNT/cp$i" && rm -f "$MNT/cp$((i - 80))"
			dd if=/dev/zero of="$MNT/cp$i" bs=4072 seek=$((i % 700)) count=3 conv=notrunc \
				status=none
		fi
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
expect "the copies read as the removed original" \
	eval '[ "$(md5sum <"$MNT/big.copy")" = "$md5" ] && [ "$(md5sum <"$MNT/a/big.copy2")" = "$md5" ]'
kvfs_umount

# names outside the namespaces and a prefix alone, as an older kvfs stored
# them (planted raw: kvfs sets no such name now; values of zero bytes)
"$BRK" "$IMG" xattr /moved/f foo.bar 3 && "$BRK" "$IMG" xattr /moved/f user. 2 &&
	"$BRK" "$IMG" xattr /a x 1 || bad "plant old xattr names"
for m in -n -p -y; do
	run_fsck 0 "old xattr names: fsck $m" $m "$IMG"
	expect "old xattr names: fsck $m warns of all three" \
		[ "$(grep -c "^warning: inode .* (kvfs sets no such name)" "$T/out")" = 3 ]
done
kvfs_mount
expect "old xattr names: the daemon reads, lists and removes them, sets none" \
	/usr/bin/python3 - "$MNT/moved/f" "$MNT/a" <<'PY'
import errno, os, sys
f, d = sys.argv[1], sys.argv[2]
def refused(want, call, *args):
    try:
        call(*args)
    except OSError as e:
        assert e.errno == want, (call.__name__, args, errno.errorcode[e.errno])
    else:
        raise AssertionError((call.__name__, args, "succeeded"))
def names(p):
    return sorted(n for n in os.listxattr(p) if n != "user.k")
assert names(f) == ["foo.bar", "user."] and names(d) == ["x"], (names(f), names(d))
assert os.getxattr(f, "foo.bar") == b"\0" * 3 and os.getxattr(f, "user.") == b"\0" * 2
assert os.getxattr(d, "x") == b"\0"
refused(errno.EOPNOTSUPP, os.setxattr, f, "foo.bar", b"new")
refused(errno.EOPNOTSUPP, os.setxattr, d, "x", b"new", os.XATTR_REPLACE)
refused(errno.EINVAL, os.setxattr, f, "user.", b"new")
assert os.getxattr(f, "foo.bar") == b"\0" * 3
os.removexattr(f, "foo.bar")
os.removexattr(f, "user.")
os.removexattr(d, "x")
refused(errno.EOPNOTSUPP, os.getxattr, f, "foo.bar")
refused(errno.EINVAL, os.getxattr, f, "user.")
refused(errno.EOPNOTSUPP, os.removexattr, d, "x")
assert names(f) == [] and names(d) == [], (names(f), names(d))
PY
kvfs_umount
run_fsck 0 "old xattr names removed through the mount: fsck -n" -n "$IMG"
expect "old xattr names removed: no warning left" eval '! grep -q "^warning:" "$T/out"'

# ACLs fsck drops: one on a symlink and a default ACL on a file (which the
# kernel never sets) a mount cannot remove, so -p drops them; a damaged one
# makes the daemon refuse chmod (EIO) until -y drops it
A=system.posix_acl_access
"$BRK" "$IMG" acl /moved/s $A u::rw,u:5:r,g::r,m::r,o::r &&
	"$BRK" "$IMG" acl /moved/f system.posix_acl_default u::rw,u:5:r,g::r,m::r,o::r &&
	"$BRK" "$IMG" xattr /a/f1 $A 12 || bad "plant ACLs"
kvfs_mount
setfattr -h -x $A "$MNT/moved/s" 2>/dev/null
setfattr -x system.posix_acl_default "$MNT/moved/f" 2>/dev/null
expect "damaged ACL: chmod refused" eval '! chmod 600 "$MNT/a/f1" 2>/dev/null'
kvfs_umount
run_fsck 5 "misplaced ACLs the mount left: fsck -p (1: fixed, 4: left)" -p "$IMG"
expect "misplaced ACLs: -p drops both" \
	[ "$(grep -c "ACL .* (the kernel never sets one there).  Drop it? yes" "$T/out")" = 2 ]
expect "damaged ACL: -p leaves it to -y" grep -q "ACL '$A' is damaged .* (needs -y)" "$T/out"
run_fsck 1 "damaged ACL: fsck -y" -y "$IMG"
run_fsck 0 "ACLs: clean after -y" -n "$IMG"
kvfs_mount
expect "damaged ACL dropped: chmod works" chmod 600 "$MNT/a/f1"
kvfs_umount

kvfs_results
