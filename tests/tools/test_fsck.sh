#!/bin/bash
# test_fsck.sh - fsck.kvfs against images broken on purpose. For every
# invariant it checks: break it through raw LMDB (fsck_break), then
# fsck -n finds it (exit 4, the message), fsck -y repairs it (exit 1) and
# fsck -n right after is clean (exit 0); some cases also look at the result.
# Shared blocks on an image made through a real mount (KVFS_BIN and MKFS_BIN
# in the environment; skipped without /dev/fuse); compressed blocks on an
# image mkfs.kvfs -O compress -d made (MKFS_BIN). Then -p on what it may and
# may not repair, garbage files (exit 8), usage (exit 16), the JSON report
# and the progress display.
#
# usage: test_fsck.sh FSCK MKIMAGE FSCK_BREAK DUMP
set -u
FSCK=$1
MKIMAGE=$2
BRK=$3
DUMP=$4
T=$(mktemp -d /tmp/kvfs-fsck.XXXXXX)
trap 'mountpoint -q "$T/mnt" 2>/dev/null && fusermount3 -u "$T/mnt"; rm -rf "$T"' EXIT
passes=0 fails=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# run_fsck WANT NAME ARGS...: fsck's exit must be WANT; output in $T/out
run_fsck() {
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
has() { # NAME TEXT: $T/out holds TEXT (fixed string)
	if grep -qF -- "$2" "$T/out"; then ok; else bad "$1: no '$2' in the output"; sed 's/^/    /' "$T/out" | head -20; fi
}
found() { # NAME TEXT: the first -n run of the last case reported TEXT too
	if grep -qF -- "$2" "$T/found"; then ok; else bad "$1: no '$2' in the report"; sed 's/^/    /' "$T/found" | head -20; fi
}
expect() { # NAME COMMAND...: the command succeeds
	local name=$1
	shift
	if "$@"; then ok; else bad "$name"; fi
}

"$MKIMAGE" -s -n 300 -w 50 "$T/base.img" || { echo "FAIL: mkimage"; exit 1; }
IMG=$T/c.img
run_fsck 0 "sample image is clean" -n "$T/base.img"
[ "$(wc -l <"$T/err")" -eq 0 ] && ok || bad "no progress or messages on stderr when it is no tty"

# fresh BREAK-COMMANDS...: a copy of the sample broken by the commands (each
# a quoted fsck_break argument list, eval'd: a target '#INO' needs quotes)
fresh() {
	local c
	cp "${BASE:-$T/base.img}" "$IMG"
	rm -f "$IMG-lock"
	for c in "$@"; do
		eval "\"\$BRK\" \"\$IMG\" $c" || { bad "fsck_break $c"; return 1; }
	done
}

# case_ NAME CLASS "MESSAGE" BREAK-COMMANDS...: -n finds the problem (exit
# 4, MESSAGE). Class p: -p repairs it (exit 1, then clean). Class y: -p
# leaves it (exit bit 4, "needs -y"). Then, on that image, -y repairs it
# (exit 1) and -n right after is clean (exit 0).
case_() {
	local name=$1 class=$2 msg=$3 rc
	shift 3
	fresh "$@" || return 1
	run_fsck 4 "$name: -n finds it" -n "$IMG"
	has "$name" "$msg"
	cp "$T/out" "$T/found"
	if [ "$class" = p ]; then
		run_fsck 1 "$name: -p repairs it" -p "$IMG"
		run_fsck 0 "$name: clean after -p" -n "$IMG"
		fresh "$@" || return 1
	else
		"$FSCK" -p "$IMG" >"$T/out" 2>&1
		rc=$?
		[ $((rc & 4)) -ne 0 ] && ok || bad "$name: -p exited $rc: it must leave this to -y"
		has "$name: -p" "no (needs -y)"
	fi
	run_fsck 1 "$name: -y repairs it" -y "$IMG"
	has "$name: -y" "? yes"
	run_fsck 0 "$name: clean after -y" -n "$IMG"
}

# the sample's inodes: / 1, /dir 2, /dir/sub 3, /dir/file 4, /hello 5,
# /sparse 6, /link 7, /hard1 8 (= /dir/hard2), /fifo 9, /null 10, /empty 11,
# /dir/sub/deep 12, /xdir 13
[ "$("$BRK" "$T/base.img" ino /xdir)" = 13 ] && ok || bad "sample layout changed"

# ---- pass 1
case_ meta_extra y "meta database holds an unknown record 'junk'" "put meta 6a756e6b 00"
# mount defaults (kvfs-tune -o): kept when a mount would take them
case_ defaults_bad y "mount defaults 'junk' are wrong: 'junk' cannot be a default" \
	"put meta 64656661756c7473 6a756e6b"
fresh "put meta 64656661756c7473 6e6f6174696d65"
run_fsck 0 "good mount defaults: clean" -n "$IMG"

# ---- pass 2
case_ inode_bad_key y "inode database: a record with a malformed key (3 bytes)" "put inode 010203 00"
case_ inode_ino_0 y "inode database: a record with a malformed key (8 bytes)" \
	"put inode 0000000000000000 $(printf '0%.0s' {1..176})"
case_ inode_bad_record y "inode 11: malformed record (40 bytes)" "trunc /empty 40"
expect "bad record: cleared, its name dropped" eval '! "$BRK" "$IMG" ls / | grep -qx empty'
case_ inode_bad_type y "inode 9: unknown file type (mode 170644)" "set /fifo mode 0170644"
case_ inode_flags p "inode 5: reserved flags 0x4 are set" "set /hello flags 4"
case_ inode_flags_kept p "inode 5: reserved flags 0x8 are set" "set /hello flags 0xb"
expect "reserved flags cleared, those of shared blocks kept" \
	eval '"$DUMP" "$IMG" inode /hello | grep -q "^flags: *0x3"'
case_ inode_share_flags p "inode 2: flags 0x2 of shared blocks on a directory" "set /dir flags 2"
case_ inode_inline y "inode 5: 4 bytes of inline data on a regular file" "inline /hello junk"
expect "inline data dropped, data kept" [ "$("$BRK" "$IMG" cat /hello)" = "hello world" ]
case_ symlink_size p "inode 7: symlink size is 99, its target is 5 bytes" "set /link size 99"
expect "symlink size fixed" [ "$("$BRK" "$IMG" stat /link)" = "120777 1 5 0 0" ]
case_ symlink_empty y "inode 7: symlink without a target" "trunc /link 88"
case_ special_size p "inode 10: size of a character device is 5, should be 0" "set /null size 5"
case_ parent_nondir p "inode 5: parent field is 2 on a regular file" "set /hello parent 2"
case_ file_size y "inode 11: size 9223372036854775808 is beyond the largest file size" \
	"set /empty size 0x8000000000000000"
case_ root_missing y "root directory (inode 1) is missing" "del-inode '#1'"
expect "new root keeps the tree" eval '"$BRK" "$IMG" cat /dir/sub/deep | grep -qx deep'
case_ root_not_dir y "root inode 1 is not a directory (mode 100644)" "set '#1' mode 0100644"
expect "root replaced: names kept" eval '"$BRK" "$IMG" ls / | grep -qx hello'

# ---- pass 3
case_ dirent_bad_key y "dirent database: a record with a malformed key (10 bytes)" \
	"put dirent 00000000000000010000 00"
case_ dirent_no_dir y "inode 999 has entries but is missing" "add-entry '#999' x 5 8"
case_ dirent_file_dir y "inode 5 has entries but is not a directory" "add-entry /hello x 11 8"
case_ dirent_cut y "is damaged (cut short)" "cut-list / hello"
expect "cut list: the lost name's inode is in /lost+found" \
	eval '"$BRK" "$IMG" cat "/lost+found/#5" | grep -qx "hello world"'
h=$("$BRK" "$IMG" hash hello)
case_ dirent_order y "is damaged (slots out of order)" "add-entry / aaa 11 8 $h" "entry / hello slot 5"
case_ dirent_bad_name y "directory 1: entry 'a/b' has an invalid name" "add-entry / a/b 5 8"
case_ dirent_dot y "directory 2: entry '..' has an invalid name" "add-entry /dir .. 1 4"
case_ dirent_bad_hash y "directory 1: entry 'misfiled' is filed under the wrong hash" \
	"add-entry / misfiled 5 8 12345"
expect "misfiled entry re-filed: found by name" [ "$("$BRK" "$IMG" ino /misfiled)" = 5 ]
expect "re-filed name counts as a link" [ "$("$BRK" "$IMG" stat /hello | cut -d' ' -f2)" = 2 ]
case_ dirent_dup_name y "directory 1: entry 'hello' appears twice" "dup-entry / hello"
case_ dirent_missing y "directory 1: entry 'ghost' names missing inode 777" "add-entry / ghost 777 8"
expect "dangling entry dropped" eval '! "$BRK" "$IMG" ls / | grep -qx ghost'
case_ dirent_missing_inode y "directory 3: entry 'deep' names missing inode 12" "del-inode /dir/sub/deep"
found "missing inode: its blocks too" "block 0 of missing inode 12"
case_ dirent_root y "directory 2: entry 'rootlink' names the root directory" "add-entry /dir rootlink 1 4"
case_ dirent_type p "directory 1: entry 'hello' has type 4, inode 5 has type 8" "entry / hello type 4"
case_ dir_multi y "directory 3 has a second name: 'sub2' in 13 (it is also named in 2).  Drop the name in 13" \
	"add-entry /xdir sub2 3 4"
expect "second name dropped" eval '! "$BRK" "$IMG" ls /xdir | grep -qx sub2'
case_ dir_multi_parent y "directory 3 has a second name: 'sub2' in 13 (it is also named in 2).  Drop the name in 2" \
	"add-entry /xdir sub2 3 4" "set /dir/sub parent 13"
expect "the name in the parent field's directory kept" eval '! "$BRK" "$IMG" ls /dir | grep -qx sub'
expect "... and its tree" eval '"$BRK" "$IMG" cat /xdir/sub2/deep | grep -qx deep'
case_ dir_unreachable y "directory 13 is not reachable from the root" "unname / xdir"
expect "unreachable directory in /lost+found" eval '"$BRK" "$IMG" ls /lost+found | grep -qx "#13"'
expect "/lost+found is 0700 and counted" [ "$("$BRK" "$IMG" stat /lost+found)" = "40700 3 1 0 1" ]
expect "moved directory's parent is /lost+found" \
	[ "$("$BRK" "$IMG" stat "/lost+found/#13" | cut -d' ' -f5)" = "$("$BRK" "$IMG" ino /lost+found)" ]
case_ dir_cycle y "directory 2: its ancestors form a cycle not reachable from the root" \
	"unname / dir" "add-entry '#3' loop 2 4"
expect "cycle broken: its tree in /lost+found" eval '"$BRK" "$IMG" cat "/lost+found/#2/sub/deep" | grep -qx deep'
case_ inode_unreachable y "inode 5 (regular file) has no name and is not an orphan" "unname / hello"
expect "unreachable file in /lost+found, data intact" \
	eval '"$BRK" "$IMG" cat "/lost+found/#5" | grep -qx "hello world"'
case_ dir_size p "directory 2: size is 9, it has 3 entries" "set /dir size 9"
case_ dir_parent p "directory 3: parent field is 13, but it is named in 2" "set /dir/sub parent 13"
case_ root_parent p "directory 1: parent field is 5, but it is named in 1" "set '#1' parent 5"
case_ dirent_empty y "is damaged (empty)" "put dirent 0000000000000001000000000000abcd"
case_ dirent_stale_copy y "directory 1: entry 'hello' appears twice" "add-entry / hello 5 8 12345"
case_ damaged_dir y "inode 3: malformed record (40 bytes)" "trunc /dir/sub 40"
expect "damaged directory cleared: its child in /lost+found" \
	eval '"$BRK" "$IMG" cat "/lost+found/#12" | grep -qx deep'
case_ nameless_nlink0 y "inode 5 (regular file) has no name and is not an orphan" \
	"unname / hello" "set '#5' nlink 0"
expect "nameless inode with nlink 0: in /lost+found with 1 link" \
	[ "$("$BRK" "$IMG" stat "/lost+found/#5" | cut -d' ' -f2)" = 1 ]

# ---- pass 4
case_ nlink_file p "inode 5: link count is 3, should be 1" "set /hello nlink 3"
case_ nlink_dir p "inode 2: link count is 2, should be 3" "set /dir nlink 2"
case_ nlink_hard p "inode 8: link count is 1, should be 2" "set /hard1 nlink 1"
case_ nlink_root p "inode 1: link count is 9, should be" "set '#1' nlink 9"

# ---- pass 5
case_ block_bad_key y "data database: a record with a malformed key (8 bytes)" "put data 0000000000000005 00"
case_ block_no_owner p "block 0 of missing inode 888" "block '#888' 0 100"
case_ block_not_file y "inode 7: block 0 stored for a symlink" "block /link 0 10"
case_ block_past_eof p "inode 5: block 3 lies past the end of the file (size 12)" "block /hello 3 100"
found "past eof: nblocks too" "inode 5: block count is 1, 2 blocks stored"
case_ block_tail p "inode 5: block 0 holds bytes past the end of the file (size 5)" "set /hello size 5"
expect "tail trimmed" [ "$("$BRK" "$IMG" cat /hello)" = "hello" ]
case_ block_bad_len y "inode 5: block 0 at offset 0 is damaged (bad length)" "block-raw /hello 0 4"
expect "bad block dropped: a hole" [ "$("$BRK" "$IMG" cat /hello | od -An -tx1 | tr -d ' \n')" = "000000000000000000000000" ]
case_ block_csum y "inode 4: block 1 at offset 4072 fails its checksum" "flip /dir/file 1"
expect "damaged block dropped: nblocks 3" [ "$("$BRK" "$IMG" stat /dir/file | cut -d' ' -f4)" = 3 ]
expect "damaged block dropped: the file reads, with a hole" \
	[ "$("$BRK" "$IMG" cat /dir/file | head -c 8144 | tail -c 4072 | tr -d '\0' | wc -c)" = 0 ]
case_ nblocks p "inode 4: block count is 9, 4 blocks stored" "set /dir/file nblocks 9"

# ---- pass 6
case_ xattr_bad_key y "xattr database: a record with a malformed key (8 bytes)" "put xattr 0000000000000005 00"
case_ xattr_nul y "inode 5: xattr 'user.a\\x00b' has an invalid name" "xattr /hello 'user.a\\x00b' 1"
case_ xattr_too_big y "inode 5: xattr 'user.big' has a value of 70000 bytes (at most 65536)" \
	"xattr /hello user.big 70000"
case_ xattr_no_owner p "xattr 'user.x' of missing inode 555" "xattr '#555' user.x 1"

# POSIX ACLs: a value the kernel would refuse is damage (-y drops it); one
# where the kernel never sets one (any on a symlink, a default ACL on a
# non-directory) is dropped by -p
A=system.posix_acl_access D=system.posix_acl_default
case_ xattr_acl_zeros y "inode 4: ACL '$A' is damaged (not an ACL the kernel accepts)" \
	"xattr /dir/file $A 12"
"$DUMP" "$IMG" inode /dir/file >"$T/inode"
expect "damaged ACL: dropped, the other xattr kept" \
	eval 'grep -q "^xattrs: *1$" "$T/inode" && grep -q "^xattr: *user.color" "$T/inode"'
case_ xattr_acl_order y "inode 5: ACL '$A' is damaged" "acl /hello $A g::r,u::rw,o::r"
case_ xattr_acl_no_mask y "inode 2: ACL '$D' is damaged" "acl /dir $D u::rwx,u:5:r,g::rx,o::rx"
case_ xattr_acl_huge y "inode 5: ACL '$A' is damaged (more than 511 entries" \
	"acl /hello $A u::rw,$(printf 'u:%d:r,' $(seq 1000 1511))g::r,m::r,o::r"
case_ xattr_acl_file_default p \
	"inode 5: ACL '$D' on a regular file (the kernel never sets one there)" \
	"acl /hello $D u::rw,u:5:r,g::r,m::r,o::r"
case_ xattr_acl_symlink p "inode 7: ACL '$A' on a symlink (the kernel never sets one there)" \
	"acl /link $A u::rw,u:5:r,g::r,m::r,o::r"
case_ xattr_acl_symlink_bad p "inode 7: ACL '$A' on a symlink" "xattr /link $A 3"
# ACLs kvfs keeps are clean in every mode and kept; so is an access ACL that
# disagrees with the mode (a chmod under -o noacl leaves it so; e2fsck does
# not look either)
cp "$T/base.img" "$IMG"
"$BRK" "$IMG" acl /hello $A u::rw,u:5:r,g::r,m::r,o::r &&
	"$BRK" "$IMG" acl /dir $A u::rwx,g::-,g:7:rx,m::rx,o::x &&
	"$BRK" "$IMG" acl /dir $D u::rwx,u:5:rwx,g::rx,m::rwx,o::- &&
	"$BRK" "$IMG" acl /dir/file $A u::rwx,u:5:r,g::rwx,m::rwx,o::rwx
for m in -n -p -y; do
	run_fsck 0 "ACLs kvfs keeps: $m" $m "$IMG"
	has "ACLs kvfs keeps: $m: clean" "; clean"
done
expect "ACLs kvfs keeps: all four still there" \
	eval '[ "$("$DUMP" "$IMG" keys xattr | grep -c posix_acl)" = 4 ]'

# names kvfs once stored and no longer sets (outside its namespaces, or a
# prefix alone): a warning in every mode, never an error, never dropped
# (the daemon reads and removes them: test_fsck_mounted.sh)
cp "$T/base.img" "$IMG"
"$BRK" "$IMG" xattr /hello foo.bar 3 && "$BRK" "$IMG" xattr /hello x 1 &&
	"$BRK" "$IMG" xattr /dir user. 2 && "$BRK" "$IMG" xattr /dir system.nfs4_acl 4
for m in -n -p -y -n; do
	run_fsck 0 "old xattr names: $m" $m "$IMG"
	has "old xattr names $m: foo.bar" \
		"warning: inode 5: xattr 'foo.bar' is in no namespace kvfs implements"
	has "old xattr names $m: x" "warning: inode 5: xattr 'x' is in no namespace"
	has "old xattr names $m: user." \
		"warning: inode 2: xattr 'user.' is a namespace prefix with nothing after it"
	has "old xattr names $m: system.nfs4_acl" \
		"warning: inode 2: xattr 'system.nfs4_acl' is in no namespace"
	has "old xattr names $m: kept" "Kept: getfattr reads it, setfattr -x removes it."
	has "old xattr names $m: clean" "; clean"
done
run_fsck 0 "old xattr names: --json" -n --json "$IMG"
expect "old xattr names: --json warnings, not errors" /usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
w = [p for p in r["problems"] if p["code"] == "xattr_old_name"]
assert len(w) == 4 and not any(p["error"] or p["fixed"] for p in w), r
assert r["exit"] == 0 and r["left"] == 0 and r["notes"] == 4, r' "$T/out"
# a malformed name beside them is still damage: -y drops it and only it
"$BRK" "$IMG" xattr /hello 'user.a\x00b' 1
run_fsck 1 "old xattr names beside a malformed one: -y" -y "$IMG"
has "old xattr names beside a malformed one: dropped" \
	"xattr 'user.a\x00b' has an invalid name.  Drop it? yes"
run_fsck 0 "old xattr names: after -y" -n "$IMG"
has "old xattr names: all four still there" "warning: inode 2: xattr 'system.nfs4_acl'"
expect "old xattr names: four warnings after -y" [ "$(grep -c '^warning: ' "$T/out")" = 4 ]

# ---- pass 7
case_ orphan_bad_key y "orphan database: a record with a malformed key (2 bytes)" "put orphan 0102"
case_ orphan_missing p "orphan list names missing inode 444" "orphan '#444'"
case_ orphan_linked p "inode 5 is on the orphan list but has 1 links" "orphan /hello"
case_ counter p "inode counter is 5, not above inode" "counter 5"
# the count of unwritten blocks (fallocate's): one more stored than counted,
# a count with none stored, a damaged record; -p counts them again
case_ unwritten_count p "count of unwritten blocks is 0, 1 stored" \
	"block /sparse 0 0" "set /sparse nblocks 2"
expect "unwritten block kept, read as zeros" \
	eval '[ "$("$BRK" "$IMG" cat /sparse | head -c 4072 | tr -d "\\0" | wc -c)" = 0 ]'
expect "unwritten block: the image says it has them" \
	eval '"$DUMP" "$IMG" summary | grep -q "incompat 0x1 (unwritten blocks)"'
case_ unwritten_stale p "count of unwritten blocks is 5, 0 stored" \
	"put meta 756e7772697474656e 0500000000000000"
case_ unwritten_bad p "the count of unwritten blocks is damaged (2 bytes)" \
	"put meta 756e7772697474656e 0102"
case_ unwritten_flag p "1 unwritten blocks stored, but the superblock does not say it holds any" \
	"block /sparse 0 0" "set /sparse nblocks 2" "put meta 756e7772697474656e 0100000000000000"
# counted right, one lying past the end: dropping it counts it out, and the
# count is no problem of its own, before or after
case_ unwritten_past_eof p "inode 6: block 5 lies past the end of the file" \
	"block /sparse 5 0" "set /sparse nblocks 2" "put meta 756e7772697474656e 0100000000000000"
expect "unwritten block past the end: the count was right" \
	eval '! grep -q "count of unwritten" "$T/found"'
# listed as an orphan but linked, with no name: its data goes to /lost+found
case_ orphan_nameless y "inode 5 (regular file) has no name and is not an orphan" \
	"unname / hello" "orphan '#5'"
found "nameless linked orphan: off the list" "inode 5 is on the orphan list but has 1 links"
expect "nameless linked orphan: kept in /lost+found" \
	eval '"$BRK" "$IMG" cat "/lost+found/#5" | grep -qx "hello world"'

# an orphan with no links is a note (a normal state after a crash): -n exits
# 0; -p frees it (exit 1)
cp "$T/base.img" "$IMG"
root_size=$("$BRK" "$IMG" stat / | cut -d' ' -f3)
"$BRK" "$IMG" unname / empty && "$BRK" "$IMG" set "#11" nlink 0 && "$BRK" "$IMG" orphan "#11" &&
	"$BRK" "$IMG" set / size $((root_size - 1))
run_fsck 0 "orphan: -n, a note only" -n "$IMG"
has "orphan note" "note: inode 11: orphan with no links"
run_fsck 1 "orphan: -p frees it" -p "$IMG"
run_fsck 0 "orphan: clean after" -n "$IMG"
expect "orphan freed" eval '! "$BRK" "$IMG" stat "#11" 2>/dev/null'

# an orphan directory (removed while open): a note; -p frees it and its xattr
cp "$T/base.img" "$IMG"
read -r _ root_nlink root_size _ <<<"$("$BRK" "$IMG" stat /)"
"$BRK" "$IMG" unname / xdir && "$BRK" "$IMG" set "#13" nlink 0 && "$BRK" "$IMG" orphan "#13" &&
	"$BRK" "$IMG" set / size $((root_size - 1)) && "$BRK" "$IMG" set / nlink $((root_nlink - 1))
run_fsck 0 "orphan directory: -n, a note only" -n "$IMG"
has "orphan directory note" "note: inode 13: orphan with no links"
run_fsck 1 "orphan directory: -p frees it" -p "$IMG"
run_fsck 0 "orphan directory: clean after" -n "$IMG"
expect "orphan directory freed" eval '! "$BRK" "$IMG" stat "#13" 2>/dev/null'

# ---- shared blocks (kv/share.c): an image made through a real mount, where
# cp uses copy_file_range and the copy borrows the original's blocks. /copy
# borrows /big's, /copy2 borrows them too (a copy of a copy names the home),
# a write made block 10 of /copy its own, /big is removed (the blocks it
# lent stay: a ghost's), /share2 borrows /orig2's, and /orig2 was truncated
# (its borrower got copies first) and written to. Healthy, it checks clean
# and -p changes nothing; then each kind of damage.
share_image() { # IMAGE: make it; the files' bytes go to $T/want
	local bs=4072 i
	[ -c /dev/fuse ] && command -v fusermount3 >/dev/null && [ -x "${KVFS_BIN:-}" ] &&
		[ -x "${MKFS_BIN:-}" ] || return 77
	mkdir -p "$T/mnt" "$T/want"
	"$MKFS_BIN" -q -f "$1" && "$KVFS_BIN" "$1" "$T/mnt" || return 1
	head -c $((600 * bs + 100)) /dev/urandom >"$T/mnt/big" &&
		cp "$T/mnt/big" "$T/mnt/copy" && cp "$T/mnt/copy" "$T/mnt/copy2" &&
		head -c $bs /dev/zero | tr '\0' x |
		dd of="$T/mnt/copy" bs=$bs seek=10 conv=notrunc status=none &&
		head -c $((300 * bs)) /dev/urandom >"$T/mnt/orig2" &&
		cp "$T/mnt/orig2" "$T/mnt/share2" && cp "$T/mnt/big" "$T/want/big" &&
		rm "$T/mnt/big" && truncate -s $((100 * bs)) "$T/mnt/orig2" &&
		printf 'yyyy' | dd of="$T/mnt/orig2" bs=1 seek=$((5 * bs + 7)) conv=notrunc \
			status=none &&
		for i in copy copy2 orig2 share2; do cp "$T/mnt/$i" "$T/want/$i" || return 1; done
	fusermount3 -u "$T/mnt" || return 1
	for i in $(seq 300); do flock -n -x "$1" true 2>/dev/null && return 0; sleep 0.1; done
	return 1
}
reads() { # FILE [WANT]: /FILE of $IMG reads as $T/want/FILE (or WANT)
	cmp -s <("$BRK" "$IMG" cat "/$1") "${2:-$T/want/$1}"
}
# patched FILE FROM COUNT BLOCK: /FILE reads as $T/want/FILE but for blocks
# FROM .. FROM + COUNT - 1, which read as the file BLOCK
patched() {
	local bs=4072 i
	{ head -c $(($2 * bs)) "$T/want/$1"; for ((i = 0; i < $3; i++)); do cat "$4"; done
	  tail -c +$((($2 + $3) * bs + 1)) "$T/want/$1"; } >"$T/patched"
	reads "$1" "$T/patched"
}
zeros() { patched "$1" "$2" "$3" "$T/zero.blk"; } # FILE FROM COUNT: holes there
hexkey() { # hex of each number as 8 bytes, big-endian
	local n
	for n in "$@"; do printf '%016x' "$n"; done
}

S=$T/share.img
share_image "$S"
rc=$?
if [ $rc -eq 77 ]; then
	echo "SKIP: shared blocks (no /dev/fuse, or KVFS_BIN and MKFS_BIN not set)"
elif [ $rc -ne 0 ]; then
	bad "shares: making the image through a mount failed"
else
	BASE=$S
	IMG=$T/c.img
	head -c 4072 /dev/zero >"$T/zero.blk"
	# what fsck_break's block command stores
	/usr/bin/python3 -c 'print("".join(chr(65 + i % 26) for i in range(4072)), end="")' \
		>"$T/abc.blk"
	read -r _ BIG _ <<<"$("$BRK" "$S" extents /copy | head -1)"
	C=$("$BRK" "$S" ino /copy) C2=$("$BRK" "$S" ino /copy2)
	O=$("$BRK" "$S" ino /orig2) S2=$("$BRK" "$S" ino /share2)
	expect "shares: cp within the mount shared blocks ($C borrows from $BIG)" \
		[ "$("$BRK" "$S" extents /copy | wc -l)" -ge 3 ]
	expect "shares: /big is gone" eval '! "$BRK" "$S" stat "#$BIG" 2>/dev/null'
	run_fsck 0 "shares: healthy image is clean" -n "$S"
	has "shares: no block of a missing inode" "; clean"
	has "shares: the summary counts them" "1300 blocks borrowed from 700 shared (5.0 MiB saved)"
	expect "shares: a borrower's count has its borrowed blocks" \
		[ "$("$BRK" "$S" stat /copy2 | cut -d' ' -f4)" = 601 ]
	cp "$S" "$T/share.before"
	run_fsck 0 "shares: -p on a healthy image" -p "$S"
	expect "shares: -p changed nothing" cmp -s "$S" "$T/share.before"
	run_fsck 0 "shares: --json" -n --json "$S"
	expect "shares: --json counts" /usr/bin/python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["counts"]
assert c["shared_blocks"] == 700 and c["borrowed_blocks"] == 1300, c
assert c["saved_bytes"] == 1300 * 4072, c' "$T/out"
	IMG=$S
	expect "shares: each file reads as it did in the mount" \
		eval 'reads copy && reads copy2 && reads orig2 && reads share2'
	IMG=$T/c.img

	# the two halves of a pair: the lend record is rebuilt from its extent;
	# a lend record alone goes, and with it the ghost's block no one
	# borrows any more
	case_ share_no_lend p "inode $C: blocks 0 to 9 borrowed from inode $BIG have no lend record" \
		"del-lend /copy 0"
	expect "no lend record: the files read as before" eval 'reads copy && reads copy2'
	case_ share_no_extent p \
		"inode $BIG: blocks 0 to 255 are lent to inode $C2, which has no such extent" \
		"del-extent /copy2 0"
	expect "no extent: the file reads holes there" zeros copy2 0 256
	expect "no extent: the other borrower reads as before" reads copy
	expect "no extent: its count fixed" [ "$("$BRK" "$IMG" stat /copy2 | cut -d' ' -f4)" = 345 ]
	fresh "del-extent /copy2 0" && "$FSCK" -p "$IMG" >"$T/out"
	has "no extent: -p drops the ghost block only /copy2 borrowed" \
		"block 10 of missing inode $BIG.  Drop it? yes"
	case_ share_lend_bad p \
		"inode $BIG: the lend record of block 0 to inode $C2 is malformed (a value of 1 bytes)" \
		"put lend $(hexkey "$BIG" 0 "$C2" 0) 01"
	expect "malformed lend record: rebuilt, the files read" reads copy2
	case_ share_lend_bad_key y "lend database: a record with a malformed key (2 bytes)" \
		"put lend 0102 00"
	case_ share_extent_bad y "inode $C2: the extent at block 1024 is malformed (a value of 2 bytes)" \
		"put extent $(hexkey "$C2" 1024) 0102"
	expect "malformed extent: dropped, the files read" eval 'reads copy2 && reads copy'
	case_ share_extent_bad_key y "extent database: a record with a malformed key (3 bytes)" \
		"put extent 010203 00"

	# a home block gone, damaged, short or unwritten: its borrowers cannot
	# read it; -y drops it from their extents (holes), -p leaves it
	case_ share_home_missing y \
		"inode $C: borrowed blocks 20 to 20 (those of inode $BIG from block 20 on) are missing" \
		"del-block '#$BIG' 20"
	found "home block missing: both borrowers" "inode $C2: borrowed blocks 20 to 20"
	expect "home block missing: a hole in each borrower" eval 'zeros copy 20 1 && zeros copy2 20 1'
	expect "home block missing: the counts" \
		[ "$("$BRK" "$IMG" stat /copy | cut -d' ' -f4)" = 600 ]
	case_ share_home_csum y "inode $BIG: block 40 at offset 162880 fails its checksum" \
		"flip '#$BIG' 40"
	found "damaged home block: its borrowers told" \
		"inode $C: borrowed blocks 40 to 40 (those of inode $BIG from block 40 on) are damaged"
	expect "damaged home block: holes" eval 'zeros copy 40 1 && zeros copy2 40 1'
	# a short home block serves its borrowers: zeros read after its bytes
	{ head -c 100 "$T/abc.blk"; head -c 3972 /dev/zero; } >"$T/short.blk"
	fresh "block /orig2 7 100" && run_fsck 0 "short home block: clean (it serves)" -n "$IMG"
	expect "short home block: its bytes, zeros after" patched share2 7 1 "$T/short.blk"

	case_ share_home_unwritten y "(those of inode $BIG from block 51 on) are unwritten" \
		"block '#$BIG' 51 0"
	expect "unwritten home block: holes, the ghost's block gone" \
		eval 'zeros copy 51 1 && ! "$DUMP" "$IMG" keys data | grep -q "^$BIG 51 "'
	# a damaged home record is cleared (-y): the blocks it lent stay
	case_ share_home_cleared y "inode $O: malformed record (40 bytes)" "trunc /orig2 40"
	expect "cleared home: its borrower reads as before" reads share2
	# a home whose size was cut: blocks past it go, its borrower keeps copies
	case_ share_home_past_eof p "inode $O: block 25 lies past the end of the file (size 100000)" \
		"set /orig2 size 100000"
	expect "home past its size: the borrower reads as before" reads share2
	expect "home past its size: cut there" eval 'reads orig2 <(head -c 100000 "$T/want/orig2")'

	# flags
	case_ share_borrows_flag p "inode $C borrows blocks but is not flagged so" "set /copy flags 0"
	case_ share_lends_flag p "inode $O lends blocks but is not flagged so" "set /orig2 flags 0"
	case_ share_feature p "extents stored, but the superblock does not say it holds any" \
		"incompat 0"
	expect "feature bit set again: the files read" \
		eval 'reads copy && "$DUMP" "$IMG" summary | grep -q "incompat 0x2"'

	# the borrowers' side
	case_ share_own_block p "inode $C2: blocks 30 to 31 are stored and also borrowed from inode $BIG" \
		"block /copy2 30 4072" "block /copy2 31 4072"
	expect "own blocks kept, the rest borrowed" patched copy2 30 2 "$T/abc.blk"
	expect "own block: count unchanged" [ "$("$BRK" "$IMG" stat /copy2 | cut -d' ' -f4)" = 601 ]
	case_ share_past_eof p \
		"inode $C2: borrowed blocks 101 to 255 lie past the end of the file (size 409600)" \
		"set /copy2 size 409600"
	found "past the size: the block it ends inside" \
		"inode $C2: block 100 holds bytes past the end of the file (size 409600)"
	expect "past the size: reads cut there" eval 'reads copy2 <(head -c 409600 "$T/want/copy2")'
	expect "past the size: 100 blocks borrowed, the last one its own" \
		[ "$("$BRK" "$IMG" extents /copy2)" = "0 $BIG 0 100" ]
	case_ share_overlap y "inode $C2: its extents at blocks 0 and 100 both cover blocks 100 to 109" \
		"extent /copy2 100 '#$BIG' 0 10" "lend /copy2 100 '#$BIG' 0 10"
	expect "overlap: the first kept, the file reads as it was copied" reads copy2
	case_ share_no_owner p "extent at block 0 of missing inode 99 (borrowing from inode $BIG)" \
		"extent '#99' 0 '#$BIG' 0 5" "lend '#99' 0 '#$BIG' 0 5"
	case_ share_not_file y "inode 1: a directory borrows blocks 0 to 4 of inode $BIG (only files do)" \
		"extent '#1' 0 '#$BIG' 0 5" "lend '#1' 0 '#$BIG' 0 5"
	case_ share_borrower_gone y "directory 1: entry 'copy' names missing inode $C" "del-inode /copy"
	found "borrower gone: its extents" "extent at block 0 of missing inode $C"
	expect "borrower gone: the other reads as before" reads copy2
	unset BASE
fi

# a version 1 image (no databases of shared blocks): -n reads them as
# empty; -p upgrades it (the first read-write open does)
cp "$T/base.img" "$IMG" && "$BRK" "$IMG" drop-db extent && "$BRK" "$IMG" drop-db lend &&
	"$BRK" "$IMG" version 1
run_fsck 0 "version 1 image: -n" -n "$IMG"
run_fsck 0 "version 1 image: -p" -p "$IMG"
expect "version 1 image: upgraded" eval '"$DUMP" "$IMG" summary | grep -q "format version: 2"'
run_fsck 0 "version 1 image, upgraded: -n" -n "$IMG"

# ---- compressed blocks (mkfs.kvfs -O compress -d, blocks of 4072): /text
# is 13893 bytes of digits, its 4 blocks compressed (the last holds 1677
# bytes, in a frame of fewer), /short 1 byte, stored as it is. Clean; a
# frame cut short under a valid checksum (it verifies but does not
# decompress) is found and dropped by -y as a bad checksum is; a flipped
# bit is a bad checksum; a size below the last block's data (above its
# frame's end) is bytes past the end, trimmed by -p; the feature bit -p sets
if [ -x "${MKFS_BIN:-}" ]; then
	mkdir -p "$T/ztree"
	seq 1 3000 >"$T/ztree/text"
	printf z >"$T/ztree/short"
	"$MKFS_BIN" -q -O compress -b 4072 -d "$T/ztree" "$T/z.img" || bad "mkfs -O compress -d"
	BASE=$T/z.img
	run_fsck 0 "compressed: clean" -n "$T/z.img"
	has "compressed: counted in the summary" "; 4 compressed (ratio "
	run_fsck 0 "compressed: clean, -v" -n -v "$T/z.img"
	zline="4 compressed: 13893 bytes of data in frames of [0-9]+, ratio [0-9.]+"
	expect "compressed: -v counts them" grep -Eq \
		"^  5 blocks \(0 unwritten, $zline\), 13894 bytes verified$" "$T/out"
	run_fsck 0 "compressed: clean, --json" -n --json "$T/z.img"
	expect "compressed: --json counts them" /usr/bin/python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["counts"]
assert c["compressed_blocks"] == 4 and c["compressed_data_bytes"] == 13893, c
assert 0 < c["compressed_frame_bytes"] < 13893 and c["bytes"] == 13894, c' "$T/out"
	run_fsck 0 "compressed: -p changes nothing" -p "$T/z.img"
	Z=$("$BRK" "$T/z.img" ino /text)
	holed() { # the text with block 1 a hole
		head -c 4072 "$T/ztree/text"
		head -c 4072 /dev/zero
		tail -c +8145 "$T/ztree/text"
	}
	frame="is compressed and does not decompress (its checksum holds)"
	case_ block_frame y "inode $Z: block 1 at offset 4072 $frame" "zcut /text 1"
	expect "frame dropped: a hole, the rest as it was" cmp <("$BRK" "$IMG" cat /text) <(holed)
	case_ block_csum_compressed y "inode $Z: block 2 at offset 8144 fails its checksum" \
		"flip /text 2"
	case_ block_tail_compressed p \
		"inode $Z: block 3 holds bytes past the end of the file (size 13000)" \
		"set /text size 13000"
	expect "compressed tail trimmed at its data" cmp <("$BRK" "$IMG" cat /text) \
		<(head -c 13000 "$T/ztree/text")
	case_ compressed_flag p \
		"4 compressed blocks stored, but the superblock does not say it holds any" \
		"incompat 0"
	# lent: /copy, made by cp in a mount, borrows the compressed blocks of
	# /text; a frame of /text that does not decompress is lost to both
	if [ -c /dev/fuse ] && command -v fusermount3 >/dev/null && [ -x "${KVFS_BIN:-}" ]; then
		mkdir -p "$T/mnt"
		"$MKFS_BIN" -q -O compress -b 4072 "$T/zs.img" &&
			"$KVFS_BIN" "$T/zs.img" "$T/mnt" &&
			dd if="$T/ztree/text" of="$T/mnt/text" bs=1M status=none &&
			cp "$T/mnt/text" "$T/mnt/copy" && fusermount3 -u "$T/mnt" ||
			bad "compressed share: making the image through a mount failed"
		for i in $(seq 300); do
			flock -n -x "$T/zs.img" true 2>/dev/null && break
			sleep 0.1
		done
		BASE=$T/zs.img
		H=$("$BRK" "$BASE" ino /text) C=$("$BRK" "$BASE" ino /copy)
		run_fsck 0 "compressed share: clean" -n "$BASE"
		has "compressed share: counted" "; 4 compressed (ratio "
		case_ block_frame_lent y "inode $H: block 1 at offset 4072 $frame" "zcut /text 1"
		lost="borrowed blocks 1 to 1 (those of inode $H from block 1 on) are damaged"
		found "compressed share: the borrower loses it too" "inode $C: $lost"
		expect "compressed share: the copy reads a hole there" \
			cmp <("$BRK" "$IMG" cat /copy) <(holed)
	else
		echo "SKIP: compressed shared blocks (no /dev/fuse, or KVFS_BIN not set)"
	fi
	unset BASE
else
	echo "SKIP: compressed blocks (MKFS_BIN not set)"
fi

# ---- -p: what it may and may not repair
cp "$T/base.img" "$IMG"
"$BRK" "$IMG" set /hello nlink 4
run_fsck 1 "-p repairs a link count" -p "$IMG"
run_fsck 0 "-p: clean after" -n "$IMG"
cp "$T/base.img" "$IMG"
"$BRK" "$IMG" add-entry / ghost 777 8
run_fsck 4 "-p leaves a dangling entry" -p "$IMG"
has "-p says why" "Drop it? no (needs -y)"
run_fsck 4 "-p: still there" -n "$IMG"
cp "$T/base.img" "$IMG"
"$BRK" "$IMG" add-entry / ghost 777 8
"$BRK" "$IMG" set /hello nlink 4
run_fsck 5 "-p: some fixed, some left: 1|4" -p "$IMG"
run_fsck 1 "-y repairs the rest" -y "$IMG"
run_fsck 0 "clean at last" -n "$IMG"

# ---- --json
cp "$T/base.img" "$IMG"
"$BRK" "$IMG" set /hello nlink 4
"$BRK" "$IMG" add-entry / 'we"ird' 777 8
run_fsck 4 "--json exit" -n --json "$IMG"
expect "--json is valid JSON with the report" /usr/bin/python3 - "$T/out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["exit"] == 4 and r["mode"] == "check", r
codes = {p["code"]: p for p in r["problems"]}
assert codes["nlink"]["inode"] == 5 and codes["nlink"]["fixed"] is False, codes
assert "we\"ird" in codes["dirent_missing"]["message"], codes
assert r["counts"]["inodes"] == 313 and r["counts"]["directories"] == 10, r["counts"]
assert r["left"] == len([p for p in r["problems"] if p["error"]])
PY
run_fsck 1 "--json -y exit" -y --json "$IMG"
expect "--json -y: fixed" /usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["exit"] == 1 and all(p["fixed"] for p in r["problems"]), r' "$T/out"

# ---- garbage: a message and exit 8, the file untouched
head -c 100000 /dev/urandom >"$T/random.img"
: >"$T/empty.img"
printf 'just some text\n%.0s' {1..1000} >"$T/text.img"
"$MKIMAGE" -n 3000 "$T/trunc.img" && truncate -s $(($(stat -c %s "$T/trunc.img") / 2)) "$T/trunc.img"
cp "$T/base.img" "$T/newer.img" && "$BRK" "$T/newer.img" version 3
/usr/bin/python3 -c '
import lmdb, sys
e = lmdb.open(sys.argv[1], subdir=False, lock=False)
with e.begin(write=True) as t: t.put(b"k", b"v")
e.close()' "$T/plain.img"
mkdir "$T/adir"
for f in random empty text trunc newer plain; do
	cp "$T/$f.img" "$T/$f.copy"
	for m in -n -y; do
		run_fsck 8 "$f image $m" $m "$T/$f.img"
		expect "$f image $m: a message" grep -q "fsck.kvfs: .*$f.img" "$T/err"
	done
	expect "$f image: untouched" cmp -s "$T/$f.img" "$T/$f.copy"
done
run_fsck 8 "a directory" -n "$T/adir"
run_fsck 8 "no such file" -n "$T/nosuch.img"
"$FSCK" -n "$T/newer.img" 2>&1 | grep -q "has format version 3" && ok || bad "newer version named"
# a B-tree page whose first node offset is wrong: liblmdb (0.9.24) trusts it
# and fails an assertion (IS_LEAF in mdb_cursor_next: abort, exit 134) while
# pass 3 walks the dirents; the crash guard turns that into a message and
# exit 8 (a sanitizer build has no guard: it reports crashes itself)
if ! ldd "$FSCK" | grep -q libasan; then
	"$MKIMAGE" -n 300 "$T/abort.img" >/dev/null &&
		printf '\x70' | dd of="$T/abort.img" bs=1 seek=$((17 * 4096 + 19)) conv=notrunc \
			status=none
	run_fsck 8 "page that trips an LMDB assertion" -n "$T/abort.img"
	expect "page that trips an LMDB assertion: named" grep -q "'$T/abort.img': crashed" "$T/err"
fi
run_fsck 8 "--json on garbage" -n --json "$T/random.img"
expect "--json on garbage: exit and error" /usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1])); assert r["exit"] == 8 and r["error"], r' "$T/out"

