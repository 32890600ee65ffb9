#!/bin/bash
# test_two_mounts.sh - two daemons mount one PostgreSQL-backed filesystem
# read-write (as two hosts would): a mount alone sends no notices (one of
# another database's filesystem beside it), and
# each commit does once another mount is there; what one does, the other
# sees within SEEN seconds (a create, a write, a rename, an unlink, a chmod,
# an xattr, a capability where none was known, a mkdir and rmdir, a chmod of
# a directory the other had just changed), names it had looked up,
# attributes it kept and pages it had read included; close-to-open holds
# (a file closed on one reads whole on the other at once, its mtime
# committed by then); creates from
# both into one directory at once never collide or lose a name, nor beside
# a third mount that commits each change before it answers (window=0); an
# idle mount holds no lock of the other's writers; fsck -n and kvfs-dump
# read it while both are mounted, and fsck finds it clean after. A mount
# alone holds the lease and keeps a window, and hands the lease over to a
# mount that comes (read-only too), which then hears every commit.
#
#   tests/pg/cluster.sh run bash test_two_mounts.sh
#
# Environment: KVFS_BIN, MKFS_BIN, FSCK_BIN, DUMP_BIN; KVFS_TEST_PG_URL.
. "$(dirname "$0")/../fs/lib.sh"
[ -n "$PGDB" ] || { echo "SKIP: no cluster (run it through tests/pg/cluster.sh run)"; exit 77; }
SEEN=${KVFS_SEEN_SECONDS:-2}
A=$MNT
B=$T/mnt2
mkdir -p "$B"
CLEANUP_EXTRA='fusermount3 -u "$B" 2>/dev/null'

# within NAME CMD...: CMD succeeds within SEEN seconds (WITHIN_MS: that
# many milliseconds), tried every 20 ms; says how long it took
within() {
	local name=$1 start now limit=${WITHIN_MS:-$((SEEN * 1000))}
	shift
	start=$(date +%s%N)
	while ! "$@" 2>/dev/null; do
		now=$(date +%s%N)
		if [ $(((now - start) / 1000000)) -gt "$limit" ]; then
			bad "$name: not seen within $limit ms"
			return 1
		fi
		sleep 0.02
	done
	now=$(date +%s%N)
	echo "  $name: seen after $(((now - start) / 1000000)) ms"
	ok
}
absent() { [ ! -e "$1" ]; }
has_text() { [ "$(cat "$1")" = "$2" ]; }
mode_is() { [ "$(stat -c %a "$1")" = "$2" ]; }
xattr_is() { [ "$(getfattr --only-values -n "$2" "$1")" = "$3" ]; }

