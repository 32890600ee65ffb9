#!/bin/bash
# test_multiuser.sh - permissions between users on a mount with allow_other,
# with and without the writeback cache: an unprivileged user (kvfstest, made
# as a system user if absent) meets root's files and its own, and root still
# reaches everything (no root squashing). The kernel checks permissions
# (default_permissions); kvfs must store owners, groups and modes so that
# what the kernel decides is what a local filesystem gives.
. "$(dirname "$0")/lib.sh"
export LC_ALL=C
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (to mount with allow_other and switch users)"; exit 77; }
kvfs_second_user

passes=0 fails=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: [$opts] $*"; fails=$((fails + 1)); }
same() { # name, got, wanted
	if [ "$2" = "$3" ]; then ok; else bad "$1: got '$2', wanted '$3'"; fi
}
# refused NAME MESSAGE CMD...: CMD run as the user fails with MESSAGE
# (strerror of the errno: "Permission denied" is EACCES, "Operation not
# permitted" EPERM)
refused() {
	local name=$1 msg=$2 err
	shift 2
	if err=$(as_user "$@" 2>&1); then
		bad "$name: succeeded, wanted '$msg'"
	elif [[ $err != *"$msg"* ]]; then
		bad "$name: '$err', wanted '$msg'"
	else
		ok
	fi
}
allowed() {
	local name=$1 err
	shift
	if err=$(as_user "$@" 2>&1); then ok; else bad "$name: $err"; fi
}
mode_of() { stat -c %a "$1"; }

