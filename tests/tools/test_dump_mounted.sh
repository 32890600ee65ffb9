#!/bin/bash
# test_dump_mounted.sh - the tools against the daemon: an image made by
# mkfs.kvfs -d mounts and shows the source tree, ACLs too, and ACLs set
# through the mount come out of an export; kvfs-dump export (directory
# and tar) and backup of a mounted image while a writer runs give one
# consistent snapshot (a set of files switched by one rename is all-old or
# all-new), do not stall the writer, and the backup opens, mounts and checks;
# blocks shared through the mount (cp: copy_file_range) are shown, and
# export and backup give the files byte for byte as the mount reads them;
# so do they on an image made with mkfs -O compress (its tree copied
# compressed, what the mount writes and shares compressed too).
#
# Environment: KVFS_BIN, MKFS_BIN, DUMP_BIN; FSCK_BIN when fsck.kvfs is built.
. "$(dirname "$0")/../fs/lib.sh"
. "$(dirname "$0")/lib_tree.sh"
: "${DUMP_BIN:?}"
DUMP=$DUMP_BIN
WRITER_PID=
stop_writer() {
	[ -n "$WRITER_PID" ] || return 0
	touch "$T/stop"
	wait "$WRITER_PID"
	local rc=$?
	WRITER_PID=
	return $rc
}
CLEANUP_EXTRA=stop_writer

# ---- an image made from a tree, through the daemon
make_tree "$T/src"
"$MKFS_BIN" -q -f -d "$T/src" "$IMG" || { echo "FAIL: mkfs -d"; exit 1; }
kvfs_mount
same_tree "$T/src" "$MNT" "mounted mkfs -d image"
check "mounted: sparse file has few blocks" [ "$(du -k "$MNT/sparse" | cut -f1)" -lt 256 ]
check "mounted: hard links share an inode" \
	[ "$(stat -c %i "$MNT/hardlink")" = "$(stat -c %i "$MNT/dir/sub/hard2")" ]
echo changed >>"$MNT/dir/file"
check "mounted: the image takes writes" grep -q changed "$MNT/hardlink"
if [ "$HAVE_ACL" = 1 ]; then
	# ACLs set through the mount (and one a new directory inherits) come out
	# of a snapshot of it: in a directory, and in a tar GNU tar --acls reads
	setfacl -m u:4321:r,g:8765:rw "$MNT/dir/file"
	setfacl -d -m u:4321:rwx "$MNT/dir/sub"
	mkdir "$MNT/dir/sub/new"
	sync -f "$MNT"
	acls "$MNT" >"$T/acl.m"
	check "mounted: the ACLs set" grep -q "^default:user:4321:rwx" "$T/acl.m"
	check "mounted: export to a directory" exit_is 0 "$DUMP" "$IMG" export "$T/acl.d"
	acls "$T/acl.d" >"$T/acl.x"
	check "mounted: exported ACLs equal" diff "$T/acl.m" "$T/acl.x"
	check "mounted: export to a tar archive" exit_is 0 "$DUMP" "$IMG" export "$T/acl.tar"
	mkdir "$T/acl.t"
	tar -C "$T/acl.t" --acls -xpf "$T/acl.tar" 2>/dev/null
	acls "$T/acl.t" >"$T/acl.x"
	check "mounted: ACLs through tar --acls equal" diff "$T/acl.m" "$T/acl.x"
fi
kvfs_umount

# ---- shared blocks made through the mount: cp within it shares blocks
# (copy_file_range), a copy of a copy borrows from the first file, a part
# copied into the middle of another file, a write into a copy gives it
# blocks of its own, and the original is deleted (its blocks stay, kept
# for the copies). kvfs-dump shows the shares, and export (a directory, a
# tar) and backup give the files as the mount reads them.
kvfs_mkfs
kvfs_mount
mkdir "$MNT/sub"
head -c 1300000 /dev/urandom >"$MNT/orig" # 319 whole blocks and a short one: 320 shared
truncate -s 3M "$MNT/sparse"
head -c 200000 /dev/urandom | dd of="$MNT/sparse" bs=4072 seek=100 conv=notrunc status=none
cp "$MNT/orig" "$MNT/copy"
cp "$MNT/copy" "$MNT/sub/copy2"
cp "$MNT/sparse" "$MNT/sub/sparse-copy"
python3 - "$MNT" <<'PY' || echo "FAIL: copy_file_range into part"
import os, sys
src = os.open(os.path.join(sys.argv[1], "orig"), os.O_RDONLY)
dst = os.open(os.path.join(sys.argv[1], "part"), os.O_WRONLY | os.O_CREAT, 0o644)
os.write(dst, b"head" * 3000)
n, done = 4072 * 40, 0 # orig's blocks 7-46 as part's blocks 10-49
while done < n:
    done += os.copy_file_range(src, dst, n - done, 4072 * 7 + done, 4072 * 10 + done)
