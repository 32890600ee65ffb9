#!/bin/bash
# test_mount.sh - the daemon as an operator meets it: one read-write mount
# per image, bad images refused and left untouched, option errors, signals,
# mount -t fuse.kvfs and an fstab line, ro, max_size, an idle daemon.
. "$(dirname "$0")/lib.sh"
not_mounted() { ! mountpoint -q "$MNT"; }

kvfs_mkfs
echo hello > "$T/hello"

# --help, --version, usage errors
expect "--help exits 0" "$KVFS_BIN" --help >/dev/null
expect "--version exits 0" "$KVFS_BIN" --version >/dev/null
"$KVFS_BIN" "$IMG" "$MNT" -o no_such_option 2>"$T/err"; rc=$?
expect "unknown option: exit 2 (got $rc)" [ "$rc" -eq 2 ]
expect "unknown option: message" grep -q "no_such_option\|unknown option\|bad mount option" "$T/err"
expect "unknown option: not mounted" not_mounted
"$KVFS_BIN" "$IMG" -o durability=bogus "$MNT" 2>"$T/err"; rc=$?
expect "bad durability: exit 2" [ "$rc" -eq 2 ]
"$KVFS_BIN" "$IMG" 2>"$T/err"; rc=$?
expect "missing mountpoint: exit 2" [ "$rc" -eq 2 ]
# a bad option is named, before the image is even looked at
for a in --bogus -x; do
	"$KVFS_BIN" "$a" "$IMG" "$MNT" 2>"$T/err"; rc=$?
	expect "$a: exit 2 (got $rc)" [ "$rc" -eq 2 ]
	expect "$a: named" grep -q "^kvfs: unknown option '$a'" "$T/err"
	expect "$a: nothing else said" [ "$(wc -l <"$T/err")" -le 2 ]
	expect "$a: not mounted" not_mounted
done
"$KVFS_BIN" "$T/no-such.img" "$MNT" -o no_such_option 2>"$T/err"; rc=$?
expect "unknown -o option, missing image: exit 2 (got $rc)" [ "$rc" -eq 2 ]
expect "unknown -o option, missing image: the option named" grep -q "no_such_option" "$T/err"
# each limit its own message, naming what was given
for o in threads=0 threads=257 threads=abc threads=-1 timeout=-1 timeout=abc max_write=5 \
	max_write=2M max_write=2000000; do
	key=${o%%=*} # not "name": expect has a local of that name
	"$KVFS_BIN" "$IMG" "$MNT" -o "$o" 2>"$T/err"; rc=$?
	expect "-o $o: exit 2 (got $rc)" [ "$rc" -eq 2 ]
	expect "-o $o: one line naming $key and '${o#*=}'" eval \
		'[ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "^kvfs: $key .*'"'${o#*=}'"'" "$T/err"'
	for other in threads timeout max_write; do
		[ "$other" = "$key" ] && continue
		expect "-o $o: says nothing of $other" eval '! grep -q "$other" "$T/err"'
	done
	expect "-o $o: not mounted" not_mounted
done
# sizes written as mkfs.kvfs -b takes them: one parser for both
for o in max_size=1GiB max_size=1gib max_write=64KiB max_write=1MiB max_write=512kB; do
	"$KVFS_BIN" "$IMG" "$MNT" -o "$o" 2>"$T/err"; rc=$?
	expect "-o $o: exit 0 (got $rc: $(head -c 200 "$T/err"))" [ "$rc" -eq 0 ]
	expect "-o $o: mounted" mountpoint -q "$MNT"
	mountpoint -q "$MNT" && kvfs_umount
done

# bad images: a clear message, non-zero exit, the file untouched
head -c 100000 /dev/urandom > "$T/random.img"
: > "$T/empty.img"
printf 'just some text\n%.0s' {1..1000} > "$T/text.img"
cp "$IMG" "$T/newer.img"
/usr/bin/python3 - "$T/newer.img" <<'PY'
import lmdb, struct, sys
env = lmdb.open(sys.argv[1], subdir=False, max_dbs=8, lock=False)
meta = env.open_db(b"meta")
with env.begin(write=True, db=meta) as t:
    sb = bytearray(t.get(b"super"))
    sb[8:12] = struct.pack("<I", 3)
    t.put(b"super", bytes(sb))
