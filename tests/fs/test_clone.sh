#!/bin/bash
# test_clone.sh - kvfs-clone SRC DST as a user meets it: the copy of a tree
# holding every kind of file is what cp -a makes of it (modes, owners,
# times, xattrs and ACLs, symlinks, fifos, devices, hard links within the
# tree), made without copying a block; a second user owns its copies (set-ID
# bits cleared) and is refused trees it cannot read and parents it cannot
# write, with nothing made; the errors of the tool and of the daemon's
# ioctl; copy on write both ways and a deleted original; then fsck -n and a
# remount. Runs as root (owners, devices, a second user on allow_other).
. "$(dirname "$0")/lib.sh"
export LC_ALL=C
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (owners, devices, a second user)"; exit 77; }
for c in setfacl getfattr setfattr python3; do
	command -v $c >/dev/null || { echo "SKIP: $c missing"; exit 77; }
done
: "${FSCK_BIN:?}" "${DUMP_BIN:?}" "${CLONE_BIN:?}"
kvfs_second_user
BS=4072 # mkfs's default block size

# summary FIELD: the number after "FIELD:" in kvfs-dump's summary of the
# last commit, made the mount's state: sync -f sends the kernel's dirty
# pages, an fsync of the mountpoint (sync DIR) commits the open window
summary() {
	sync -f "$MNT" && sync "$MNT"
	"$DUMP_BIN" "$IMG" summary | awk -v f="$1:" 'index($0, f) == 1 { sub(f, ""); print $1; exit }'
}
# inodes with a name: a refused clone leaves none (the inode counter may
# have moved on: numbers are never reused, not all of them used)
named() { echo $(($(summary inodes) - $(summary orphans))); }
# listing DIR: what cp -a keeps of each name below DIR (DIR itself is .),
# in name order: type, mode, owner, group, size, links, mtime, atime,
# device, symlink target, and in front the first name of its inode (empty
# for the first); then the files' bytes and every xattr, ACLs included
listing() {
	(
		cd "$1" || exit 1
		find . -print0 | sort -z |
			xargs -0 stat -c '%i|%N|%F|%a|%u|%g|%s|%h|%.9Y|%.9X|%t:%T' |
			awk -F'|' -v OFS='|' '{ i = $1; $1 = (i in first) ? first[i] : ""
				if (!(i in first)) first[i] = $2; print }'
		find . -type f -print0 | sort -z | xargs -0 -r md5sum
		find . -print0 | sort -z | xargs -0 getfattr -h -d -m - -e hex 2>&1
	)
}
# same_tree NAME A B: the listings of A and B match
same_tree() {
	listing "$2" > "$T/a.list"
	listing "$3" > "$T/b.list"
	if diff "$T/a.list" "$T/b.list" > "$T/diff"; then
		ok
	else
		bad "$1 (< $2, > $3):"
		head -40 "$T/diff"
	fi
}
# fails_with NAME MESSAGE CMD...: CMD exits 1 and its message holds MESSAGE
fails_with() {
	local name=$1 msg=$2 err rc
	shift 2
	err=$("$@" 2>&1)
	rc=$?
	if [ $rc -ne 1 ] || [[ $err != *"$msg"* ]]; then
		bad "$name: exit $rc, '$err'; wanted exit 1 and '$msg'"
	else
		ok
	fi
}
# is NAME GOT WANTED: the strings match
is() { if [ "$2" = "$3" ]; then ok; else bad "$1: got '$2', wanted '$3'"; fi; }
absent() { if [ -e "$1" ] || [ -L "$1" ]; then bad "$1 made"; else ok; fi; }

