#!/bin/bash
# test_deb.sh - build the Debian package from a copy of the tree, install it
# on this machine, and use kvfs only through the installed files and the
# system's conventions: mkfs -t kvfs, an fstab line with mount -a, the
# filesystem, umount, fsck -t kvfs, man kvfs; then purge and check nothing
# is left. Needs root; changes the machine (CI's is thrown away).
#
#   tests/pkg/test_deb.sh SRC_DIR
set -u
SRC=$(cd "${1:-.}" && pwd)
if [ "$(id -u)" -ne 0 ] || [ ! -c /dev/fuse ]; then
	echo "SKIP: needs root and /dev/fuse"
	exit 77
fi
if dpkg-query -W -f='${Status}' kvfs 2>/dev/null | grep -q 'install ok installed'; then
	echo "SKIP: a kvfs package is already installed here; not replacing it"
	exit 77
fi
T=$(mktemp -d /tmp/kvfs-deb.XXXXXX)
passes=0 fails=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect() { local name=$1; shift; if "$@"; then ok; else bad "$name"; fi; }
cleanup() {
	mountpoint -q "$T/mnt" 2>/dev/null && umount "$T/mnt"
	dpkg-query -W kvfs >/dev/null 2>&1 && dpkg --purge kvfs >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT

# a clean copy of the tracked tree: the package builds in its source dir
mkdir "$T/src"
(cd "$SRC" && git ls-files -z | xargs -0 cp --parents -t "$T/src") ||
	{ echo "FAIL: copy the tree"; exit 1; }
(cd "$T/src" && dpkg-buildpackage -us -uc -b >"$T/build.log" 2>&1) ||
	{ tail -40 "$T/build.log"; echo "FAIL: dpkg-buildpackage"; exit 1; }
deb=$(ls "$T"/kvfs_*.deb | head -1)
expect "a .deb was built" [ -f "$deb" ]
expect "dpkg -i" dpkg -i "$deb"
for f in /usr/bin/kvfs /usr/sbin/mkfs.kvfs /usr/sbin/fsck.kvfs /usr/bin/kvfs-dump \
	/usr/sbin/kvfs-tune /usr/bin/kvfs-clone /usr/share/man/man8/kvfs-tune.8.gz \
	/usr/share/man/man8/kvfs.8.gz /usr/share/man/man5/kvfs.5.gz \
	/usr/share/man/man1/kvfs-clone.1.gz \
	/usr/share/bash-completion/completions/kvfs-clone; do
	expect "installed $f" [ -e "$f" ]
done

# the conventions, from the installed files only (PATH as mount(8) sets it)
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mkdir "$T/mnt"
expect "mkfs -t kvfs" mkfs -t kvfs "$T/img"
echo "$T/img $T/mnt fuse.kvfs defaults,noatime 0 0" > "$T/fstab"
expect "mount -a with an fstab line" mount -a -T "$T/fstab"
expect "mounted" mountpoint -q "$T/mnt"
expect "use it" sh -c "cp -a /usr/share/doc/kvfs '$T/mnt/' && diff -r /usr/share/doc/kvfs '$T/mnt/kvfs'"
expect "kvfs-clone" sh -c \
	"kvfs-clone '$T/mnt/kvfs' '$T/mnt/copy' && diff -r /usr/share/doc/kvfs '$T/mnt/copy'"
expect "umount" umount "$T/mnt"
for i in $(seq 100); do flock -n -x "$T/img" true && break; sleep 0.1; done
fsck -t kvfs "$T/img" >"$T/fsck.out" 2>&1; rc=$?
expect "fsck -t kvfs exits 0 (got $rc)" [ "$rc" -eq 0 ]
expect "man kvfs shows the page" sh -c "MANWIDTH=80 man kvfs 2>/dev/null | grep -q 'mount a kvfs image'"
expect "man 5 kvfs shows the format" sh -c "MANWIDTH=80 man 5 kvfs 2>/dev/null | grep -q 'format of a kvfs image'"
expect "kvfs --version matches the package" sh -c \
	"kvfs --version | grep -q \"kvfs $(dpkg-query -W -f='${Version}' kvfs)\""

expect "dpkg --purge" dpkg --purge kvfs
expect "purged: no binary left" [ ! -e /usr/bin/kvfs ]
expect "purged: no kvfs-clone left" [ ! -e /usr/bin/kvfs-clone ]
expect "purged: no manual left" [ ! -e /usr/share/man/man8/kvfs.8.gz ]
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