env.close()
PY
"$MKFS_BIN" -q "$T/trunc.img"
"$KVFS_BIN" "$T/trunc.img" "$MNT" &&
	{ dd if=/dev/urandom of="$MNT/big" bs=1M count=8 status=none; fusermount3 -u "$MNT"; }
while ! flock -n -x "$T/trunc.img" true; do sleep 0.1; done
truncate -s $(( $(stat -c %s "$T/trunc.img") / 2 )) "$T/trunc.img"
for f in random empty text newer trunc; do
	cp "$T/$f.img" "$T/$f.copy"
	"$KVFS_BIN" "$T/$f.img" "$MNT" 2>"$T/err"; rc=$?
	expect "$f image refused (exit $rc)" [ "$rc" -ne 0 ]
	expect "$f image: a message" grep -q "kvfs: .*$f.img" "$T/err"
	expect "$f image: untouched" cmp -s "$T/$f.img" "$T/$f.copy"
	expect "$f image: not mounted" not_mounted
	mountpoint -q "$MNT" && fusermount3 -u "$MNT"
done
grep -q "format version 3" "$T/err" 2>/dev/null || \
	"$KVFS_BIN" "$T/newer.img" "$MNT" 2>&1 | grep -q "format version 3" && ok || bad "newer: names the version"

# whoever reads the image reads every file in it: mkfs makes it 0600, its
# lock file follows, and the daemon warns (once) when others may read it
expect "mkfs made the image 0600" [ "$(stat -c %a "$IMG")" = 600 ]
"$KVFS_BIN" "$IMG" "$MNT" 2>"$T/err" || bad "mount the 0600 image"
expect "0600: lock file 0600 (got $(stat -c %a "$IMG-lock"))" [ "$(stat -c %a "$IMG-lock")" = 600 ]
expect "0600: no warning" eval '! [ -s "$T/err" ]'
kvfs_umount
chmod 644 "$IMG"
"$KVFS_BIN" "$IMG" "$MNT" 2>"$T/err" || bad "mount the 0644 image"
expect "0644: one warning" [ "$(grep -c "image is readable by other users (mode 0644)" "$T/err")" = 1 ]
kvfs_umount
chmod 600 "$IMG"

# unknown feature bits: an incompat one is refused outright; a ro_compat one
# is refused read-write with the way to use the image read-only, and -o ro
# mounts it
for f in ro_compat:24 incompat:32; do
	cp "$IMG" "$T/${f%:*}.img"
	/usr/bin/python3 - "$T/${f%:*}.img" "${f#*:}" <<'PY'
import lmdb, struct, sys
env = lmdb.open(sys.argv[1], subdir=False, max_dbs=8, lock=False)
meta = env.open_db(b"meta")
off = int(sys.argv[2])
with env.begin(write=True, db=meta) as t:
    sb = bytearray(t.get(b"super"))
    sb[off:off + 8] = struct.pack("<Q", 1 << 40)
    t.put(b"super", bytes(sb))