check_users() {
	local d=$MNT/m
	mkdir "$d"
	chmod 1777 "$d" # like /tmp: anyone creates, only owners remove

	# another user's 0600 file: no reading, no writing
	echo secret > "$d/root600"
	chmod 600 "$d/root600"
	refused "read another user's 0600 file" "Permission denied" cat "$d/root600"
	refused "write another user's 0600 file" "Permission denied" \
		sh -c "echo x >> '$d/root600'"

	# sticky directory: another user's file stays put
	echo theirs > "$d/theirs"
	chmod 666 "$d/theirs" # writable, still not removable by others
	refused "unlink another user's file in a sticky dir" "Operation not permitted" \
		rm -f "$d/theirs"
	refused "rename another user's file in a sticky dir" "Operation not permitted" \
		mv "$d/theirs" "$d/moved"
	allowed "write another user's 0666 file" sh -c "echo more >> '$d/theirs'"
	same "the sticky dir keeps their file" "$(cat "$d/theirs")" "theirs
more"

	# a file the user makes: the user's, with the user's primary group
	allowed "create a file" sh -c "echo mine > '$d/mine'"
	same "owner of a new file" "$(stat -c '%u:%g' "$d/mine")" "$U:$G"
	allowed "mkdir" mkdir "$d/mydir"
	same "owner of a new directory" "$(stat -c '%u:%g' "$d/mydir")" "$U:$G"
	allowed "rename own file in a sticky dir" mv "$d/mine" "$d/mine2"
	allowed "unlink own file in a sticky dir" rm "$d/mine2"

	# xattr names as a user meets them on ext4 and tmpfs (kv/xattr.c has the
	# table): the kernel keeps trusted.* and security.* to root; kvfs refuses
	# a name in no namespace it implements, and a namespace prefix alone
	if command -v setfattr >/dev/null; then
		as_user touch "$d/xa"
		allowed "set user.a on own file" setfattr -n user.a -v 1 "$d/xa"
		refused "set foo.bar" "Operation not supported" setfattr -n foo.bar -v 1 "$d/xa"
		refused "set x" "Operation not supported" setfattr -n x -v 1 "$d/xa"
		refused "set user." "Invalid argument" setfattr -n user. -v 1 "$d/xa"
		refused "get security." "Invalid argument" getfattr -n security. "$d/xa"
		refused "set trusted.a" "Operation not permitted" setfattr -n trusted.a -v 1 "$d/xa"
		refused "set security.a" "Operation not permitted" setfattr -n security.a -v 1 "$d/xa"
		same "the user's xattrs" "$(as_user getfattr --absolute-names -d -m - "$d/xa" |
			grep -v '^#')" 'user.a="1"'
	fi

	# chown: only root gives files away or moves them to foreign groups
	as_user touch "$d/own"
	refused "chown own file to root" "Operation not permitted" chown 0 "$d/own"
	refused "chgrp own file to a foreign group" "Operation not permitted" \
		chgrp "$OTHER_GID" "$d/own"
	refused "chown another user's file" "Operation not permitted" chown "$U" "$d/theirs"
	same "owner after the refused chowns" "$(stat -c '%u:%g' "$d/own")" "$U:$G"

	# set-user-ID and set-group-ID (with group exec) go on a write by a
	# user without CAP_FSETID, and on truncate
	touch "$d/suid" "$d/sgid" "$d/suid-trunc"
	chmod 4777 "$d/suid"
	chmod 2777 "$d/sgid"
	chmod 4777 "$d/suid-trunc"
	allowed "write a 4777 file" sh -c "echo x >> '$d/suid'"
	same "mode after the user's write to a 4777 file" "$(mode_of "$d/suid")" 777
	allowed "write a 2777 file" sh -c "echo x >> '$d/sgid'"
	same "mode after the user's write to a 2777 file" "$(mode_of "$d/sgid")" 777
	allowed "truncate a 4777 file" truncate -s 3 "$d/suid-trunc"
	same "mode after the user's truncate of a 4777 file" "$(mode_of "$d/suid-trunc")" 777
	same "the write itself landed" "$(cat "$d/suid")" x
	# fallocate, punch hole, zero range and copy_file_range change data as a
	# write does, and FUSE leaves the rule to the filesystem (xfstests
	# generic/683-685): set-user-ID goes, and set-group-ID where the group
	# executes or the user is outside the file's group (root's here)
	local how
	for how in "" "-p -l 1 -o 0" "-z -l 1 -o 0" copy; do
		for m in 4777 2777 2666 6766; do
			touch "$d/fa"
			chmod "$m" "$d/fa"
			if [ "$how" = copy ]; then
				allowed "copy_file_range into a $m file" /usr/bin/python3 -c \
					"import os; i = os.open('$d/theirs', os.O_RDONLY); o = os.open('$d/fa', os.O_WRONLY); os.copy_file_range(i, o, 3)"
			else
				allowed "fallocate $how a $m file" fallocate ${how:--l 4096} "$d/fa"
			fi
			want=$(printf '%o' $((8#$m & ~8#6000)))
			same "mode after the user's ${how:-fallocate} of a $m file" "$(mode_of "$d/fa")" "$want"
			rm -f "$d/fa"
		done
	done
	# a member of the file's group keeps set-group-ID without group execute
	touch "$d/fa"
	chgrp "$G" "$d/fa"
	chmod 2666 "$d/fa"
	allowed "fallocate a 2666 file of the user's group" fallocate -l 4096 "$d/fa"
	same "mode after a group member's fallocate of a 2666 file" "$(mode_of "$d/fa")" 2666
	# root's fallocate keeps them
	chmod 6777 "$d/fa"
	fallocate -l 8192 "$d/fa"
	same "mode after root's fallocate of a 6777 file" "$(mode_of "$d/fa")" 6777
	rm -f "$d/fa"

	# root's own write keeps them (CAP_FSETID)
	touch "$d/rootsuid"
	chmod 4755 "$d/rootsuid"
	echo x >> "$d/rootsuid"
	same "mode after root's write to a 4755 file" "$(mode_of "$d/rootsuid")" 4755

	# chown clears set-group-ID (and set-user-ID), by the owner or by root
	allowed "chmod own file 6755" chmod 6755 "$d/own"
	same "mode of own 6755 file" "$(mode_of "$d/own")" 6755
	allowed "chgrp own file to own group" chgrp "$G" "$d/own"
	same "mode after the user's chgrp" "$(mode_of "$d/own")" 755
	touch "$d/rootsgid"
	chmod 2755 "$d/rootsgid"
	chown "$U:$G" "$d/rootsgid"
	same "mode after root's chown of a 2755 file" "$(mode_of "$d/rootsgid")" 755
	same "owner after root's chown" "$(stat -c '%u:%g' "$d/rootsgid")" "$U:$G"

	# setgid directory: new entries take its group; subdirectories its bit
	mkdir "$d/sgdir"
	chgrp "$OTHER_GID" "$d/sgdir"
	chmod 2777 "$d/sgdir"
	allowed "create in a setgid dir" touch "$d/sgdir/f"
	same "group of a file in a setgid dir" "$(stat -c '%u:%g' "$d/sgdir/f")" "$U:$OTHER_GID"
	allowed "mkdir in a setgid dir" mkdir "$d/sgdir/sub"
	same "group and mode of a dir in a setgid dir" \
		"$(stat -c '%u:%g %a' "$d/sgdir/sub")" "$U:$OTHER_GID 2755"
	# the user is not in that group: chmod g+s on the file does not stick
	allowed "chmod 2755 a file of a foreign group" chmod 2755 "$d/sgdir/f"
	same "set-group-ID of a non-member dropped" "$(mode_of "$d/sgdir/f")" 755

	# the user's private things: closed to the user's peers, open to root
	allowed "make a 0700 dir" sh -c "mkdir '$d/private' && chmod 700 '$d/private' &&
		echo hidden > '$d/private/f' && chmod 600 '$d/private/f'"
	same "root reads a user's 0600 file in a 0700 dir" "$(cat "$d/private/f")" hidden
	echo root-was-here > "$d/private/g" || bad "root writes into a user's 0700 dir"
	same "root's file in the user's dir" "$(stat -c '%u' "$d/private/g")" 0
	rm -rf "$d/private" || bad "root removes a user's 0700 dir"
	same "root reads its own 0600 file" "$(cat "$d/root600")" secret
}

snapshot() { (cd "$MNT" && find . -printf '%p %y %m %u:%g %s\n' | sort); }

kvfs_mkfs
for opts in allow_other,writeback allow_other,nowriteback; do
	kvfs_mount -o "$opts"
	check_users
	before=$(snapshot)
	kvfs_umount
	# owners, groups and modes were stored, not only cached
	kvfs_mount -o "$opts"
	same "the tree after a remount" "$(snapshot)" "$before"
	rm -rf "$MNT/m"
	kvfs_umount
done
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