# notices NAME SECONDS CMD...: what a session listening on the
# filesystem's channel hears while CMD runs (the channel: FNV-1a of the
# schema, kv/pg/pg_listen.c), one notice a line
notices() {
	local schema chan out=$T/heard
	schema=$(psql -XAt "$IMG" -c "SELECT current_schema()")
	chan=$(/usr/bin/python3 -c 'import sys
h = 0xcbf29ce484222325
for b in sys.argv[1].encode():
    h = ((h ^ b) * 0x100000001b3) & (2**64 - 1)
print("kvfs_%016x" % h)' "$schema")
	psql -XAt "$IMG" -c "LISTEN $chan" -c "SELECT pg_sleep($1)" -c "SELECT 1" >"$out" 2>&1 &
	local p=$!
	sleep 0.3
	shift
	"$@"
	wait "$p"
	grep -c 'Asynchronous notification' "$out" || true
}
mk5() { for i in 1 2 3 4 5; do : >"$A/$1$i"; done; }

# a filesystem in another database of the cluster, mounted: not another
# mount of this one (advisory locks are a database's own)
C=$T/mnt3
OTHER_DB=${PGDB}_other
OTHER=${KVFS_TEST_PG_URL/\/postgres\?//$OTHER_DB?}
mkdir -p "$C"
CLEANUP_EXTRA='fusermount3 -u "$B" 2>/dev/null; fusermount3 -u "$C" 2>/dev/null; sleep 0.3
	psql -qX "$KVFS_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $OTHER_DB WITH (FORCE)" \
		>/dev/null 2>&1'
psql -qX "$KVFS_TEST_PG_URL" -c "CREATE DATABASE $OTHER_DB" >/dev/null &&
	"$MKFS_BIN" -q "$OTHER" && "$KVFS_BIN" "$OTHER" "$C" ||
	{ echo "FAIL: a filesystem in another database"; exit 1; }
kvfs_mkfs
kvfs_mount
# a mount alone tells no one: its commits send no notice
n=$(notices 1.2 mk5 alone)
if [ "$n" = 0 ]; then ok; else bad "a mount alone sent $n notices"; fi
fusermount3 -u "$C"
"$KVFS_BIN" "$IMG" "$B" || { echo "FAIL: the second mount"; exit 1; }
# once a second mount is there, each commit tells it
sleep 0.2
n=$(notices 1.2 mk5 two)
if [ "$n" -ge 5 ]; then ok; else bad "with two mounts, 5 creates sent $n notices"; fi

# names and attributes B has cached (looked up, listed, read) before A
# changes them: the notices must drop them
echo one > "$A/f"
within "create" has_text "$B/f" one
ls -l "$B" >/dev/null
echo two > "$A/f"
within "overwrite of a file read" has_text "$B/f" two
echo three >> "$A/f"
within "append" has_text "$B/f" "two
three"
mv "$A/f" "$A/g"
within "rename: the new name" has_text "$B/g" "two
three"
within "rename: the old name gone" absent "$B/f"
chmod 600 "$A/g"
within "chmod" mode_is "$B/g" 600
setfattr -n user.k -v v1 "$A/g"
within "setxattr" xattr_is "$B/g" user.k v1
# the capability the kernel asks before each write(2): the second knew the
# file had none (it wrote it), the first sets one
echo data > "$B/cap"
echo more >> "$B/cap"
within "a file written on the other" test -e "$A/cap"
setfattr -n security.capability -v 0x0100000200000000000000000000000000000000 "$A/cap"
has_cap() { getfattr -e hex -n security.capability "$1" 2>/dev/null | grep -q 0x01000002; }
within "a capability set where one knew none" has_cap "$B/cap"
mkdir "$A/dir"
within "mkdir" test -d "$B/dir"
rmdir "$A/dir"
within "rmdir" absent "$B/dir"
# a directory whose attributes A keeps from its own commit (a create in it)
# changed by B: A drops what it kept when told
mkdir "$A/kept"
: > "$A/kept/x"
stat "$A/kept" >/dev/null
chmod 711 "$B/kept"
# sooner than the 1 s the kernel (and the first mount) may keep them: the
# notice dropped both
WITHIN_MS=600 within "chmod of a directory the first had just changed" mode_is "$A/kept" 711
rm "$A/g"
within "unlink" absent "$B/g"
# and the other way round
echo back > "$B/h"
within "create on the second" has_text "$A/h" back

# close-to-open: once close(2) returned on B, an open on A reads it all
# (the page cache A had of the file is dropped at open; the size comes
# with the notice, or at the latest when the attribute cache times out)
head -c 100000 /dev/urandom > "$T/data"
cat "$A/h" >/dev/null
cp "$T/data" "$B/h"
within "a file closed on one, opened on the other" cmp -s "$T/data" "$A/h"

# creates_at_once N DIR1 DIR2 WHAT: N files made in each directory (two
# mounts' views of one) at once, a and b their names' first letters
creates_at_once() {
	local n=$1 pa pb
	(for i in $(seq "$n"); do : > "$2/a$i" || exit 1; done) &
	pa=$!
	(for i in $(seq "$n"); do : > "$3/b$i" || exit 1; done) &
	pb=$!
	expect "creates on the first, $4" wait $pa
	expect "creates on the other, $4" wait $pb
}

# creates from both into one directory at once
mkdir "$A/d"
within "the shared directory" test -d "$B/d"
creates_at_once 300 "$A/d" "$B/d" "beside the second"
count_is() { [ "$(ls "$1" | wc -l)" -eq "$2" ]; }
within "600 names on the first" count_is "$A/d" 600
within "600 names on the second" count_is "$B/d" 600
expect "no inode number twice" \
	[ "$(ls -i "$A/d" | awk '{print $1}' | sort -u | wc -l)" -eq 600 ]
listing() { diff <(ls -i "$A/d") <(ls -i "$B/d") >/dev/null; }
within "both list the same names and numbers" listing

# again with a mount that commits each change before it answers
# (window=0: writer.c's batches, which guess the superblock too)
C=$T/mnt3
mkdir -p "$C"
"$KVFS_BIN" "$IMG" "$C" -o window=0 || { echo "FAIL: the third mount"; exit 1; }
CLEANUP_EXTRA='fusermount3 -u "$B" 2>/dev/null; fusermount3 -u "$C" 2>/dev/null'
mkdir "$A/e"
within "the third mount's directory" test -d "$C/e"
creates_at_once 200 "$A/e" "$C/e" "beside the third"
within "400 names on the first" count_is "$A/e" 400
expect "no inode number twice, the third's too" \
	[ "$(ls -i "$A/d" "$A/e" | awk 'NF == 2 {print $1}' | sort -u | wc -l)" -eq 1000 ]
fusermount3 -u "$C"

# the tools read a snapshot while both are mounted
expect "fsck -n while mounted" "$FSCK_BIN" -n "$IMG"
expect "kvfs-dump while mounted" "$DUMP_BIN" "$IMG" summary >/dev/null
# an idle mount holds no lock of the others' writers (reads included: they
# may be answered in the writer's open transaction)
cat "$A"/d/a1 "$B"/d/b1 >/dev/null
ls -l "$A/d" "$B/d" >/dev/null
no_lock() {
	[ "$(psql -XAt "$IMG" -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ExclusiveLock'")" = 0 ]
}
within "no writers' lock held while idle" no_lock
# and the first mount writes while the second is idle
: > "$A/after-idle"
within "a write after the other was idle" test -e "$B/after-idle"
fusermount3 -u "$B"
# the mtime a close writes back (-o writeback: the kernel keeps a file's
# times) is committed when close(2) returns, as is all else (a mount
# without a window commits nothing at close, and is not asked to): a mount
# killed at once leaves it in the database
"$KVFS_BIN" "$IMG" "$C" -o writeback || { echo "FAIL: a mount with -o writeback"; exit 1; }
pid_c=$(pgrep -f -- " $C( |\$)" | head -1)
touch -d "2001-02-03 04:05:06" "$C/h"
echo more >> "$C/h"
kill -9 "$pid_c"
m=$("$DUMP_BIN" "$IMG" inode /h | awk '$1 == "mtime:" {print $NF}')
fusermount3 -u "$C"
expect "the mtime written back at close, committed by then ($m)" \
	[ -n "$m" -a "$m" != "(981173106.000000000)" ]
kvfs_umount
expect "fsck after both unmounted" "$FSCK_BIN" -n "$IMG"

# A mount alone holds the store's lease (kv/pg/pg_lease.c) and keeps its
# window as on an image file: with -o window=3000 a file closed there is
# not committed yet, close(2) waits for no server. A mount that comes
# meanwhile asks for the lease: the first commits at once and gives it up,
# and the second, mounted, reads the file whole; from then on the first
# commits at close again.
# lease_key: the lease's advisory lock, as pg_locks shows it (classid objid)
lease_key() {
	local schema
	schema=$(psql -XAt "$IMG" -c "SELECT current_schema()")
	/usr/bin/python3 -c 'import sys
h = 0xcbf29ce484222325
for b in sys.argv[1].encode():
    h = ((h ^ b) * 0x100000001b3) & (2**64 - 1)
k = h ^ 0x6c65617365
print(k >> 32, k & 0xffffffff)' "$schema"
}
read -r LCLASS LOBJ <<<"$(lease_key)"
# lease_locks MODE: how many sessions hold the lease in MODE
lease_locks() {
	psql -XAt "$IMG" -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
		AND classid = $LCLASS AND objid = $LOBJ AND mode = '$1' AND granted"
}
lease_whole() { [ "$(lease_locks ExclusiveLock)" = 1 ]; }
lease_shares() { [ "$(lease_locks ShareLock)" = "$1" ]; }
no_session() {
	[ "$(psql -XAt "$IMG" -c "SELECT count(*) FROM pg_stat_activity
		WHERE application_name IN ('kvfs', 'kvfs listener')")" = 0 ]
}
# in_db NAME: 0 when the database holds NAME, 1 when not, 2 (a failure
# of the test) when kvfs-dump cannot say
in_db() {
	"$DUMP_BIN" "$IMG" tree >"$T/tree" || { bad "kvfs-dump tree failed"; return 2; }
	grep -qw "$1" "$T/tree"
}
not_in_db() { in_db "$1"; [ $? = 1 ]; }
lease_free() { ! lease_whole; }
log() { echo "  $*"; }
within "the mounts' sessions gone" no_session
kvfs_mount -o window=3000
within "the mount alone holds the lease" lease_whole
echo alone >"$A/alone"
expect "a file closed on a mount alone: in its window, not committed yet" not_in_db alone
t0=$(date +%s%N)
"$KVFS_BIN" "$IMG" "$B" || { echo "FAIL: a mount while the other holds the lease"; exit 1; }
ms=$((($(date +%s%N) - t0) / 1000000))
log "a second mount, the lease handed over: mounted in $ms ms"
expect "the second mount waited for no window (${ms} ms)" [ "$ms" -lt 2500 ]
expect "the second mount reads what the first closed" has_text "$B/alone" alone
expect "the lease given up" lease_free
echo shared >"$A/shared"
expect "with another mount, close(2) commits" in_db shared
fusermount3 -u "$B"
kvfs_umount

# a holder that cannot answer (its daemon stopped): a mount that comes
# fails after a bound with a message, and the holder goes on once it runs
within "the mounts' sessions gone" no_session
kvfs_mount
within "the mount alone holds the lease" lease_whole
pid_a=$(kvfs_pid)
kill -STOP "$pid_a"
t0=$(date +%s%N)
if "$KVFS_BIN" "$IMG" "$B" 2>"$T/b.err"; then
	bad "a mount beside a stopped holder of the lease succeeded"
	fusermount3 -u "$B"
else
	ok
fi
ms=$((($(date +%s%N) - t0) / 1000000))
kill -CONT "$pid_a"
log "refused after $ms ms: $(cat "$T/b.err")"
expect "it says why" grep -q "did not give it up" "$T/b.err"
expect "within the bound (${ms} ms)" [ "$ms" -lt 40000 ]
expect "the holder goes on" touch "$A/after-stop"
expect "and a mount beside it then succeeds" "$KVFS_BIN" "$IMG" "$B"
expect "and reads what it made" test -e "$B/after-stop"
fusermount3 -u "$B"
kvfs_umount
expect "fsck after the lease's tests" "$FSCK_BIN" -n "$IMG"

# a read-only mount beside a read-write one (with a window of 3 s, kept
# when not alone too): the writer is not alone (the reader holds the lease
# shared) and the reader hears its commits
within "the mounts' sessions gone" no_session
kvfs_mount -o window=3000
"$KVFS_BIN" "$IMG" "$B" -o ro || { echo "FAIL: a read-only mount beside a writer"; exit 1; }
within "the writer gives up the lease to a read-only mount" lease_free
cat "$B/alone" >/dev/null
echo changed >"$A/alone"
echo new >"$A/to-ro"
within "the read-only mount sees a create" has_text "$B/to-ro" new
within "and a write to a file it had read" has_text "$B/alone" changed
refused() { ! touch "$B/nope" 2>/dev/null; }
expect "and writes nothing itself" refused
# the server ends the mounts' sessions (their listeners' left): the
# reader joins the lease again by itself, so the writer, connected again,
# does not hold the store alone and hide its window from the reader
psql -XAt "$IMG" -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
	WHERE application_name = 'kvfs'" >/dev/null
within "the writer writes again after its sessions ended" touch "$A/after-end"
sleep 3 # alone, the writer would hold the lease by now (pg_lease.c: LEASE_AWAY_MS)
WITHIN_MS=5000 within "the reader joined the lease again" lease_shares 2
expect "the writer is not alone" lease_free
echo again >"$A/to-ro2"
within "the read-only mount sees a create after" has_text "$B/to-ro2" again
sleep 2.5 # the writer tries for the lease again (LEASE_RETRY_MS) meanwhile
expect "the writer still not alone" lease_free
fusermount3 -u "$B"
kvfs_umount
within "the mounts' sessions gone" no_session
kvfs_results