env.close()
PY
done
"$KVFS_BIN" "$T/ro_compat.img" "$MNT" 2>"$T/err"; rc=$?
expect "ro_compat feature: refused read-write (exit $rc)" [ "$rc" -ne 0 ]
expect "ro_compat feature: not mounted" not_mounted
expect "ro_compat feature: suggests -o ro ($(head -c 300 "$T/err"))" grep -q -- "-o ro" "$T/err"
"$KVFS_BIN" "$T/ro_compat.img" "$MNT" -o ro 2>"$T/err"; rc=$?
expect "ro_compat feature: -o ro mounts it (exit $rc: $(head -c 300 "$T/err"))" [ "$rc" -eq 0 ]
expect "ro_compat feature: -o ro reads it" stat "$MNT/." >/dev/null
mountpoint -q "$MNT" && fusermount3 -u "$MNT" && kvfs_wait_closed "$T/ro_compat.img"
"$KVFS_BIN" "$T/incompat.img" "$MNT" -o ro 2>"$T/err"; rc=$?
expect "incompat feature: refused even with -o ro (exit $rc)" [ "$rc" -ne 0 ]
expect "incompat feature: names the features" grep -q "incompat 0x10000000000" "$T/err"
expect "incompat feature: no read-only advice" eval '! grep -q -- "-o ro" "$T/err"'
mountpoint -q "$MNT" && fusermount3 -u "$MNT"

# one read-write mount per image
kvfs_mount
mkdir -p "$T/mnt2"
"$KVFS_BIN" "$IMG" "$T/mnt2" 2>"$T/err"; rc=$?
expect "second mount refused" [ "$rc" -ne 0 ]
expect "second mount: message" grep -q "in use" "$T/err"
expect "second mount: not mounted" eval '! mountpoint -q "$T/mnt2"'
cp "$T/hello" "$MNT/hello"

# an idle daemon uses no CPU
pid=$(kvfs_pid)
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
sleep 1; c0=$(cpu); sleep 3; c1=$(cpu)
expect "idle daemon: no CPU ($c0 -> $c1 ticks)" [ $((c1 - c0)) -le 1 ]

# SIGTERM unmounts cleanly
kill -TERM "$pid"
kvfs_wait_closed
expect "SIGTERM unmounts" not_mounted
kvfs_mount
expect "data after SIGTERM" cmp -s "$T/hello" "$MNT/hello"
kill -INT "$(kvfs_pid)"
kvfs_wait_closed
expect "SIGINT unmounts" not_mounted

# mount(8) through mount.fuse3: the "kvfs#IMAGE" form names the binary
expect "mount -t fuse kvfs#IMAGE" mount -t fuse "$KVFS_BIN#$IMG" "$MNT"
expect "mount -t fuse: data" cmp -s "$T/hello" "$MNT/hello"
expect "umount" umount "$MNT"
kvfs_wait_closed
echo "$KVFS_BIN#$IMG $MNT fuse defaults,noatime 0 0" > "$T/fstab"
expect "fstab line (kvfs#IMAGE) mounts" mount -T "$T/fstab" "$MNT"
expect "fstab: data" cmp -s "$T/hello" "$MNT/hello"
expect "fstab: options reach the kernel" eval 'grep " $MNT " /proc/mounts | grep -q noatime'
umount "$MNT"
kvfs_wait_closed
# -t fuse.kvfs: mount.fuse3 runs "kvfs" from the system PATH, where an
# installed kvfs lives; link the binary under test there for the test
SYS_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
if [ ! -e /usr/local/sbin/kvfs ] && [ -w /usr/local/sbin ]; then
	if ! PATH=$SYS_PATH command -v kvfs >/dev/null; then
		# the caller's PATH is not searched (README, Installing): mount(8)
		# gives the helper its own, SYS_PATH
		mkdir -p "$T/prefix/bin" && ln -s "$KVFS_BIN" "$T/prefix/bin/kvfs"
		PATH=$T/prefix/bin:$PATH mount -t fuse.kvfs "$IMG" "$MNT" 2>"$T/err"; rc=$?
		expect "mount -t fuse.kvfs: kvfs in the caller's PATH only is not found (exit $rc)" \
			[ "$rc" -ne 0 ]
		expect "mount -t fuse.kvfs: not found, says the shell" grep -q "kvfs: not found" "$T/err"
		mountpoint -q "$MNT" && umount "$MNT" && kvfs_wait_closed
	fi
	ln -s "$KVFS_BIN" /usr/local/sbin/kvfs
	CLEANUP_EXTRA='rm -f /usr/local/sbin/kvfs'
	expect "mount -t fuse.kvfs" mount -t fuse.kvfs "$IMG" "$MNT"
	expect "mount -t fuse.kvfs: data" cmp -s "$T/hello" "$MNT/hello"
	umount "$MNT"
	kvfs_wait_closed
	echo "$IMG $MNT fuse.kvfs defaults 0 0" > "$T/fstab"
	expect "fstab line (fuse.kvfs) mounts" mount -T "$T/fstab" "$MNT"
	expect "fstab (fuse.kvfs): data" cmp -s "$T/hello" "$MNT/hello"
	umount "$MNT"
	kvfs_wait_closed
	rm -f /usr/local/sbin/kvfs
	CLEANUP_EXTRA=:
