#!/bin/bash
# test_options.sh - every kernel-cache option, on and off: a change made
# through the mount is always visible at once (contents, sizes, listings,
# symlink targets, renames, attributes), also through a second process; and
# the access time a read sets, under each atime option.
. "$(dirname "$0")/lib.sh"
passes=0 fails=0
expect() {
	local name=$1; shift
	if "$@"; then passes=$((passes + 1)); else echo "FAIL: [$opts] $name"; fails=$((fails + 1)); fi
}
same() { [ "$1" = "$2" ] || { echo "  got '$1', wanted '$2'"; return 1; }; }

check_visibility() {
	local d=$MNT/v
	mkdir "$d"
	echo one > "$d/f"
	expect "read after write" same "$(cat "$d/f")" one
	echo two > "$d/f"                       # overwrite, same size
	expect "overwrite seen" same "$(cat "$d/f")" two
	echo three-longer >> "$d/f"             # append grows it
	expect "append seen" same "$(tail -1 "$d/f")" three-longer
	expect "size after append" same "$(stat -c %s "$d/f")" 17
	truncate -s 2 "$d/f"
	expect "truncate seen" same "$(cat "$d/f")" tw
	expect "listing has f" same "$(ls "$d")" f
	touch "$d/g"
	expect "listing after create" same "$(ls "$d" | tr '\n' ' ')" "f g "
	mv "$d/g" "$d/h"
	expect "listing after rename" same "$(ls "$d" | tr '\n' ' ')" "f h "
	rm "$d/h"
	expect "listing after unlink" same "$(ls "$d" | tr '\n' ' ')" "f "
	expect "unlinked name gone" eval '! stat "$d/h" 2>/dev/null'
	ln -s target1 "$d/s"
	expect "readlink" same "$(readlink "$d/s")" target1
	rm "$d/s"; ln -s target2 "$d/s"
	expect "readlink after retarget" same "$(readlink "$d/s")" target2
	chmod 600 "$d/f"
	expect "chmod seen" same "$(stat -c %a "$d/f")" 600
	touch -d @1000000000 "$d/f"
	expect "utimes seen" same "$(stat -c %Y "$d/f")" 1000000000
	# another process writes, this one reads (page cache shared, or dropped)
	sh -c "printf 'from child' > '$d/c'"
	expect "written by another process" same "$(cat "$d/c")" "from child"
	# a file replaced by rename while this shell holds the old name open
	exec 9<"$d/c"
	echo replaced > "$d/c.new"; mv "$d/c.new" "$d/c"
	expect "rename over: new content" same "$(cat "$d/c")" replaced
	expect "rename over: old fd keeps old content" same "$(cat <&9)" "from child"
	exec 9<&-
	rm -rf "$d"
}

kvfs_mkfs
for opts in "" writeback nowriteback nokeepcache noskipopen nocachedir nocachesymlinks noreaddirplus \
	timeout=0 "nowriteback,nokeepcache,noskipopen,nocachedir,nocachesymlinks,noreaddirplus"; do
	if [ -n "$opts" ]; then kvfs_mount -o "$opts"; else kvfs_mount; fi
	check_visibility
	kvfs_umount
	# and what was written is in the image
	kvfs_mount
	expect "empty after rm -rf" same "$(ls "$MNT" | wc -l)" 0
	kvfs_umount
done
# the atime options: a read's access time is what the next stat shows, in
# the same mount (the kernel's cached attributes must not hide it, also when
# the update commits after the read was answered: durability=full). Each
# mount starts with the file out of the page cache, so the read reaches
# kvfs (the kernel sets no atime on a FUSE inode: pages it has cached are
# read without kvfs hearing of it).
old=978307200 # 2001-01-01
kvfs_mount
echo data > "$MNT/a"
kvfs_umount
for opts in relatime strictatime relatime,durability=full strictatime,durability=full \
	noatime relatime,writeback; do
	kvfs_mount -o "$opts"
	touch -a -d @$old "$MNT/a"
	kvfs_umount
	kvfs_mount -o "$opts"
	cat "$MNT/a" >/dev/null
	got=$(stat -c %X "$MNT/a")
	if [ "$opts" = noatime ]; then
		expect "noatime: a read leaves the access time" same "$got" $old
	else
		expect "$opts: a read sets the access time, stat shows it" [ "$got" -gt $old ]
	fi
	kvfs_umount
done

# The transport: -o noio_uring serves over /dev/fuse (libfuse starts no
# ring threads), the default and -o io_uring over io_uring where this kvfs's
# libfuse (kvfs -V) and the kernel (the fuse module's enable_uring) have it;
# the log line says which, in the foreground on stderr.
ring_threads() {
	local pid
	pid=$(pgrep -f -- " $MNT( |\$)" | head -1)
	cat /proc/"$pid"/task/*/comm 2>/dev/null | grep -c '^fuse-ring' || true
}
uring=0
if "$KVFS_DAEMON" -V | grep -qE 'libfuse 3\.(1[89]|[2-9][0-9])' &&
	[ "$(cat /sys/module/fuse/parameters/enable_uring 2>/dev/null)" = Y ] &&
	[ "${KVFS_TEST_TRANSPORT:-}" != devfuse ]; then
	uring=1
fi
for opts in noio_uring io_uring ""; do
	if [ -n "$opts" ]; then kvfs_mount -o "$opts"; else kvfs_mount; fi
	check_visibility
	if [ "$opts" != noio_uring ] && [ $uring = 1 ]; then
		expect "${opts:-default}: served over io_uring" [ "$(ring_threads)" -gt 0 ]
	else
		expect "${opts:-default}: served over /dev/fuse" same "$(ring_threads)" 0
	fi
	kvfs_umount
done
"$KVFS_BIN" -f "$IMG" "$MNT" 2>"$T/fg.log" &
for i in $(seq 100); do mountpoint -q "$MNT" && break; sleep 0.05; done
ls "$MNT" >/dev/null
kvfs_umount
wait
if [ $uring = 1 ]; then
	expect "the log names the transport" grep -q "requests over io_uring" "$T/fg.log"
else
	expect "the log names the transport and why" grep -q "requests over /dev/fuse: ." "$T/fg.log"
fi

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