PY
not() { ! "$@"; }
has_line() { grep -qxF -- "$1" "$2" || { echo "  no line '$1' in:"; head -50 "$2"; return 1; }; }
ORIG=$(stat -c %i "$MNT/orig")
COPY=$(stat -c %i "$MNT/copy")
printf 'written into a copy' | dd of="$MNT/copy" bs=1 seek=50000 conv=notrunc status=none
rm "$MNT/orig"
sync -f "$MNT"
# the daemon frees the inode once the kernel forgets it, in a lazy commit
for i in $(seq 100); do
	"$DUMP" "$IMG" inode "$ORIG" 2>/dev/null | grep -q "^inode:          $ORIG (deleted" && break
	sleep 0.1
done
check "shares: summary" exit_is 0 "$DUMP" "$IMG" summary
cp "$T/out" "$T/share.summary"
check "shares: the copies borrow (cp used copy_file_range)" \
	grep -Eq "^extents:        [1-9][0-9]* \([1-9][0-9]* blocks borrowed\)$" "$T/out"
check "shares: the deleted original keeps its blocks" \
	grep -Eq "^deleted homes:  1 \(keeping 320 blocks for their borrowers\)$" "$T/out"
saves="[1-9][0-9]* bytes \(.*: [0-9]* borrowed blocks of 4072, stored once\)"
check "shares: summary says what sharing saves" grep -Eq "^sharing saves:  $saves$" "$T/out"
check "shares: a copy of a copy" exit_is 0 "$DUMP" "$IMG" inode /sub/copy2
check "shares: ... borrows from the deleted original" \
	has_line "extent:         blocks 0-255 from inode $ORIG (deleted) blocks 0-255" "$T/out"
check "shares: ... its flags" has_line "flags:          0x2 (borrows)" "$T/out"
check "shares: the written copy" exit_is 0 "$DUMP" "$IMG" inode "$COPY"
check "shares: ... owns the block written" grep -q "^block:          12 length 4072 ok$" "$T/out"
check "shares: ... borrows around it" \
	has_line "extent:         blocks 13-255 from inode $ORIG (deleted) blocks 13-255" "$T/out"
check "shares: the deleted original, by number" exit_is 0 "$DUMP" "$IMG" inode "$ORIG"
check "shares: ... said to be deleted" grep -q "^inode:          $ORIG (deleted: " "$T/out"
check "shares: ... lends to the part" has_line \
	"lent:           blocks 7-46 to inode $(stat -c %i "$MNT/part") (its blocks 10-49)" "$T/out"
check "shares: ... keeps 320 blocks" \
	has_line "lends:          $(grep -c '^lent:' "$T/out") (320 blocks lent)" "$T/out"
check "shares: export" exit_is 0 "$DUMP" "$IMG" export "$T/share.d"
check "shares: export is byte-identical" diff -r "$MNT" "$T/share.d"
check "shares: tar export" exit_is 0 "$DUMP" "$IMG" export "$T/share.tar"
mkdir "$T/share.t"
check "shares: tar extracts" tar -C "$T/share.t" -xf "$T/share.tar"
check "shares: tar export is byte-identical" diff -r "$MNT" "$T/share.t"
check "shares: backup" exit_is 0 "$DUMP" "$IMG" backup "$T/share.img"
check "shares: backup: summary" exit_is 0 "$DUMP" "$T/share.img" summary
shares() { grep -E "^(extents|blocks lent|deleted homes|sharing saves):" "$1"; }
check "shares: backup: the same shares" diff <(shares "$T/share.summary") <(shares "$T/out")
M2=$T/share.mnt
mkdir "$M2"
if "$KVFS_BIN" "$T/share.img" "$M2" 2>/dev/null; then
	check "shares: backup mounts and reads identically" diff -r "$MNT" "$M2"
	# a write into a copy of the backup (its block 10: the original's,
	# which copy and part borrow too) leaves the others as they were
	printf 'into the backup' | dd of="$M2/sub/copy2" bs=1 seek=40820 conv=notrunc status=none
	check "shares: backup: a write into a copy shows" not cmp -s "$MNT/sub/copy2" "$M2/sub/copy2"
	check "shares: backup: ... and leaves those it shares with" \
		cmp "$MNT/part" "$M2/part" && cmp "$MNT/copy" "$M2/copy"
	fusermount3 -u "$M2"
	kvfs_wait_closed "$T/share.img"
else
	check "shares: backup mounts" false
fi
rmdir "$M2"
kvfs_umount
check "shares: export of the unmounted image" exit_is 0 "$DUMP" "$IMG" export "$T/share.d2"
check "shares: ... the same" diff -r "$T/share.d" "$T/share.d2"
rm -rf "$T/share.d" "$T/share.d2" "$T/share.t" "$T/share.tar" "$T/share.img"

