#!/bin/bash
# test_faults.sh - a PostgreSQL-backed mount when the database fails under it
# and when its daemon dies:
#
#  1. the server stops (pg_ctl stop -m fast; immediate under load; and a
#     server that stops answering, SIGSTOP): requests fail with EIO within
#     the engine's bound, never hang; once it is started again on the same
#     socket the same mount creates, writes and reads again without a
#     remount, and every change committed before the stop is there. Changes
#     acknowledged but lost with the window the server dropped are reported
#     (EIO) to the fsyncs and close of the files open across the loss and to
#     the first fsync of each file they changed.
#  2. a daemon killed (-9) under a write-heavy load, a few times at random
#     moments: fsck.kvfs -n finds the database clean, a new mount shows a
#     consistent tree (every file fsync'd there, what the run left a prefix
#     of its steps: tests/fs/crash_worker.c).
#  3. failover: a primary and a streaming standby, synchronous (a commit
#     the primary acknowledged is on the standby), a URL naming both with
#     target_session_attrs=read-write, two mounts; the primary killed under
#     a load and the standby promoted: both mounts carry on, every file
#     fsync'd before the kill is there, and the second mount's listener
#     hears the first again.
#
# The bounds: a stopped server refuses the Unix socket at once: a syscall
# fails within STOPPED_MS. One that stops answering: the URL sets
# connect_timeout=2 and statement_timeout=2000 ms, so a request waits at
# most 2 + 5 s (pg_int.h: PG_WAIT_SLACK_MS) on a connection, and a new one
# fails in 2 s; a syscall here is at most two requests (a GETATTR of the
# directory once its attributes are 1 s old, the LOOKUP): FROZEN_MS. (Two
# syscalls in one directory wait for each other: the kernel's lock of it.)
# Once the server answers again the mount's first request succeeds: each
# connection is made again at its next use.
#
#   tests/pg/cluster.sh run bash test_faults.sh CRASH_WORKER
#
# Environment: KVFS_BIN, MKFS_BIN, FSCK_BIN; KVFS_TEST_PG_URL and
# KVFS_TEST_PG_DIR (cluster.sh run); KVFS_FAULT_KILLS (daemon kills, 4).
. "$(dirname "$0")/../fs/lib.sh"
[ -n "$PGDB" ] && [ -n "${KVFS_TEST_PG_DIR:-}" ] ||
	{ echo "SKIP: no cluster (run it through tests/pg/cluster.sh run)"; exit 77; }
WORKER=${1:?crash_worker}
CLUSTER="bash $(dirname "$0")/cluster.sh"
PGD=$KVFS_TEST_PG_DIR
STOPPED_MS=2000
FROZEN_MS=16000
RECOVER_S=15
SEEN=2
KILLS=${KVFS_FAULT_KILLS:-4}
BOUNDS='connect_timeout=2&options=-c%20statement_timeout%3D2000'
URL="$IMG&$BOUNDS"
B=$T/mnt2
SD=
mkdir -p "$B"

# the server's processes go on (a SIGSTOP must not outlive the test), the
# second mount and the standby go
cleanup_faults() {
	server_cont 2>/dev/null
	mountpoint -q "$B" && fusermount3 -u "$B"
	[ -z "$SD" ] || $CLUSTER stop "$SD"
}
CLEANUP_EXTRA=cleanup_faults

now_ms() { echo $(($(date +%s%N) / 1000000)); }
log() { echo "  $*"; }
fsck_clean() { "$FSCK_BIN" -n "$1" >"$T/fsck.out" 2>&1 || { tail -20 "$T/fsck.out"; return 1; }; }

# sys OP PATH: one syscall's errno name (OK when it succeeded), by python
# for the exact errno: stat, create, append, read, list
cat >"$T/sys.py" <<'EOF'
import errno, os, sys
op, path = sys.argv[1], sys.argv[2]
try:
    if op == "stat":
        os.stat(path)
    elif op == "create":
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    elif op == "append":
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, b"more\n")
        finally:
            os.close(fd)
    elif op == "read":
        fd = os.open(path, os.O_RDONLY)
        try:
            os.read(fd, 1 << 20)
        finally:
            os.close(fd)
    elif op == "list":
        os.listdir(path)
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
EOF
sys() { timeout 60 python3 "$T/sys.py" "$@" 2>/dev/null || echo HANG; }

