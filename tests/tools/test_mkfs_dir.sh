#!/bin/bash
# test_mkfs_dir.sh - mkfs.kvfs -d DIR and kvfs-dump export, round trip: a tree
# with every kind of entry goes into an image and comes back out equal, as a
# directory and through a tar archive (plain, compressed, on standard
# output) that GNU tar reads without a warning, in its order; POSIX ACLs
# come back through both (GNU tar --acls and bsdtar read the archive's),
# and the backup keeps them; holes stay holes; thousands of files take a few
# commits, not one each; mkfs, export and backup show progress on a
# terminal only; errors name the source path.
#
# Arguments: MKFS DUMP (the binaries under test).
set -u
MKFS=$1
DUMP=$2
T=$(mktemp -d /tmp/kvfs-tools.XXXXXX)
trap 'umount "$T/tmpfs" 2>/dev/null; chmod -R u+rwx "$T" 2>/dev/null; rm -rf "$T"' EXIT
. "$(dirname "$0")/lib_tree.sh"
cd "$T" || exit 1 # names given relative ("-") land in the scratch directory

kb() { du -k "$1" | cut -f1; }
last_txn() { mdb_stat -n -e "$1" | sed -n 's/^ *Last transaction ID: //p'; }

make_tree "$T/src"

# ---- mkfs -d, then export to a directory
check "mkfs -d succeeds" exit_is 0 "$MKFS" -L roundtrip -d "$T/src" "$T/img"
check "mkfs -d reports the copy" grep -q "^copied [0-9]* inodes and .* of file data from" "$T/out"
check "mkfs -d: the image is 0600 (got $(stat -c %a "$T/img"))" [ "$(stat -c %a "$T/img")" = 600 ]
check "mkfs -d: its lock file, if left, is 0600" \
	eval '[ ! -e "$T/img-lock" ] || [ "$(stat -c %a "$T/img-lock")" = 600 ]'
check "no progress without a terminal" [ ! -s "$T/err" ]
check "export to a directory" exit_is 0 "$DUMP" "$T/img" export "$T/out.d"
check "export reports what it wrote" grep -q "^exported [0-9]* inodes" "$T/out"
same_tree "$T/src" "$T/out.d" "directory export"
check "sparse file stays sparse ($(kb "$T/out.d/sparse") KiB)" [ "$(kb "$T/out.d/sparse")" -lt 256 ]
check "file of holes has no blocks" [ "$(kb "$T/out.d/all-hole")" -eq 0 ]
check "written zeros are not stored ($(kb "$T/out.d/zeros") KiB)" [ "$(kb "$T/out.d/zeros")" -lt 64 ]
check "hard link kept as a link" [ "$(stat -c %i "$T/out.d/hardlink")" = "$(stat -c %i "$T/out.d/dir/file")" ]

# the image holds holes too: blocks only for the data
"$DUMP" "$T/img" inode /sparse >"$T/sparse.inode"
check "sparse file: 2 blocks stored" grep -q "^blocks: *2 (0 bad)" "$T/sparse.inode"
"$DUMP" "$T/img" inode /all-hole >"$T/hole.inode"
check "file of holes: no blocks stored" grep -q "^blocks: *0 (0 bad)" "$T/hole.inode"
"$DUMP" "$T/img" inode /hardlink >"$T/hard.inode"
check "hard link: one inode, three names" [ "$(grep -c '^name:' "$T/hard.inode")" -eq 3 ]
check "hard link: nlink 3" grep -q "^nlink: *3$" "$T/hard.inode"

# an export into an existing empty directory works; a non-empty one is refused
mkdir "$T/empty.d"
check "export into an empty directory" exit_is 0 "$DUMP" "$T/img" export "$T/empty.d"
check "refuse a non-empty directory: exit 8" exit_is 8 "$DUMP" "$T/img" export "$T/out.d"
check "refusal names it" grep -q "out.d': exists and is not empty" "$T/err"
: >"$T/afile"
check "refuse an existing file: exit 8" exit_is 8 "$DUMP" "$T/img" export "$T/afile"
check "refused file untouched" [ ! -s "$T/afile" ]