# make_tree DIR [nodev]: every kind of file, owners, set-ID bits, xattrs and
# ACLs, hard links (one with a name outside DIR), times set last
make_tree() {
	local d=$1 t
	mkdir -p "$d/a/b/c" "$d/empty-dir" "$d/sgid-dir" "$d/sticky" "$d/acl-dir"
	: > "$d/empty"
	echo small > "$d/a/small"
	head -c 5000 /dev/urandom > "$d/a/b/two-blocks"
	head -c $((3 << 20)) /dev/urandom > "$d/big" # 773 blocks, the last short
	head -c $((BS * 4)) /dev/urandom > "$d/a/b/c/four-blocks"
	truncate -s 8M "$d/sparse"
	printf x | dd of="$d/sparse" bs=1 seek=$((5 << 20)) conv=notrunc status=none
	ln -s ../big "$d/a/to-big"
	ln -s nowhere "$d/dangling"
	mkfifo "$d/a/fifo"
	ln "$d/a/fifo" "$d/fifo-again"
	ln "$d/big" "$d/a/b/c/big-again"
	ln "$d/big" "$d/a/big-thrice"
	ln "$d/a/small" "$d.outside"
	if [ "${2:-}" != nodev ]; then
		mknod "$d/a/null" c 1 3
		mknod "$d/loop" b 7 200
	fi
	echo setuid > "$d/a/suid"
	echo setgid > "$d/sgid"
	echo both > "$d/a/b/theirs"
	echo nobody > "$d/a/b/c/nobody"
	chown "$U:$G" "$d/a/b/theirs"
	chown 1234:5678 "$d/a/b/c/nobody"
	chgrp "$G" "$d/sgid" "$d/sgid-dir"
	chmod 4755 "$d/a/suid"
	chmod 2755 "$d/sgid"
	chmod 6750 "$d/a/b/theirs"
	chmod 2775 "$d/sgid-dir"
	chmod 1777 "$d/sticky"
	chmod 640 "$d/a/b/c/nobody"
	setfattr -n user.colour -v blue "$d/a/small"
	setfattr -n user.empty "$d/empty"
	setfattr -n user.dir -v "a directory's" "$d/a"
	setfattr -n trusted.root-only -v 1 "$d/big"
	setfacl -m "u:$U:r,g:$OTHER_GID:rw" "$d/a/b/two-blocks"
	chmod 700 "$d/acl-dir" # the user may list it by the ACL alone
	setfacl -m "u:$U:rx" "$d/acl-dir"
	setfacl -d -m "u:$U:rwx,g::rx,o::-" "$d/acl-dir"
	touch "$d/acl-dir/made-under-default"
	t=2001-02-03T04:05:06.123456789
	touch -h -m -d $t "$d/a/to-big" "$d/dangling"
	touch -m -d $t "$d/a/small" "$d/big" "$d/sparse" "$d/a/fifo"
	touch -a -d 1999-12-31T23:59:59.5 "$d/a/small" "$d/big" "$d/empty"
	for t in "$d/a/b/c" "$d/a/b" "$d/a" "$d/acl-dir" "$d"; do
		touch -m -d 2002-03-04T05:06:07.000000042 "$t"
	done
}

kvfs_mkfs
kvfs_mount -o allow_other,noatime # noatime: reading SRC keeps the atimes
chmod 755 "$MNT"

# --- as root: the clone is what cp -a makes, sharing every block ----------
make_tree "$MNT/src"
cp -a "$MNT/src" "$MNT/ref"
blocks0=$(summary "data blocks")
extents0=$(summary extents)
named0=$(named)
out=$("$CLONE_BIN" -v "$MNT/src" "$MNT/dst" 2>&1)
rc=$?
expect "kvfs-clone SRC DST ($out)" [ $rc -eq 0 ]
same_tree "the clone is what cp -a makes" "$MNT/ref" "$MNT/dst"
# the counts it reports: directories, other inodes (a hard link's once),
# the bytes of the regular files (each once)
dirs=$(find "$MNT/dst" -type d | wc -l)
files=$(find "$MNT/dst" ! -type d -printf '%i\n' | sort -u | wc -l)
bytes=$(find "$MNT/dst" -type f -printf '%i %s\n' | sort -u | awk '{ n += $2 } END { print n }')
expect "-v: what the copy holds ($out)" \
	[ "${out%%, in *}" = "$MNT/dst: $dirs directories, $files files, $bytes bytes shared" ]
