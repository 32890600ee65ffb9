#!/bin/bash
# test_acl.sh - POSIX ACLs as a user meets them: setfacl, getfacl, chmod,
# creates under a default ACL and umask, set-GID rules, and a second user
# (kvfstest) the kernel lets in or keeps out by the ACL, all run alike on a
# kvfs mount (allow_other) and on a tmpfs, whose transcripts must match
# line for line (tmpfs implements acl(5) in the kernel; kvfs has to do the
# filesystem's half itself). Then: the ACLs survive a remount and fsck;
# -o noacl refuses setfacl and enforces the mode alone; kvfs-tune -o noacl
# makes that the image's default and -o acl overrides it. Last, the mode
# setfacl sets is what stat shows even while other names of the file are
# looked up, and setfacl -b works on a full filesystem.
. "$(dirname "$0")/lib.sh"
export LC_ALL=C
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (allow_other, a second user, tmpfs)"; exit 77; }
for c in setfacl getfacl getfattr; do
	command -v $c >/dev/null || { echo "SKIP: $c missing"; exit 77; }
done
: "${FSCK_BIN:?}" "${TUNE_BIN:?}"
kvfs_second_user
REF=$T/ref
mkdir -p "$REF"
mount -t tmpfs -o mode=755 tmpfs "$REF" || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
CLEANUP_EXTRA='umount "$REF" 2>/dev/null'

cannot_read() { ! as_user cat "$1" >/dev/null 2>&1; }
can_read() { as_user cat "$1" >/dev/null; }
# try WHAT CMD...: one line, WHAT and whether CMD (run as kvfstest) worked
try() {
	local what=$1 err
	shift
	if err=$(as_user "$@" 2>&1 >/dev/null); then
		echo "$what: ok"
	else
		echo "$what: ${err##*: }"
	fi
}
show() { # getfacl and the mode of each path
	getfacl -n "$@" 2>&1
	stat -c '%n %A' "$@"
}

# The whole scenario in the current directory, its transcript on stdout.
scenario() {
	umask 022
	# setfacl on a file: the mode follows, chmod rewrites the mask
	echo secret > f
	chmod 600 f
	try "read 0600" cat f
	setfacl -m "u:$U:r" f
	show f
	try "read with u:$U:r" cat f
	try "write with u:$U:r" sh -c 'echo x >> f'
	setfacl -m "g:$G:rw" f
	try "write with g:$G:rw" sh -c 'echo x >> f'
	setfacl -m m::r f
	show f
	try "write, mask r" sh -c 'echo x >> f'
	chmod 640 f
	show f
	chmod 600 f
	try "read after chmod 600" cat f
	setfacl -m m::rw f
	try "read, mask rw again" cat f
	# an ACL the mode says all of is no ACL: no '+' in ls, no xattr
	setfacl -b f
	show f
	setfacl -m u::rwx,g::r,o::- f
	show f
	getfattr -d -m - --absolute-names f 2>&1

	# a directory's default ACL: creates take it in place of the umask
	mkdir d
	chmod 700 d
	try "create in a 0700 directory" touch d/u0
	setfacl -m "u:$U:rwx" d
	setfacl -d -m "u:$U:rwx,g::r,o::-" d
	try "create with u:$U:rwx" touch d/u1
	for m in 077 022 000; do
		umask $m
		touch d/f$m
		mkdir d/d$m
		mkfifo d/p$m
		ln -s f d/l$m
		show d/f$m d/d$m d/p$m
		stat -c '%n %A' d/l$m
	done
	umask 022
	show d d/u1
	try "read a file made under the default" cat d/f077
	try "write into a subdirectory" touch d/d077/x
	setfacl -k d
	touch d/after-k
	show d d/after-k
	# a default ACL on a file: refused, by the kernel alike
	setfacl -d -m u::rwx f 2>&1 | sed 's/^setfacl: //'

	# set-GID: setfacl by an owner outside the file's group clears it
	mkdir s
	chmod 777 s
	as_user touch s/mine
	chown "$U:$OTHER_GID" s/mine
	chmod 2775 s/mine
	as_user setfacl -m u:0:r s/mine
	stat -c '%n %A' s/mine
	setfacl -b s/mine
	chown "$U:$G" s/mine
	chmod 2775 s/mine
	as_user setfacl -m u:0:r s/mine
	stat -c '%n %A' s/mine
	# and root keeps it
	touch s/root
	chown "$U:$OTHER_GID" s/root
	chmod 2775 s/root
	setfacl -m "u:$U:r" s/root
	stat -c '%n %A' s/root
	# the owner (not root) sets ACLs on its own file; another user cannot
	try "owner setfacl" setfacl -m u:0:r s/mine
	try "setfacl on root's file" setfacl -m "u:$U:rwx" f
	show s/mine
}

kvfs_mkfs
kvfs_mount -o allow_other
chmod 755 "$MNT"
(cd "$REF" && scenario) > "$T/ref.out"
(cd "$MNT" && scenario) > "$T/kvfs.out"
if diff "$T/ref.out" "$T/kvfs.out" > "$T/diff"; then
	ok
else
	bad "kvfs and tmpfs differ (< tmpfs, > kvfs):"
	cat "$T/diff"