# ---- through a tar archive
check "export to a tar archive" exit_is 0 "$DUMP" "$T/img" export "$T/out.tar"
mkdir "$T/untar"
tar -C "$T/untar" --acls --xattrs --xattrs-include='*' -xpf "$T/out.tar" 2>"$T/tar.err"
check "tar extracts it" [ $? -eq 0 ]
# only the name that is not UTF-8 (pax hdrcharset) and the time before 1970
# may draw a warning
other=$(grep -v 'hdrcharset\|implausibly old' "$T/tar.err")
check "tar: no other complaint${other:+ (got: $(echo "$other" | head -3 | tr '\n' ' '))}" [ -z "$other" ]
same_tree "$T/src" "$T/untar" "tar export"
check "tar: sparse file stays sparse" [ "$(kb "$T/untar/sparse")" -lt 256 ]
check "tar: archive smaller than the data ($(kb "$T/out.tar") KiB)" [ "$(kb "$T/out.tar")" -lt 9000 ]
check "tar: refuse an existing archive" exit_is 8 "$DUMP" "$T/img" export "$T/out.tar"

# ---- POSIX ACLs (make_tree set some where $T keeps them)
if [ "$HAVE_ACL" = 1 ]; then
	# in the archive as the POSIX.1e entries tar --acls reads, not as xattrs
	check "tar: ACLs as SCHILY.acl records" grep -qa \
		"SCHILY.acl.default=user::rwx,user:1234:rwx,group::r-x,group:5678:r-x,mask::rwx,other::---" \
		"$T/out.tar"
	check "tar: no ACL as an xattr record" eval '! grep -qa "SCHILY.xattr.system" "$T/out.tar"'
	if command -v bsdtar >/dev/null; then
		mkdir "$T/bsd"
		bsdtar -C "$T/bsd" --acls -xpf "$T/out.tar" 2>"$T/bsd.err"
		check "bsdtar extracts it $(head -c 200 "$T/bsd.err")" [ $? -eq 0 ]
		acls "$T/src" >"$T/acl.a"
		acls "$T/bsd" >"$T/acl.b"
		check "bsdtar: ACLs equal" diff "$T/acl.a" "$T/acl.b"
	fi
	# the image: the ACL kept in kvfs's record, shown as text
	"$DUMP" "$T/img" inode /many/f1 >"$T/f1.inode"
	check "inode shows the ACL as text" grep -qxF \
		"xattr:          system.posix_acl_access (44 bytes) user::rw-,user:42:r-x,group::rwx,mask::r--,other::r--" \
		"$T/f1.inode"
	"$DUMP" "$T/img" inode /acl-dir >"$T/ad.inode"
	check "inode shows a default ACL as text" grep -qxF \
		"xattr:          system.posix_acl_default (52 bytes) user::rwx,user:1234:rwx,group::r-x,group:5678:r-x,mask::rwx,other::---" \
		"$T/ad.inode"
	check "backup of an image with ACLs" exit_is 0 "$DUMP" "$T/img" backup "$T/acl.bak"
	"$DUMP" "$T/acl.bak" inode /many/f1 >"$T/f1.bak.inode"
	check "backup: the ACLs kept" diff "$T/f1.inode" "$T/f1.bak.inode"
	# an export under a directory with a default ACL: what the entries would
	# inherit is removed where the image has no ACL, as tar --acls does
	mkdir "$T/inherit"
	setfacl -d -m u:4321:rwx,g:8765:rx "$T/inherit"
	check "export under a default ACL" exit_is 0 "$DUMP" "$T/img" export "$T/inherit/out.d"
	same_tree "$T/src" "$T/inherit/out.d" "export under a default ACL"
	# an ACL kvfs cannot keep (tmpfs keeps more than 511 entries): mkfs -d
	# stops rather than leave it out
	mkdir "$T/tmpfs"
	if [ "$AS_ROOT" = 1 ] && mount -t tmpfs -o size=4m kvfs-test "$T/tmpfs"; then
		echo x >"$T/tmpfs/f" # owner, 507 users, group, mask, other
		setfacl -m "$(printf 'u:%d:r,' $(seq 1000 1506))m::r" "$T/tmpfs/f"
		check "511 ACL entries: copied" exit_is 0 "$MKFS" -q -d "$T/tmpfs" "$T/511.img"
		setfacl -m u:1507:r "$T/tmpfs/f"
		check "512 ACL entries: mkfs -d fails" exit_is 1 "$MKFS" -q -d "$T/tmpfs" "$T/512.img"
		check "512 ACL entries: why" grep -q \
			"tmpfs/f': cannot copy ACL 'system.posix_acl_access': more than 511 entries" "$T/err"
		check "512 ACL entries: no image" [ ! -e "$T/512.img" ]
		umount "$T/tmpfs"
	fi