else
	echo "note: /usr/local/sbin/kvfs exists; -t fuse.kvfs left to the installed kvfs"
fi

# ro
kvfs_mount -o ro
expect "ro: reads" cmp -s "$T/hello" "$MNT/hello"
expect "ro: writes refused" eval '! touch "$MNT/new" 2>/dev/null'
kvfs_umount

# a read-only view beside a read-write mount of the same image, made before
# or after it: what the writer creates, rewrites and removes shows in the
# view's ls, stat and cat within its 1 s cache timeout
RO=$T/ro
mkdir -p "$RO"
# seen WHAT CMD...: CMD succeeds within 3 s (the timeout and some slack)
seen() {
	local what=$1 t0=$EPOCHREALTIME ms
	shift
	until "$@" 2>/dev/null; do
		ms=$(( (${EPOCHREALTIME/./} - ${t0/./}) / 1000 ))
		[ "$ms" -lt 3000 ] || { bad "ro view: $what still not seen after $ms ms"; return; }
		sleep 0.05
	done
	ok
}
listed() { ls "$RO/live" | tr '\n' ' ' | grep -qx "$1"; }
for order in rw-first ro-first; do
	[ $order = ro-first ] && { "$KVFS_BIN" "$IMG" "$RO" -o ro || bad "$order: ro mount"; }
	kvfs_mount
	mkdir -p "$MNT/live"
	echo aaaa >"$MNT/live/f"
	[ $order = rw-first ] && { "$KVFS_BIN" "$IMG" "$RO" -o ro || bad "$order: ro mount"; }
	seen "$order: the directory" test -d "$RO/live"
	seen "$order: the first file" grep -qx aaaa "$RO/live/f"
	ls -l "$RO/live" >/dev/null # the kernel has the listing and the pages now
	echo new-file >"$MNT/live/g"
	seen "$order: a created file in ls" listed "f g "
	seen "$order: a created file's stat" eval '[ "$(stat -c %s "$RO/live/g")" = 9 ]'
	seen "$order: a created file's data" grep -qx new-file "$RO/live/g"
	echo bbbb >"$MNT/live/f" # same size: only the times tell
	seen "$order: a rewritten file's data" grep -qx bbbb "$RO/live/f"
	echo longer-now >>"$MNT/live/f"
	seen "$order: a grown file's stat" eval '[ "$(stat -c %s "$RO/live/f")" = 16 ]'
	rm "$MNT/live/g"
	seen "$order: a removed file gone from ls" listed "f "
	seen "$order: a removed file gone from stat" eval '! stat "$RO/live/g"'
	fusermount3 -u "$RO"
	kvfs_umount
done

# max_size: the map cannot grow past it; ENOSPC, nothing committed lost
kvfs_mount -o max_size=16M,durability=none
dd if=/dev/urandom of="$T/r4" bs=1M count=4 status=none
cp "$T/r4" "$MNT/r4"
sync "$MNT/r4"
dd if=/dev/zero of="$MNT/fill" bs=1M count=64 conv=fsync status=none 2>"$T/err"; rc=$?
expect "max_size: a write past it fails" [ "$rc" -ne 0 ]
expect "max_size: ENOSPC" grep -q "No space left" "$T/err"
expect "max_size: earlier file intact" cmp -s "$T/r4" "$MNT/r4"
rm -f "$MNT/fill"
# the kernel forgets the unlinked inode, then kvfs frees its blocks: soon
for i in $(seq 50); do
	[ "$(stat -f -c %a "$MNT")" -gt 2048 ] && break
	sleep 0.1