is "the tree's directories and other inodes" "$dirs $files" "8 16"
# hard links: one new inode per group, its names counted within the tree
inodes() { stat -c %i "$@" | sort -u | wc -l; }
is "hard links: one inode among the clone's names, not SRC's" \
	"$(inodes "$MNT"/dst/{big,a/b/c/big-again,a/big-thrice}) $(inodes "$MNT"/dst/{a/fifo,fifo-again}) \
$(inodes "$MNT"/{src,dst}/big)" "1 1 2"
is "hard links: counted within the tree" \
	"$(stat -c %h "$MNT"/dst/{big,a/fifo,a/small} "$MNT/src/a/small" | xargs)" "3 2 1 2"
is "the sparse file stays sparse" "$(stat -c %b "$MNT/dst/sparse")" \
	"$(stat -c %b "$MNT/src/sparse")"
expect "a sparse file's blocks: a few" [ "$(stat -c %b "$MNT/dst/sparse")" -lt 100 ]
expect "root keeps trusted.*" [ "$(getfattr -n trusted.root-only --only-values \
	"$MNT/dst/big" 2>/dev/null)" = 1 ]
expect "the parent's link count counts the new directory" [ "$(stat -c %h "$MNT")" = \
	"$(($(find "$MNT" -mindepth 1 -maxdepth 1 -type d | wc -l) + 2))" ]
# borrowed, not copied: no data block more, an extent per file
expect "no data block stored for the clone ($blocks0, then $(summary "data blocks"))" \
	[ "$(summary "data blocks")" = "$blocks0" ]
extents1=$(summary extents)
expect "the clone's files borrow their blocks (extents $extents0, then $extents1)" \
	[ "$extents1" -ge $((extents0 + 6)) ]
is "$((dirs + files)) named inodes more" "$(named)" $((named0 + dirs + files))

# a wide tree: more directories waiting to be copied, and more hard-linked
# inodes, than the daemon first makes room for (64 and 128)
mkdir -p "$MNT/wide"
(cd "$MNT/wide" && for i in $(seq 150); do
	mkdir -p "d$i/sub"
	echo "$i" > "d$i/f"
	ln "d$i/f" "d$i/sub/f-again"
done)
cp -a "$MNT/wide" "$MNT/wide-ref"
out=$("$CLONE_BIN" -v "$MNT/wide" "$MNT/wide-copy" 2>&1)
rc=$?
expect "a wide tree ($out)" [ $rc -eq 0 ]
is "a wide tree, what -v says" "${out%%, in *}" \
	"$MNT/wide-copy: 301 directories, 150 files, $((9 * 2 + 90 * 3 + 51 * 4)) bytes shared"
same_tree "a wide tree as cp -a makes it" "$MNT/wide-ref" "$MNT/wide-copy"
rm -rf "$MNT/wide" "$MNT/wide-ref" "$MNT/wide-copy"

# a single regular file, written just before (the kernel's cache is sent
# first), and a clone of a clone
head -c 100000 /dev/urandom > "$MNT/fresh"
expect "a file just written" "$CLONE_BIN" "$MNT/fresh" "$MNT/fresh-copy"
expect "its bytes" cmp -s "$MNT/fresh" "$MNT/fresh-copy"
expect "a clone of a clone" "$CLONE_BIN" "$MNT/dst" "$MNT/dst2"
same_tree "the clone of the clone" "$MNT/dst" "$MNT/dst2"
rm -rf "$MNT/dst2"

# --- a second user: owns its copies; refused what it may not read or write -
mkdir "$MNT/u" "$MNT/rootdir" "$MNT/acl-parent"
chown "$U:$G" "$MNT/u"
setfacl -m "u:$U:rwx" "$MNT/acl-parent"
make_tree "$MNT/pub" nodev
chmod 3775 "$MNT/pub"
chgrp "$OTHER_GID" "$MNT/pub/a/b/c/four-blocks"
chmod 640 "$MNT/pub/a/b/c/four-blocks"
setfacl -m "g:$G:r" "$MNT/pub/a/b/c/four-blocks" # readable by its group's ACL
chmod 644 "$MNT/pub/a/b/c/nobody"
as_user cp -a "$MNT/pub" "$MNT/u/ref" 2> "$T/cp.err"
expect "the user's cp -a: no complaint ($(head -3 "$T/cp.err"))" [ ! -s "$T/cp.err" ]
out=$(as_user "$CLONE_BIN" "$MNT/pub" "$MNT/u/pub" 2>&1)
rc=$?
expect "the user's kvfs-clone ($out)" [ $rc -eq 0 ]
same_tree "the user's clone is what its cp -a makes" "$MNT/u/ref" "$MNT/u/pub"
is "the user owns its copy" "$(stat -c %u:%g "$MNT"/u/pub/{a/suid,a/b/c/nobody} | xargs)" \
	"$U:$G $U:$G"