# ---- compressed blocks: the tree copied by mkfs -O compress -d reads as
# the source; the mount writes compressed blocks too (in large requests:
# a block a write covers in part is stored as it is), cp shares them, a
# write into the copy gives it a block of its own; export (a directory, a
# tar) of the mounted image, and of the unmounted one, gives every file as
# the mount reads it, and the summary counts the compressed blocks
"$MKFS_BIN" -q -f -O compress -d "$T/src" "$IMG" || { echo "FAIL: mkfs -O compress -d"; exit 1; }
kvfs_mount
same_tree "$T/src" "$MNT" "compressed mkfs -d image"
seq 1 400000 >"$T/text"
dd if="$T/text" of="$MNT/text" bs=1M status=none
cp "$MNT/text" "$MNT/dir/text-copy"
printf 'into the copy' | dd of="$MNT/dir/text-copy" bs=1 seek=70000 conv=notrunc status=none
sync "$MNT" # an fsync of the root commits the window (sync -f reaches no FUSE daemon)
check "compressed: summary (mounted)" exit_is 0 "$DUMP" "$IMG" summary
check "compressed: the feature bit" \
	grep -q "^features:       .*incompat 0x[0-9a-f]* (.*compressed blocks)$" "$T/out"
zcount=$(sed -n 's/^compressed:     \([0-9]*\) blocks: .*, ratio \([0-9.]*\)$/\1/p' "$T/out")
check "compressed: blocks counted (${zcount:-none})" [ "${zcount:-0}" -gt 100 ]
check "compressed: cp shares them" \
	grep -Eq "^extents:        [1-9][0-9]* \([1-9][0-9]* blocks borrowed\)$" "$T/out"
check "compressed: inode of the text" exit_is 0 "$DUMP" "$IMG" inode /text
check "compressed: its blocks compressed" \
	grep -q "^block:          0 length 16360 ok, compressed " "$T/out"
check "compressed: export (mounted)" exit_is 0 "$DUMP" "$IMG" export "$T/z.d"
check "compressed: export is byte-identical" diff -r --no-dereference -x fifo -x chardev \
	-x blockdev "$MNT" "$T/z.d"
check "compressed: the borrowing copy exported" cmp "$MNT/dir/text-copy" "$T/z.d/dir/text-copy"
check "compressed: tar export (mounted)" exit_is 0 "$DUMP" "$IMG" export "$T/z.tar"
mkdir "$T/z.t"
check "compressed: tar extracts" tar -C "$T/z.t" -xf "$T/z.tar"
check "compressed: tar export is byte-identical" diff -r --no-dereference -x fifo -x chardev \
	-x blockdev "$MNT" "$T/z.t"
kvfs_umount
check "compressed: export of the unmounted image" exit_is 0 "$DUMP" "$IMG" export "$T/z.d2"
check "compressed: ... the same" diff -r --no-dereference -x fifo -x chardev -x blockdev \
	"$T/z.d" "$T/z.d2"
if [ -n "${FSCK_BIN:-}" ]; then
	"$FSCK_BIN" -n "$IMG" >"$T/fsck.out" 2>&1
	check "compressed: fsck -n clean" [ $? -eq 0 ]
	check "compressed: fsck counts them" grep -q "; $zcount compressed (ratio " "$T/fsck.out"
fi
rm -rf "$T/z.d" "$T/z.d2" "$T/z.t" "$T/z.tar"

# ---- snapshots of a mounted image under a writer
kvfs_mkfs
kvfs_mount
# ballast makes an export last long enough for the writer to move on
head -c 128000000 /dev/urandom >"$MNT/ballast"
NFILES=20
# Generation g: gen.g/ holds f1..fN each "g" repeated, then the file "cur"
# naming g replaces the last by one rename (the switch of the set), then
# "solo" is replaced by one rename with g; generation g-2 is removed.
cat >"$T/writer.py" <<'PY'
import os, shutil, sys
root, n, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def put(path, data):
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.rename(path + ".tmp", path)
g = 0
while not os.path.exists(stop):
    g += 1
    d = os.path.join(root, "gen.%d" % g)
    os.mkdir(d)
    for i in range(1, n + 1):
        with open(os.path.join(d, "f%d" % i), "wb") as f:
            f.write(b"%d\n" % g * 500)
    put(os.path.join(root, "cur"), b"%d\n" % g)
    put(os.path.join(root, "solo"), b"%d\n" % g * 2000)
    if g > 2:
        shutil.rmtree(os.path.join(root, "gen.%d" % (g - 2)))
