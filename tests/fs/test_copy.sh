#!/bin/bash
# test_copy.sh - the issue's acceptance check: cp -a /usr/share/doc into a
# mount, diff -r equal, unmount, mount again, still equal; metadata too.
. "$(dirname "$0")/lib.sh"
SRC=${KVFS_COPY_SRC:-/usr/share/doc}
kvfs_mkfs
kvfs_mount
cp -a "$SRC" "$MNT/doc" || { echo "FAIL: cp -a"; exit 1; }
# --no-dereference: relative symlinks that leave the tree point elsewhere in
# any copy; compare the links themselves
diff -r --no-dereference "$SRC" "$MNT/doc" || { echo "FAIL: diff after copy"; exit 1; }
# directory sizes are filesystem-specific (kvfs: the entry count); all else must match
meta() {
	(cd "$1" && find . \( -type d -printf '%p d %m %U %G - %T@\n' \) -o \
		-printf '%p %y %m %U %G %s %T@ %l %n\n' | sort)
}
meta "$SRC" > "$T/want"
meta "$MNT/doc" > "$T/got1"
diff "$T/want" "$T/got1" || { echo "FAIL: metadata after copy"; exit 1; }
kvfs_umount
kvfs_mount
diff -r --no-dereference "$SRC" "$MNT/doc" || { echo "FAIL: diff after remount"; exit 1; }
meta "$MNT/doc" > "$T/got2"
diff "$T/want" "$T/got2" || { echo "FAIL: metadata after remount"; exit 1; }
kvfs_umount
echo "1 passed, 0 failed"