# timed OP PATH: "ERRNO MS", the syscall's result and how long it took
timed() {
	local t0 got
	t0=$(now_ms)
	got=$(sys "$@")
	echo "$got $(($(now_ms) - t0))"
}
# fails_in MS NAME RESULT: RESULT (timed's) is EIO within MS
fails_in() {
	local bound=$1 name=$2 got=${3% *} ms=${3#* }
	log "$name: $got after $ms ms"
	expect "$name: EIO (got $got)" [ "$got" = EIO ]
	expect "$name: within $bound ms (took $ms)" [ "$ms" -le "$bound" ]
}
# works NAME OP PATH: the syscall succeeds at its first try
works() {
	local name=$1 got
	shift
	got=$(timed "$@")
	log "$name: ${got% *} after ${got#* } ms"
	expect "$name (got ${got% *})" [ "${got% *}" = OK ]
}

# within S NAME CMD...: CMD succeeds within S seconds (tried every 50 ms);
# says how long it took
within() {
	local s=$1 name=$2 t0 ms
	shift 2
	t0=$(now_ms)
	until "$@" >/dev/null 2>&1; do
		ms=$(($(now_ms) - t0))
		if [ "$ms" -gt $((s * 1000)) ]; then
			bad "$name: not within $s s"
			return 1
		fi
		sleep 0.05
	done
	log "$name: after $(($(now_ms) - t0)) ms"
	ok
}
recovers() { within "$RECOVER_S" "$@"; }

# the processes of the cluster of DIR ($PGD): its postmaster and children
server_pids() {
	local pm
	pm=$(head -1 "${1:-$PGD}/data/postmaster.pid" 2>/dev/null) || return 0
	echo "$pm" $(pgrep -P "$pm")
}
server_cont() { kill -CONT $(server_pids) 2>/dev/null; }
created() { [ "$(sys create "$1")" = OK ]; }

# files: bytes of their own, committed (close on a shared store commits,
# the sync makes it durable)
fill() {
	local dir=$1 i
	mkdir -p "$dir/sub"
	for i in $(seq 20); do
		head -c $((i * 3000)) /dev/urandom >"$T/want.$i"
		cp "$T/want.$i" "$dir/f$i"
	done
	ln -s f1 "$dir/link"
	cp "$T/want.20" "$dir/sub/deep"
	sync -f "$dir"
}
all_there() {
	local dir=$1 i
	for i in $(seq 20); do cmp -s "$T/want.$i" "$dir/f$i" || return 1; done
	[ "$(readlink "$dir/link")" = f1 ] && cmp -s "$T/want.20" "$dir/sub/deep"
}

mount_url() { "$KVFS_BIN" "$URL" "$MNT" "$@" || { echo "FAIL: mount $*"; exit 1; }; }

echo "1. the server stops under an idle mount"
"$MKFS_BIN" -q -f "$URL"
mount_url
fill "$MNT"
$CLUSTER pgctl "$PGD" stop fast
fails_in $STOPPED_MS "stat of a name not looked up" "$(timed stat "$MNT/nosuch")"
fails_in $STOPPED_MS "create" "$(timed create "$MNT/new")"
fails_in $STOPPED_MS "append to a file" "$(timed append "$MNT/f2")"
# no page cache to answer: a shared mount drops it at each open
fails_in $STOPPED_MS "read of a file" "$(timed read "$MNT/f3")"
fails_in $STOPPED_MS "list a directory not listed" "$(timed list "$MNT/sub")"
$CLUSTER pgctl "$PGD" start
works "the same mount creates again" create "$MNT/back"
expect "everything committed before the stop is there" all_there "$MNT"
expect "a create after" created "$MNT/after"
echo data >"$MNT/after" && expect "a write after, read back" [ "$(cat "$MNT/after")" = data ]
expect "an append to an older file" [ "$(sys append "$MNT/f2")" = OK ]
echo more >>"$T/want.2"
expect "a list" [ "$(ls "$MNT/sub")" = deep ]

echo "1b. the server stops answering (SIGSTOP): the client's own cutoff"
# two syscalls at once, in two directories: each waits out its own cutoff
kill -STOP $(server_pids)
timed stat "$MNT/frozen1" >"$T/frozen.stat" &
f1=$!
timed create "$MNT/sub/frozen2" >"$T/frozen.create" &
f2=$!
wait $f1 $f2
fails_in $FROZEN_MS "stat of a name not looked up, frozen server" "$(cat "$T/frozen.stat")"
fails_in $FROZEN_MS "create, frozen server" "$(cat "$T/frozen.create")"
server_cont
works "the same mount creates again after the freeze" create "$MNT/thawed"
expect "everything committed before the freeze is there" all_there "$MNT"
kvfs_umount
expect "fsck -n clean after the stops" fsck_clean "$URL"

echo "1c. the server stops (immediate) under a load"
mount_url
mkdir "$MNT/load"
"$WORKER" run "$MNT/load" "$T/load.log" 7 &
worker=$!
sleep 0.5
$CLUSTER pgctl "$PGD" stop immediate
wait $worker
$CLUSTER pgctl "$PGD" start
works "the same mount creates again" create "$MNT/after-load"
sleep 1.1 # what the kernel cached of changes lost with the server times out
expect "the load's run: fsync'd files there, a prefix of its steps, all read" \
	"$WORKER" check "$MNT/load" "$T/load.log" 7 >"$T/check.out"
log "$(tail -2 "$T/check.out" | tr '\n' ' ')"
expect "everything committed before is there" all_there "$MNT"
kvfs_umount
expect "fsck -n clean after the load" fsck_clean "$URL"

echo "1d. changes acknowledged, then lost with the server: reported"
# a window of 3 s holds what a process wrote through a file it keeps open
# while the server goes: the mount loses it, and must say so
mount_url -o window=3000
cat >"$T/held.py" <<'EOF'
import os, sys, time
path, go, done = sys.argv[1:4]
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
os.write(fd, b"lost\n")  # acknowledged: in the window, not committed
open(go, "w").close()
while not os.path.exists(done):
    time.sleep(0.02)
for what, call in (("fsync", lambda: os.fsync(fd)), ("close", lambda: os.close(fd))):
    try:
        call()
        print(what, "OK")
    except OSError as e:
        print(what, "EIO" if e.errno == 5 else e.errno)
EOF
# fsync_of PATH: fsync of a new open of PATH (OK or the errno)
fsync_of() {
	python3 -c "
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
try:
    os.fsync(fd); print('OK')
except OSError as e:
    print('EIO' if e.errno == 5 else e.errno)" "$1"
}
python3 "$T/held.py" "$MNT/f4" "$T/go" "$T/done" >"$T/held.out" &
held=$!
for i in $(seq 100); do [ -e "$T/go" ] && break; sleep 0.05; done
$CLUSTER pgctl "$PGD" stop immediate
sleep 3.2 # the window's commit is due, and fails
$CLUSTER pgctl "$PGD" start
works "the same mount creates again after the loss" create "$MNT/after-loss"
expect "a file the loss changed, opened after: its first fsync EIO" \
	[ "$(fsync_of "$MNT/f4")" = EIO ]
expect "and the next one OK (reported once)" [ "$(fsync_of "$MNT/f4")" = OK ]
expect "a file the loss did not change: fsync OK" [ "$(fsync_of "$MNT/f5")" = OK ]
touch "$T/done"
wait $held
log "the file open across the loss: $(tr '\n' ' ' <"$T/held.out")"
expect "its fsync: EIO" grep -q "fsync EIO" "$T/held.out"
expect "its close: EIO" grep -q "close EIO" "$T/held.out"
sleep 1.1 # the size the kernel cached of the lost append times out
expect "what it wrote is gone, what was committed is there" all_there "$MNT"
expect "a write after the loss, fsync'd" dd if=/dev/zero of="$MNT/after-loss" bs=4k count=4 \
	conv=fsync status=none
kvfs_umount
expect "fsck -n clean after the loss" fsck_clean "$URL"

echo "2. the daemon killed under a load, $KILLS times"
for round in $(seq 1 "$KILLS"); do
	mount_url
	pid=$(kvfs_pid)
	mkdir -p "$MNT/k$round"
	"$WORKER" run "$MNT/k$round" "$T/kill.log" "$round" &
	worker=$!
	sleep "0.$((RANDOM % 8 + 2))"
	kill -9 "$pid"
	wait $worker
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
	kvfs_wait_closed
	expect "kill $round: fsck -n clean" fsck_clean "$URL"
	mount_url
	expect "kill $round: a new mount shows a consistent tree" \
		"$WORKER" check "$MNT/k$round" "$T/kill.log" "$round" >"$T/check.out"
	log "kill $round: $(tail -2 "$T/check.out" | tr '\n' ' ')"
	expect "kill $round: the new mount writes" created "$MNT/k$round/after"
	kvfs_umount
done
mount_url
expect "everything committed before the kills is there" all_there "$MNT"
kvfs_umount

echo "3. failover to a synchronous standby"
out=$($CLUSTER standby "$PGD") || { bad "standby"; exit 1; }
SD=$(sed -n 1p <<<"$out")
psql -qXAt "$KVFS_TEST_PG_URL" -c "ALTER SYSTEM SET synchronous_standby_names = '*'" \
	-c "SELECT pg_reload_conf()" >/dev/null
sync_standby() {
	[ "$(psql -XAt "$KVFS_TEST_PG_URL" -c "SELECT sync_state FROM pg_stat_replication")" = sync ]
}
recovers "the standby is synchronous" sync_standby
FURL="${IMG/host=$PGD/host=$PGD,$SD}&target_session_attrs=read-write&$BOUNDS"
"$KVFS_BIN" "$FURL" "$MNT" || { echo "FAIL: mount A"; exit 1; }
# B caches names and attributes 30 s: only the listener's notices make it
# see A's changes within SEEN
"$KVFS_BIN" "$FURL" "$B" -o timeout=30 || { echo "FAIL: mount B"; exit 1; }
echo one >"$MNT/probe"
sync "$MNT/probe"
stat "$B/probe" "$B/fresh" >/dev/null 2>&1 # cached, and a name cached as absent
mkdir "$MNT/fo"
"$WORKER" run "$MNT/fo" "$T/fo.log" 99 &
worker=$!
sleep 0.5
t0=$(now_ms)
$CLUSTER pgctl "$PGD" stop immediate
wait $worker
$CLUSTER pgctl "$SD" promote
log "standby promoted $(($(now_ms) - t0)) ms after the kill"
works "A writes again after the failover" create "$MNT/after-failover"
log "failover: A wrote again $(($(now_ms) - t0)) ms after the kill"
listeners() {
	[ "$(psql -XAt "${FURL/&$BOUNDS/}" -c "SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'kvfs listener'")" = 2 ]
}
recovers "both listeners hear the new primary" listeners
chmod 600 "$MNT/probe"
: >"$MNT/fresh"
seen() { [ "$(stat -c %a "$B/probe")" = 600 ] && [ -e "$B/fresh" ]; }
within "$SEEN" "B sees A's changes (its listener reconnected)" seen
works "B writes too" create "$B/from-b"
sleep 1.1 # what A's kernel cached of changes lost with the primary times out
expect "everything fsync'd before the kill is there, a prefix of the steps" \
	"$WORKER" check "$MNT/fo" "$T/fo.log" 99 >"$T/check.out"
tail -2 "$T/check.out" | sed 's/^/  /'
expect "everything committed long before is there" all_there "$MNT"
fusermount3 -u "$B"
kvfs_umount
expect "fsck -n clean on the new primary" fsck_clean "$FURL"
kvfs_results