expect "a group the user is not in becomes its own" \
	[ "$(stat -c %g "$MNT/u/pub/a/b/c/four-blocks")" = "$G" ]
# the same file copied by the user as a member of its group: kept
expect "the file copied by a member of its group" \
	setpriv --reuid="$U" --regid="$G" --groups="$G,$OTHER_GID" \
	"$CLONE_BIN" "$MNT/pub/a/b/c/four-blocks" "$MNT/u/in-group"
expect "its group kept where the user is in it" \
	[ "$(stat -c %u:%g "$MNT/u/in-group" 2>&1)" = "$U:$OTHER_GID" ]
is "set-ID bits cleared when the owner changes" \
	"$(stat -c %a "$MNT"/u/pub/{a/suid,sgid,sgid-dir,} | xargs)" "755 755 775 1775"
is "and kept on the user's own file" "$(stat -c %a "$MNT/u/pub/a/b/theirs")" 6750
is "a user's copy drops trusted.*" \
	"$(getfattr -m trusted --absolute-names "$MNT/u/pub/big" 2>&1)" ""
is "and keeps user.*" "$(getfattr -n user.colour --only-values --absolute-names \
	"$MNT/u/pub/a/small" 2>&1)" blue
is "and the ACLs" "$(getfacl -c -n -d "$MNT/u/pub/acl-dir" 2>&1 | grep -c "^user:$U:rwx")" 1
out=$(as_user "$CLONE_BIN" "$MNT/pub" "$MNT/acl-parent/pub" 2>&1)
rc=$?
expect "into a parent the user may write by its ACL ($out)" [ $rc -eq 0 ]

mkdir -p "$MNT/priv1/x" "$MNT/priv2/x/y" "$MNT/priv3" "$MNT/devs"
echo secret > "$MNT/priv1/x/secret"
chmod 600 "$MNT/priv1/x/secret"
chmod 711 "$MNT/priv2/x"
echo secret > "$MNT/priv3/denied"
setfacl -m "u:$U:-" "$MNT/priv3/denied" # mode 644, the named entry denies
mknod "$MNT/devs/null" c 1 3
chmod 666 "$MNT/devs/null"
expect "the kernel refuses the user too" eval '! as_user cat "$MNT/priv3/denied" 2>/dev/null'
named0=$(named)
for p in priv1 priv2 priv3; do
	fails_with "a tree the user cannot read ($p)" "permission denied" \
		as_user "$CLONE_BIN" "$MNT/$p" "$MNT/u/$p"
	absent "$MNT/u/$p"
done
fails_with "a device node copied by a user" "Operation not permitted" \
	as_user "$CLONE_BIN" "$MNT/devs" "$MNT/u/devs"
absent "$MNT/u/devs"
fails_with "a parent the user cannot write" "permission denied" \
	as_user "$CLONE_BIN" "$MNT/pub" "$MNT/rootdir/pub"
absent "$MNT/rootdir/pub"
is "the refusals made no inode" "$(named)" "$named0"
expect "root may copy them all" "$CLONE_BIN" "$MNT/priv1" "$MNT/rootdir/priv1"
rm -rf "$MNT/u" "$MNT/acl-parent" "$MNT/pub" "$MNT/pub.outside" "$MNT"/priv? "$MNT/devs"