fi

# ---- a tar GNU tar reads without a word, in the order and with the names
# tar -C DIR --sort=name -c . gives: a directory before its entries,
# siblings by name bytes. The tree holds only what tar has no reason to warn
# about (UTF-8 names, times after 1970, no sockets), and a file modified a
# second after it was made (its birth time is before its mtime).
P=$T/plain
mkdir -p "$P/b/c" "$P/a" "$P/a b" "$P/a-b" "$P/B"
for f in b/x b/c/y a/z "a b/q" a.b Z ü é-file "a-b/long-$(printf 'l%.0s' {1..200})"; do
	printf '%s\n' "$f" >"$P/$f"
done
ln "$P/b/x" "$P/a/hard"
ln -s ../b/x "$P/a/sym"
mkfifo "$P/b/fifo"
truncate -s 5M "$P/holes" && printf data | dd of="$P/holes" bs=1 seek=3000000 conv=notrunc status=none
setfattr -n user.color -v red "$P/b/x"
setfattr -n user.bin -v 0x00ff "$P/a"
if [ "$AS_ROOT" = 1 ]; then
	mknod "$P/b/chardev" c 1 3
	chown 1234:5678 "$P/a/z"
fi
t0=$(date +%s)
while [ "$(date +%s)" = "$t0" ]; do sleep 0.05; done # no fixed wait: until the second turns
printf later >>"$P/a.b"
check "mkfs -d of the plain tree" exit_is 0 "$MKFS" -q -d "$P" "$T/plain.img"
check "export of the plain tree" exit_is 0 "$DUMP" "$T/plain.img" export "$T/plain.tar"
tar -tvf "$T/plain.tar" >"$T/plain.tv" 2>"$T/plain.tv.err"
check "tar -tvf: no warning $(head -c 300 "$T/plain.tv.err" | tr '\n' ' ')" \
	[ ! -s "$T/plain.tv.err" ]
tar -tf "$T/plain.tar" >"$T/plain.list"
tar -C "$P" --sort=name -cf - . | tar -tf - >"$T/plain.want"
check "tar: entries named and ordered as GNU tar --sort=name writes them" \
	diff "$T/plain.want" "$T/plain.list"
mkdir "$T/plain.x"
tar -C "$T/plain.x" --xattrs --xattrs-include='*' -xpf "$T/plain.tar" 2>"$T/plain.x.err"
check "tar --xattrs -xf: no warning $(head -c 300 "$T/plain.x.err" | tr '\n' ' ')" \
	[ ! -s "$T/plain.x.err" ]
same_tree "$P" "$T/plain.x" "plain tar export"