done
expect "max_size: room again after rm" cp "$T/r4" "$MNT/r4b"
kvfs_umount
kvfs_mount
expect "max_size: files after remount" cmp -s "$T/r4" "$MNT/r4"
expect "max_size: second file after remount" cmp -s "$T/r4" "$MNT/r4b"
kvfs_umount

# room kept allocated past the image's end: free space on the mount, given
# back at unmount (a fresh image: one with free pages inside grows later,
# so how much room is left at the end depends on when the kicks came)
kvfs_mkfs
kvfs_mount -o durability=none
# 17 MiB: kicks at 8 and 16 MiB of data, 8 MiB allocated ahead at each
dd if=/dev/urandom of="$MNT/big" bs=1M count=17 conv=fsync status=none
for i in $(seq 50); do # the flusher runs on its own thread
	ahead=$(( $(stat -c '%b*%B-%s' "$IMG") ))
	[ "$ahead" -ge $((2 << 20)) ] && break
	sleep 0.1
done
expect "ahead: room allocated past the image's end ($ahead bytes, image $(stat -c %s "$IMG"))" \
	[ "$ahead" -ge $((2 << 20)) ]
# other tests may share the host filesystem: the smaller of two looks
host1=$(( $(stat -f -c '%a*%S' "$T") ))
free=$(( $(stat -f -c '%a*%S' "$MNT") ))
host2=$(( $(stat -f -c '%a*%S' "$T") ))
host=$(( host1 < host2 ? host1 : host2 ))
expect "ahead: counted as free on the mount" [ "$free" -ge $((host + ahead - (512 << 10))) ]
kvfs_umount
ahead=$(( $(stat -c '%b*%B-%s' "$IMG") ))
expect "ahead: given back at unmount" [ "$ahead" -lt $((1 << 20)) ]

# deleting a file is one commit: the kernel's SETATTR of the unlinked
# file's ctime (writeback cache) rides along with the next one
txn() { mdb_stat -n -e "$IMG" | awk '/Last transaction ID/ {print $4}'; }
if command -v mdb_stat >/dev/null; then
	kvfs_mount
	mkdir "$MNT/del"
	for i in $(seq 100); do echo "$i" >"$MNT/del/f$i"; done
	sync "$MNT/del/f1"
	sleep 0.2 # lazy work from the creates is committed by now
	t0=$(txn)
	rm "$MNT"/del/f*
	t1=$(txn)
	expect "delete: at most 1.3 commits per file ($((t1 - t0)) for 100)" \
		[ $((t1 - t0)) -le 130 ]
	# creating one is two: the SETATTR of its times at close rides along
	t0=$(txn)
	for i in $(seq 100); do echo "$i" >"$MNT/del/c$i"; done
	t1=$(txn)
	expect "create: at most 2.5 commits per file ($((t1 - t0)) for 100)" \
		[ $((t1 - t0)) -le 250 ]
	rm "$MNT"/del/c*
	echo kept >"$MNT/del/open"
	exec 7<"$MNT/del/open"
	rm "$MNT/del/open"
	expect "delete: an open file's data still reads" [ "$(cat <&7)" = kept ]
	exec 7<&-
	kvfs_umount
	"$DUMP_BIN" "$IMG" summary >"$T/summary" 2>&1
	expect "delete: no orphan left after unmount" grep -Eq "orphans: +0$" "$T/summary"
	expect "delete: fsck clean" "$FSCK_BIN" -n "$IMG"
fi