# --- errors: the tool's, then the daemon's own checks ----------------------
ln -s nowhere "$MNT/dangling"
ln -s src "$MNT/link"
mkdir "$T/elsewhere"
named0=$(named)
fails_with "DST exists" "exists" "$CLONE_BIN" "$MNT/src" "$MNT/ref"
fails_with "DST a dangling symlink" "exists" "$CLONE_BIN" "$MNT/src" "$MNT/dangling"
fails_with "DST inside SRC" "within SRC" "$CLONE_BIN" "$MNT/src" "$MNT/src/a/b/new"
absent "$MNT/src/a/b/new"
fails_with "DST right inside SRC" "within SRC" "$CLONE_BIN" "$MNT/src" "$MNT/src/new"
fails_with "DST as SRC's name" "exists" "$CLONE_BIN" "$MNT/src" "$MNT/src"
fails_with "SRC a symlink" "symlink" "$CLONE_BIN" "$MNT/link" "$MNT/new"
fails_with "SRC a fifo" "not a directory or a regular file" \
	"$CLONE_BIN" "$MNT/src/a/fifo" "$MNT/new"
fails_with "SRC missing" "No such file or directory" "$CLONE_BIN" "$MNT/missing" "$MNT/new"
fails_with "DST's parent missing" "No such file or directory" \
	"$CLONE_BIN" "$MNT/src" "$MNT/missing/new"
fails_with "SRC and DST on another filesystem" "not on a kvfs mount" \
	"$CLONE_BIN" "$T/elsewhere" "$T/copy"
absent "$T/copy"
fails_with "SRC on another filesystem" "not on one mount" "$CLONE_BIN" "$T/elsewhere" "$MNT/new"
fails_with "DST on another filesystem" "not on one mount" "$CLONE_BIN" "$MNT/src" "$T/copy"
absent "$MNT/new"
for args in "" "$MNT/src" "$MNT/src $MNT/new $MNT/new2" "-x $MNT/src $MNT/new"; do
	# shellcheck disable=SC2086
	"$CLONE_BIN" $args > /dev/null 2>&1
	rc=$?
	expect "usage: '$args' exits 16 (got $rc)" [ $rc -eq 16 ]
done
expect "--help exits 0" eval '"$CLONE_BIN" --help | grep -q "usage: kvfs-clone"'

# KVFS_IOC_CLONE sent straight, past the tool's checks: ioctl SRC PARENT
# NAME prints ok or the errno's name
cat >"$T/ioctl.py" <<'EOF'
import errno, fcntl, os, struct, sys
src, parent, name = sys.argv[1], sys.argv[2], os.fsencode(sys.argv[3])
ino = int(parent) if parent.isdigit() else os.stat(parent).st_ino
fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
arg = struct.pack("=QQQQ256s", ino, 0, 0, 0, name)
try:
    fcntl.ioctl(fd, (3 << 30) | (len(arg) << 16) | (ord("K") << 8) | 1, arg)
    print("ok")
except OSError as e:
    print(errno.errorcode[e.errno])
EOF
ioctl() { python3 - "$@" <"$T/ioctl.py"; }
# a parent the user reaches by no path it may search: the ioctl names it by
# number, so the daemon walks the path up itself
mkdir -p "$MNT/locked/open"
chmod 700 "$MNT/locked"
chmod 777 "$MNT/locked/open"
echo planted >"$MNT/pubfile"
chmod 644 "$MNT/pubfile"
got=$(as_user /usr/bin/python3 - "$MNT/pubfile" "$(stat -c %i "$MNT/locked/open")" planted \
	<"$T/ioctl.py" 2>&1)
expect "ioctl: a parent behind a directory the user may not search ($got)" [ "$got" = EACCES ]
absent "$MNT/locked/open/planted"
expect "ioctl: root may" [ "$(ioctl "$MNT/pubfile" "$MNT/locked/open" planted)" = ok ]
rm -rf "$MNT/locked" "$MNT/pubfile"
expect "ioctl: DST exists" [ "$(ioctl "$MNT/src" "$MNT" ref)" = EEXIST ]
expect "ioctl: DST inside SRC" [ "$(ioctl "$MNT/src" "$MNT/src/a" new)" = EINVAL ]
expect "ioctl: DST is SRC's own child name" [ "$(ioctl "$MNT/src" "$MNT/src" new)" = EINVAL ]
expect "ioctl: a name with a slash" [ "$(ioctl "$MNT/src" "$MNT" a/b)" = EINVAL ]
expect "ioctl: name .." [ "$(ioctl "$MNT/src" "$MNT" ..)" = EINVAL ]
expect "ioctl: an empty name" [ "$(ioctl "$MNT/src" "$MNT" "")" = EINVAL ]
expect "ioctl: a name of 256 bytes, not cut to 255" \
	[ "$(ioctl "$MNT/src" "$MNT" "$(printf 'n%.0s' $(seq 256))")" = ENAMETOOLONG ]