# ---- compressed by the name's suffix; "-" for standard output
for c in "tar.gz gzip" "tgz gzip" "tar.bz2 bzip2" "tbz2 bzip2" "tar.xz xz" "txz xz" \
	"tar.zst zstd" "tzst zstd"; do
	set -- $c
	command -v "$2" >/dev/null || continue
	check "export to .$1" exit_is 0 "$DUMP" "$T/plain.img" export "$T/c.$1"
	check ".$1: a file, not a directory" [ -f "$T/c.$1" ]
	"$2" -dc <"$T/c.$1" | tar -tf - >"$T/c.list" 2>"$T/c.err"
	check ".$1: $2 reads it and tar lists it $(head -c 200 "$T/c.err")" \
		diff "$T/plain.want" "$T/c.list"
done
check "a compressed archive is smaller ($(kb "$T/c.tar.xz") KiB)" [ "$(kb "$T/c.tar.xz")" -lt 64 ]
check "export to - (standard output)" exit_is 0 "$DUMP" "$T/plain.img" export -
check "-: no directory named -" [ ! -e "$T/-" ]
tar -tf "$T/out" >"$T/c.list" 2>"$T/c.err"
check "-: standard output holds the tar $(head -c 200 "$T/c.err")" diff "$T/plain.want" "$T/c.list"
check "-: the report goes to standard error" grep -q "^exported [0-9]* inodes" "$T/err"
mkdir "$T/-.x"
"$DUMP" "$T/plain.img" export - 2>/dev/null | tar -C "$T/-.x" --xattrs --xattrs-include='*' -xpf -
same_tree "$P" "$T/-.x" "tar through a pipe"
if command -v script >/dev/null; then
	script -qec "'$DUMP' '$T/plain.img' export -" /dev/null >"$T/tty.out" 2>&1
	check "-: a terminal is refused: exit 16" [ $? -eq 16 ]
	check "-: a terminal is refused: why" grep -q "refusing to write a tar archive to a terminal" \
		"$T/tty.out"
	check "-: nothing written to the terminal" [ "$(wc -c <"$T/tty.out")" -lt 400 ]
fi
# other names: a directory (new, or existing and empty), unless they end like
# an archive export does not write
for n in x.zip x.tar.lz x.7z x.cpio x.gz; do
	check "export to $n: refused (exit 16)" exit_is 16 "$DUMP" "$T/plain.img" export "$T/$n"
	check "export to $n: names the suffixes it writes" grep -q "\.tar\.gz" "$T/err"
	check "export to $n: nothing made" [ ! -e "$T/$n" ]
done
check "export to name.v2: a directory" exit_is 0 "$DUMP" "$T/plain.img" export "$T/name.v2"
check "export to name.v2: a directory" [ -d "$T/name.v2" ]
mkdir "$T/dir.tgz"
check "export to an existing empty directory named .tgz" \
	exit_is 0 "$DUMP" "$T/plain.img" export "$T/dir.tgz"
check "export to an existing directory named .tgz: in it" [ -f "$T/dir.tgz/a.b" ]

# ---- another block size gives the same tree
check "mkfs --root-dir -b 8168" exit_is 0 "$MKFS" -q -b 8168 --root-dir "$T/src" "$T/img8k"
check "export of the 8168 image" exit_is 0 "$DUMP" "$T/img8k" export "$T/out8k"
same_tree "$T/src" "$T/out8k" "block size 8168"

# ---- batches: 6,000 files and 40 MB take a handful of commits
mkdir "$T/lots"
(cd "$T/lots" && for d in $(seq 6); do
	mkdir "d$d" && for f in $(seq 1000); do printf "$d/$f" >"d$d/$f"; done
done)
head -c 40000000 /dev/urandom >"$T/lots/d1/large"
head -c 40000000 /dev/zero >"$T/lots/d2/zeros" # written zeros: read, never stored
check "mkfs -d of 6,000 files" exit_is 0 "$MKFS" -q -d "$T/lots" "$T/lots.img"
txns=$(last_txn "$T/lots.img")
check "6,000 files and 40 MB in $txns commits (not one each)" [ "${txns:-99999}" -lt 12 ]
"$DUMP" "$T/lots.img" summary >"$T/lots.summary"
check "summary counts 6,009 inodes" grep -q "^inodes: *6009 (dir 7, file 6002," "$T/lots.summary"
check "export of 6,000 files" exit_is 0 "$DUMP" "$T/lots.img" export "$T/lots.out"
check "6,000 files equal" diff -r "$T/lots" "$T/lots.out"