# With the writeback cache the kernel owns a file's mtime and ctime: what
# stat(2) showed is what is stored, also when a rewrite falls in the tick
# of its truncation and the kernel sends no new times
kvfs_mount
for i in 1 2 3 4 5 6; do echo "$i" >"$MNT/t$i"; done
sleep 0.1
for i in 1 2 3 4 5 6; do # one tick or two
	echo "again $i" >"$MNT/t$i"
	fallocate -l 65536 "$MNT/t$i"
done
stat -c '%n %.9Y %.9Z' "$MNT"/t? >"$T/before"
kvfs_umount
kvfs_mount
stat -c '%n %.9Y %.9Z' "$MNT"/t? >"$T/after"
expect "times: a rewritten, fallocated file's mtime and ctime are what stat showed before the remount" \
	cmp -s "$T/before" "$T/after"
kvfs_umount

# The times the kernel writes back at close and at fsync (writeback cache)
# commit with the next change, but every answer that gives them back
# follows their commit: a LOOKUP after the kernel forgot the file, fsync(2).
cat >"$T/times.py" <<'PY'
import os, sys, time
what, path = sys.argv[1], sys.argv[2]
def write(i):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    time.sleep(0.01) # a later tick: the write changes the kernel's mtime
    os.write(fd, b"%d\n" % i)
    return fd
if what == "forget":  # write and close, make the kernel forget the file
    stale = 0
    for i in range(20):
        os.close(write(i))
        kernel = os.stat(path).st_mtime_ns
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2")
        if os.stat(path).st_mtime_ns != kernel:
            stale += 1
    print(stale)
elif what == "fsync":  # write and fsync it, write and close another,
    other = os.open(path + ".other", os.O_WRONLY | os.O_CREAT) # fsync one,
    fd = write(0)                                  # kill the daemon at once
    os.fsync(fd)
    synced = os.fstat(fd).st_mtime_ns
    path += ".closed"
    fd = write(1)
    closed = os.fstat(fd).st_mtime_ns # what close sends; no stat after it:
    os.close(fd)                      # a GETATTR would commit it
    os.fsync(other)
    os.kill(int(sys.argv[3]), 9)
    print(synced, closed)
    os._exit(0)
else:
    print(os.stat(path).st_mtime_ns, os.stat(path + ".closed").st_mtime_ns)
PY
kvfs_mount
# root, not in a container, and a kernel whose drop returns: it drops every
# filesystem's caches in turn, and one wedged elsewhere on the host holds
# the writer where no signal ends it (timeout gives up on it after 20 s)
if [ -w /proc/sys/vm/drop_caches ] &&
	timeout -s KILL 20 sh -c 'echo 2 >/proc/sys/vm/drop_caches'; then
	stale=$(/usr/bin/python3 "$T/times.py" forget "$MNT/times")
	expect "times: a lookup after the kernel forgot the file gives its mtime (stale: $stale of 20)" \
		[ "$stale" = 0 ]
else
	echo "SKIP: times after the kernel forgot the file (drop_caches not writable, or it did not return)"
fi
synced=$(/usr/bin/python3 "$T/times.py" fsync "$MNT/times" "$(kvfs_pid)")
fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
kvfs_wait_closed
kvfs_mount
kept=$(/usr/bin/python3 "$T/times.py" stat "$MNT/times")
expect "times: fsync'd mtimes (its file's, an earlier closed file's) survive kill -9 ($synced; $kept)" \
	[ "$synced" = "$kept" ]
kvfs_umount