expect "ioctl: the parent a file" [ "$(ioctl "$MNT/src" "$MNT/fresh" new)" = ENOTDIR ]
expect "ioctl: no such parent" [ "$(ioctl "$MNT/src" 99999999 new)" = ENOENT ]
is "the errors made no inode" "$(named)" "$named0"
expect "ioctl: a file's copy in its own directory" \
	[ "$(ioctl "$MNT/src/big" "$MNT/src" big.copy)" = ok ]
expect "ioctl: its bytes" cmp -s "$MNT/src/big" "$MNT/src/big.copy"
rm "$MNT/src/big.copy" "$MNT/dangling" "$MNT/link"
is "the errors made no name" "$(cd "$MNT" && echo *)" \
	"dst fresh fresh-copy ref rootdir src src.outside"

# --- copy on write, both ways; then SRC deleted -----------------------------
for f in big a/b/two-blocks a/b/c/four-blocks sparse a/small; do
	cp "$MNT/src/$f" "$T/src.${f//\//_}"
	cp "$MNT/dst/$f" "$T/dst.${f//\//_}"
done
# on SIDE FILE CMD...: CMD on FILE of SIDE (src or dst) and on its model
on() {
	local side=$1 f=$2
	shift 2
	"$@" "$T/$side.${f//\//_}"
	"$@" "$MNT/$side/$f"
}
new_patch() { head -c 7000 /dev/urandom > "$T/patch"; }
write_at() { dd if="$T/patch" of="$2" bs=7000 seek="$1" oflag=seek_bytes conv=notrunc status=none; }
new_patch
on dst big write_at 1000000
new_patch
on src big write_at 2000000
on dst a/b/two-blocks truncate -s 100
on src a/b/c/four-blocks truncate -s $((BS + 10))
new_patch
on dst a/b/c/four-blocks write_at $((BS * 4 - 3)) # grows the copy's last block
on src sparse write_at $((5 << 20))
on dst sparse truncate -s 1
echo more >> "$MNT/dst/a/small" && echo more >> "$T/dst.a_small"
for side in src dst; do
	for f in big a/b/two-blocks a/b/c/four-blocks sparse a/small; do
		expect "$side/$f holds its own changes alone" cmp -s "$MNT/$side/$f" \
			"$T/$side.${f//\//_}"
	done
done
expect "a change through one name is seen through the clone's others" \
	cmp -s "$MNT/dst/big" "$MNT/dst/a/b/c/big-again"
expect "and not through SRC's" cmp -s "$MNT/src/big" "$MNT/src/a/big-thrice"
rm "$MNT/dst/a/b/c/four-blocks"
expect "a delete in the clone leaves SRC alone" cmp -s "$MNT/src/a/b/c/four-blocks" \
	"$T/src.a_b_c_four-blocks"
listing "$MNT/ref" > "$T/ref.list"
rm -rf "$MNT/src"
for f in big a/b/two-blocks sparse a/small; do
	expect "SRC deleted: dst/$f reads as before" cmp -s "$MNT/dst/$f" "$T/dst.${f//\//_}"
done
expect "and the cp -a copy" [ "$(listing "$MNT/ref" | cmp - "$T/ref.list" && echo same)" = same ]
listing "$MNT/dst" > "$T/dst.list"
find "$MNT/dst" -type f -exec cat {} + > /dev/null || bad "the clone reads whole"

# --- the image: fsck -n clean, and the same after a remount ----------------
kvfs_umount
"$FSCK_BIN" -n "$IMG" > "$T/fsck.out" 2>&1
rc=$?
expect "fsck -n clean after clones (exit $rc: $(grep -v '^Pass' "$T/fsck.out" | head -5))" \
	[ $rc -eq 0 ]
kvfs_mount -o allow_other,noatime
expect "the clone the same after a remount" \
	[ "$(listing "$MNT/dst" | cmp - "$T/dst.list" && echo same)" = same ]
kvfs_umount
kvfs_results