# ---- progress on a terminal
if command -v script >/dev/null; then
	script -qec "$MKFS -d '$T/lots' '$T/tty.img'" /dev/null >"$T/tty.out" 2>&1
	check "progress on a terminal" grep -q "files, " "$T/tty.out"
	# export and backup: "\r\033[Kkvfs-dump: ... [===   ]  42.0%", rising to 100
	pct() { tr '\r' '\n' <"$1" | sed -n 's/^\x1b\[Kkvfs-dump: .*\] *\([0-9.]*\)%$/\1/p'; }
	rises() { # FILE: percentages never go back and end at 100
		pct "$1" | awk 'BEGIN { l = -1 } $1 < l { exit 1 } { l = $1 } END { exit !(NR && l == 100) }'
	}
	for d in tty.tar tty.d; do
		script -qec "'$DUMP' '$T/lots.img' export '$T/$d'" /dev/null >"$T/tty.out" 2>&1
		check "export to $d: progress on a terminal ($(pct "$T/tty.out" | uniq | tr '\n' ' '))" \
			rises "$T/tty.out"
		check "export to $d: the progress counts inodes" \
			grep -q "kvfs-dump: export: [0-9]* of 6009 inodes" "$T/tty.out"
	done
	check "export: no progress without a terminal" exit_is 0 "$DUMP" "$T/lots.img" export "$T/nt.tar"
	check "export: stderr empty without a terminal" [ ! -s "$T/err" ]
	script -qec "'$DUMP' '$T/lots.img' backup '$T/tty.bak'" /dev/null >"$T/tty.out" 2>&1
	check "backup: progress on a terminal ($(pct "$T/tty.out" | uniq | tr '\n' ' '))" \
		rises "$T/tty.out"
	check "backup: the progress counts bytes" grep -q "kvfs-dump: backup: .* of about" "$T/tty.out"
	check "backup: no progress without a terminal" exit_is 0 "$DUMP" "$T/lots.img" backup "$T/nt.bak"
	check "backup: stderr empty without a terminal" [ ! -s "$T/err" ]
fi

# ---- errors
check "missing source: exit 1" exit_is 1 "$MKFS" -d "$T/nosuch" "$T/e1.img"
check "missing source: named" grep -q "nosuch': No such file" "$T/err"
check "missing source: no image" [ ! -e "$T/e1.img" ]
check "source not a directory: exit 1" exit_is 1 "$MKFS" -d "$T/afile" "$T/e2.img"
check "source not a directory: named" grep -q "afile' is not a directory" "$T/err"
if [ "$AS_ROOT" = 0 ]; then
	mkdir -p "$T/denied/sub" && echo x >"$T/denied/sub/secret" && chmod 0 "$T/denied/sub/secret"
	check "unreadable file: exit 1" exit_is 1 "$MKFS" -d "$T/denied" "$T/e3.img"
	check "unreadable file: path named" grep -q "denied/sub/secret': cannot open" "$T/err"
	check "unreadable file: no image left" [ ! -e "$T/e3.img" ]
fi
# the image inside the tree it is made from is left out
cp -a "$T/lots/d1" "$T/self"
check "image inside the source" exit_is 0 "$MKFS" -q -d "$T/self" "$T/self/self.img"
check "image inside the source: left out" grep -q "self.img': the image being made" "$T/err"
"$DUMP" "$T/self/self.img" tree >"$T/self.tree"
check "image inside the source: not copied" [ "$(grep -c self.img "$T/self.tree")" -eq 0 ]

summary