fi
# the transcript holds what it should (both could be wrong alike)
grep -q "^read with u:$U:r: ok" "$T/kvfs.out" && grep -q "^read 0600: Permission denied" \
	"$T/kvfs.out" && grep -q "^write, mask r: Permission denied" "$T/kvfs.out" &&
	grep -q "^user:$U:rwx" "$T/kvfs.out" && grep -q "^s/mine -rwxrwxr-x" "$T/kvfs.out" &&
	grep -q "^s/mine -rwxrwsr-x" "$T/kvfs.out" && ok ||
	{ bad "the transcript lacks expected lines:"; cat "$T/kvfs.out"; }
(cd "$MNT" && getfacl -R -n . 2>&1) > "$T/before"

# kept in the image: a remount and fsck see the same
kvfs_umount
"$FSCK_BIN" -n "$IMG" > "$T/fsck.out" 2>&1
expect "fsck -n clean after the scenario (exit $?)" [ $? -eq 0 ]
kvfs_mount -o allow_other
(cd "$MNT" && getfacl -R -n . 2>&1) > "$T/after"
expect "getfacl -R the same after a remount" cmp -s "$T/before" "$T/after"

# -o noacl: ext4's noacl: setfacl refused, no ACL shown, the mode alone
# decides (f grants kvfstest read by ACL only after this)
setfacl -m "u:$U:r" "$MNT/f"
chmod 640 "$MNT/f"
expect "read granted by the ACL" can_read "$MNT/f"
kvfs_umount
kvfs_mount -o allow_other,noacl
out=$(setfacl -m "u:$U:rw" "$MNT/f" 2>&1)
expect "noacl: setfacl refused ($out)" [ "${out##*: }" = "Operation not supported" ]
expect "noacl: getfattr lists no ACL" \
	[ -z "$(getfattr -m - --absolute-names "$MNT/f" 2>/dev/null)" ]
expect "noacl: getfacl shows the mode" \
	[ "$(getfacl -c -n "$MNT/f" 2>/dev/null | xargs)" = "user::rw- group::r-- other::---" ]
expect "noacl: the mode alone decides" cannot_read "$MNT/f"
umask 077
touch "$MNT/d/noacl-made"
expect "noacl: creates take the umask, not the default ACL" \
	[ "$(stat -c %a "$MNT/d/noacl-made")" = 600 ]
kvfs_umount

# kvfs-tune -o noacl: the image's default; -o acl on the mount wins
"$TUNE_BIN" -o noacl "$IMG" > /dev/null
kvfs_mount -o allow_other
expect "tuned noacl: read refused" cannot_read "$MNT/f"
kvfs_umount
kvfs_mount -o allow_other,acl
expect "tuned noacl, mounted -o acl: read granted" can_read "$MNT/f"
expect "the ACL kept through the noacl mounts" \
	[ "$(getfacl -c -n "$MNT/f" 2>/dev/null | grep -c "^user:$U:r--")" = 1 ]
kvfs_umount

# setfacl changes the mode, and the kernel must not keep attributes read
# before it: lookups of other names of the file (answered from before the
# change, arriving after it) run while the mask goes rw and back to r, and
# stat after each setfacl must show the mode it set (the kernel would
# cache a stale one for the whole attribute timeout)
"$TUNE_BIN" -o '' "$IMG" > /dev/null
kvfs_mount
mkdir "$MNT/links"
echo x > "$MNT/links/f"
chmod 644 "$MNT/links/f"
setfacl -m "u:$U:r" "$MNT/links/f"
for i in $(seq 1200); do ln "$MNT/links/f" "$MNT/links/l$i"; done
kvfs_umount
kvfs_mount # the names not in the kernel's cache: each stat below is a LOOKUP
(cd "$MNT/links" && for i in 0 1 2 3; do
	for n in $(seq $((i * 300 + 1)) $((i * 300 + 300))); do stat l$n; done > /dev/null &
done; wait) &
looking=$!
stale=0 rounds=0
while kill -0 $looking 2>/dev/null; do
	setfacl -m m::rw "$MNT/links/f"
	[ "$(stat -c %a "$MNT/links/f")" = 664 ] || stale=$((stale + 1))
	setfacl -m m::r "$MNT/links/f"
	[ "$(stat -c %a "$MNT/links/f")" = 644 ] || stale=$((stale + 1))
	rounds=$((rounds + 1))
done
wait
expect "setfacl during lookups: no stale mode ($stale in $rounds rounds)" [ $stale -eq 0 ]
kvfs_umount

# a full filesystem: setfacl -b drops an ACL, a delete, which works as
# setfattr -x does (filled with data, then with names and values until
# neither a name with a value nor a byte more on the file fits)
kvfs_mkfs
kvfs_mount -o max_size=40M
touch "$MNT/a" "$MNT/b"
setfacl -m "u:$U:r,g:$G:rw" "$MNT/a" "$MNT/b"
dd if=/dev/urandom of="$MNT/fill" bs=64k count=1000 status=none 2>/dev/null
value=$(printf '%300s' | tr ' ' v)
for i in $(seq 1000); do
	touch "$MNT/n$i" 2>/dev/null && setfattr -n user.v -v "$value" "$MNT/n$i" 2>/dev/null ||
		setfattr -n "user.w$i" -v 1 "$MNT/a" 2>/dev/null || break
done
expect "full: a new name refused" eval '! touch "$MNT/one-more" 2>/dev/null'
out=$(setfacl -b "$MNT/a" 2>&1)
expect "full: setfacl -b works ($out)" [ -z "$out" ]
expect "full: the ACL is gone" \
	[ -z "$(getfattr -m posix_acl --absolute-names "$MNT/a" 2>/dev/null)" ]
kvfs_umount
kvfs_results