PY
python3 "$T/writer.py" "$MNT" "$NFILES" "$T/stop" &
WRITER_PID=$!
for i in $(seq 300); do [ -s "$MNT/cur" ] && break; sleep 0.1; done
gen_now() { cat "$MNT/cur"; }

# consistent DIR: one generation N is current; it and N-1 are complete (N-1
# goes only after N+1 is current; N-2 may be half removed, N+1 half
# written); no file of a generation up to N is torn; solo is from N-1 or N
# (it follows the switch).
consistent() {
	local dir=$1 n g f want bad=0
	n=$(cat "$dir/cur")
	[ -n "$n" ] || { echo "  $dir: no current generation"; return 1; }
	for g in "$n" $((n - 1)); do
		[ "$g" -ge 1 ] || continue
		[ "$(ls "$dir/gen.$g" 2>/dev/null | wc -l)" -eq "$NFILES" ] ||
			{ echo "  $dir: current $n, gen.$g incomplete"; bad=1; }
	done
	for g in $(cd "$dir" && ls -d gen.* | sed 's/gen\.//'); do
		[ "$g" -le "$n" ] || continue
		want=$(printf "$g\\n%.0s" {1..500} | md5sum)
		for f in "$dir/gen.$g"/f*; do
			[ -e "$f" ] || continue
			[ "$(md5sum <"$f")" = "$want" ] || { echo "  $f: torn"; bad=1; }
		done
	done
	g=$(head -1 "$dir/solo")
	[ "$g" -eq "$n" ] || [ "$g" -eq $((n - 1)) ] || { echo "  solo $g, cur $n"; bad=1; }
	[ "$(sort -u "$dir/solo" | wc -l)" -eq 1 ] || { echo "  solo torn"; bad=1; }
	cmp -s "$dir/ballast" "$T/ballast.want" || { echo "  ballast differs"; bad=1; }
	return $bad
}
cp "$MNT/ballast" "$T/ballast.want"

before=$(gen_now)
check "export while writing" exit_is 0 "$DUMP" "$IMG" export "$T/live"
# the writer goes on (its snapshot does not block it); a fast export may end
# before the next generation, so allow it a few seconds after
for i in $(seq 100); do
	after=$(gen_now)
	[ "$after" -gt "$before" ] && break
	sleep 0.1
done
check "export did not stall the writer (generations $before..$after)" [ "$after" -gt "$before" ]
check "export is one snapshot" consistent "$T/live"
rm -rf "$T/live"

check "tar export while writing" exit_is 0 "$DUMP" "$IMG" export "$T/live.tar"
mkdir "$T/live-tar"
check "tar extracts" exit_is 0 tar -C "$T/live-tar" -xpf "$T/live.tar"
check "tar export is one snapshot" consistent "$T/live-tar"
rm -rf "$T/live.tar" "$T/live-tar"

check "backup while writing" exit_is 0 "$DUMP" "$IMG" backup "$T/backup.img"
check "backup reports itself" grep -q "^backed up '.*' to '.*backup.img'" "$T/out"
check "views of the mounted image" exit_is 0 "$DUMP" "$IMG" summary
check "tree of the mounted image" exit_is 0 "$DUMP" "$IMG" tree
check "inode of the mounted image" exit_is 0 "$DUMP" "$IMG" inode /ballast
check "writer ran without error" stop_writer
check "writer made generations ($(gen_now))" [ "$(gen_now)" -gt 3 ]

# the backup: an image of its own, consistent, smaller than the live one
check "backup: summary" exit_is 0 "$DUMP" "$T/backup.img" summary
check "backup: export" exit_is 0 "$DUMP" "$T/backup.img" export "$T/from-backup"
check "backup is one snapshot" consistent "$T/from-backup"
rm -rf "$T/from-backup"
if [ -n "${FSCK_BIN:-}" ]; then
	"$FSCK_BIN" -n -f "$T/backup.img" >"$T/fsck.out" 2>&1
	rc=$?
	check "backup passes fsck (exit $rc)" [ "$rc" -eq 0 ]
	[ "$rc" -eq 0 ] || cat "$T/fsck.out"
fi
mkdir "$T/mnt2"
if "$KVFS_BIN" "$T/backup.img" "$T/mnt2"; then
	check "backup mounts and is one snapshot" consistent "$T/mnt2"
	check "backup takes writes" sh -c "echo x >'$T/mnt2/new'"
	fusermount3 -u "$T/mnt2"
	for i in $(seq 300); do flock -n -x "$T/backup.img" true && break; sleep 0.1; done
else
	check "backup mounts" false
fi
check "backup refuses an existing file" exit_is 8 "$DUMP" "$IMG" backup "$T/backup.img"
check "backup: refusal names it" grep -q "backup.img' exists" "$T/err"
kvfs_umount

summary
