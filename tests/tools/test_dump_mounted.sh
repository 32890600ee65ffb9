#!/bin/bash
# test_dump_mounted.sh - the tools against the daemon: an image made by
# mkfs.kvfs -d mounts and shows the source tree, ACLs too, and ACLs set
# through the mount come out of an export; kvfs-dump export (directory
# and tar) and backup of a mounted image while a writer runs give one
# consistent snapshot (a set of files switched by one rename is all-old or
# all-new), do not stall the writer, and the backup opens, mounts and checks.
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