# ---- a clean fresh image, every mode
"$MKIMAGE" "$T/fresh.img"
run_fsck 0 "fresh image -n" -n "$T/fresh.img"
run_fsck 0 "fresh image -p" -p "$T/fresh.img"
run_fsck 0 "fresh image -y -f" -y -f "$T/fresh.img"
has "summary line" "1 inodes, 1 directories, 0 blocks (0 bytes) checked in"

# ---- usage
run_fsck 16 "no image" 
run_fsck 16 "-n and -y" -n -y "$T/fresh.img"
run_fsck 16 "unknown option" --bogus "$T/fresh.img"
expect "unknown option: named, by the program's name" \
	grep -q "^fsck.kvfs: unrecognized option '--bogus'" "$T/err"
run_fsck 16 "unknown short option" -Z "$T/fresh.img"
expect "unknown short option: named, by the program's name" \
	grep -q "^fsck.kvfs: invalid option -- 'Z'" "$T/err"
run_fsck 16 "two images" -n "$T/fresh.img" "$T/base.img"
run_fsck 0 "--help" --help
has "--help names -p's repairs" "-p, -a, --preen"
run_fsck 0 "--version" --version

# ---- progress on a terminal only
"$MKIMAGE" -n 20000 "$T/big.img"
script -qec "$FSCK -n $T/big.img" /dev/null >"$T/tty" 2>&1
expect "progress bar on a tty" grep -q "Pass 5: data blocks \[=*" "$T/tty"
# each redraw: "\r\033[KPass N: NAME [====    ]  12.3%"; the percentage is of
# the whole run, so it never goes back, shows in every pass and ends at 100
tr '\r' '\n' <"$T/tty" | sed -n 's/^\x1b\[KPass \([1-7]\): .*\] *\([0-9.]*\)%$/\1 \2/p' >"$T/pct"
expect "progress: a bar in each of the 7 passes ($(cut -d' ' -f1 "$T/pct" | uniq | tr '\n' ' '))" \
	[ "$(cut -d' ' -f1 "$T/pct" | uniq | tr -d '\n')" = 1234567 ]
expect "progress: percentages rise to 100 ($(cut -d' ' -f2 "$T/pct" | uniq | tr '\n' ' '))" \
	awk 'BEGIN { last = -1 } $2 < last { exit 1 } { last = $2 } END { exit !(NR && last == 100) }' \
	"$T/pct"
run_fsck 0 "no progress when not a tty" -n "$T/big.img"
expect "no progress when not a tty: stderr empty" [ ! -s "$T/err" ]

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