# LMDB trusts its B-tree pages and may crash reading a damaged one: the
# daemon then says so and exits 1, while mounting and once mounted (a
# sanitizer build reports the crash itself, so the check is for others)
if ! ldd "$KVFS_DAEMON" | grep -q libasan; then
	"$MKFS_BIN" -q -f "$T/fresh.img"
	"$KVFS_BIN" "$T/fresh.img" "$MNT" || bad "mount a fresh image"
	echo x >"$MNT/x"
	setfattr -n user.k -v 1 "$MNT/x"
	touch "$MNT/y" # more commits: older copies of the leaves, freed
	fusermount3 -u "$MNT"
	kvfs_wait_closed "$T/fresh.img"
	smash() { # image, a key on the leaf to fill with 0xff, copy
		/usr/bin/python3 - "$@" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
key, pages, at = sys.argv[2].encode(), set(), data.find(sys.argv[2].encode())
while at >= 0: # every copy: the live leaf and older ones on LMDB's free list
    pages.add(at // 4096)
    at = data.find(key, at + 1)
for pg in pages:
    assert struct.unpack_from("<Q", data, pg * 4096)[0] == pg
    data[pg * 4096 + 16:(pg + 1) * 4096] = b"\xff" * (4096 - 16)
open(sys.argv[3], "wb").write(bytes(data))
PY
	}
	smash "$T/fresh.img" super "$T/smashed-meta.img"
	"$KVFS_BIN" "$T/smashed-meta.img" "$MNT" 2>"$T/err"; rc=$?
	expect "damaged page at mount: exit 1 (got $rc)" [ "$rc" -eq 1 ]
	expect "damaged page at mount: a message" \
		grep -q "smashed-meta.img: crashed reading the image" "$T/err"
	expect "damaged page at mount: not mounted" not_mounted
	mountpoint -q "$MNT" && fusermount3 -u "$MNT"
	smash "$T/fresh.img" user.k "$T/smashed-xattr.img"
	"$KVFS_BIN" -f "$T/smashed-xattr.img" "$MNT" 2>"$T/err" &
	daemon=$!
	for i in $(seq 50); do mountpoint -q "$MNT" && break; sleep 0.1; done
	getfattr -n user.k "$MNT/x" >/dev/null 2>&1
	for i in $(seq 100); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$daemon" 2>/dev/null; then # still up: no crash, no hang either
		kill -9 "$daemon"
		bad "damaged page when mounted: the daemon still runs after the read"
	fi
	wait "$daemon"; rc=$?
	expect "damaged page when mounted: exit 1 (got $rc)" [ "$rc" -eq 1 ]
	expect "damaged page when mounted: a message naming the mount" \
		grep -q "smashed-xattr.img: crashed reading the image.*unmount $MNT" "$T/err"
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
fi

# security.capability, which the kernel asks before every write(2), is
# answered from the lookup table once the store said there is none: a
# set afterwards is seen at once, and a removal too
if command -v setfattr >/dev/null; then
	kvfs_mkfs
	kvfs_mount
	echo data > "$MNT/cap"
	echo more >> "$MNT/cap" # asked, and known to have none
	getfattr -n security.capability "$MNT/cap" >/dev/null 2>&1
	expect "capability: none at first" [ $? -ne 0 ]
	setfattr -n security.capability -v 0x0100000200000000000000000000000000000000 "$MNT/cap"
	expect "capability: a set is seen at once" \
		eval 'getfattr -e hex -n security.capability "$MNT/cap" 2>/dev/null | grep -q 0x01000002'
	setfattr -x security.capability "$MNT/cap"
	getfattr -n security.capability "$MNT/cap" >/dev/null 2>&1
	expect "capability: a removal is seen at once" [ $? -ne 0 ]
	kvfs_umount
fi

# an image path with a comma and a backslash: the mount's fsname is escaped
# for libfuse's option list
odd="$T/a,b\\c"
mkdir -p "$odd"
"$MKFS_BIN" -q "$odd/img"
"$KVFS_BIN" "$odd/img" "$MNT" 2>"$T/odd.err"
expect "a comma in the image's path: mounted ($(cat "$T/odd.err"))" mountpoint -q "$MNT"
if mountpoint -q "$MNT"; then
	echo odd > "$MNT/f"
	kvfs_umount_img() { fusermount3 -u "$MNT" && kvfs_wait_closed "$odd/img"; }
	expect "a comma in the image's path: unmounted" kvfs_umount_img
	expect "a comma in the image's path: fsck clean" eval '"$FSCK_BIN" -n "$odd/img" >/dev/null 2>&1'
fi

kvfs_results
