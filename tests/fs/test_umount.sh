#!/bin/bash
# test_umount.sh - the image is free once unmounted: the daemon lets go of
# its lock within moments of the kernel detaching, and a tool or mount that
# still finds it held by a daemon on its way out waits for it (saying so
# after a second) instead of failing "in use"; a mounted image is refused
# at once. Prints the release latency it measured.
. "$(dirname "$0")/lib.sh"
: "${FSCK_BIN:?}"
ms_since() { # $EPOCHREALTIME at the start
	echo $(( (${EPOCHREALTIME/./} - ${1/./}) / 1000 ))
}
ROUNDS=${ROUNDS:-100}

kvfs_mkfs
kvfs_mount
echo hello >"$MNT/hello"
kvfs_umount

# how long the daemon keeps the lock after umount(8) returns: flock -w
# blocks until the lock is free, so this is the release, not a poll's tick
lat=()
for i in $(seq 20); do
	kvfs_mount
	echo "$i" >"$MNT/f"
	umount "$MNT"
	t0=$EPOCHREALTIME
	flock -w 10 -x "$IMG" true
	lat+=("$(ms_since "$t0")")
done
sorted=$(printf '%s\n' "${lat[@]}" | sort -n)
median=$(sed -n 10p <<<"$sorted") max=$(tail -1 <<<"$sorted")
echo "release after umount: median $median ms, max $max ms (20 rounds)"
expect "the daemon lets go within 100 ms of the unmount (max $max ms)" [ "$max" -le 100 ]

# umount, then at once what needs the image to itself
t0=$EPOCHREALTIME
inuse=0 failed=0
for i in $(seq "$ROUNDS"); do
	kvfs_mount
	echo "$i" >"$MNT/f"
	umount "$MNT" || { bad "umount (round $i)"; break; }
	"$FSCK_BIN" -p "$IMG" >"$T/out" 2>"$T/err"; rc=$?
	if [ "$rc" -ne 0 ]; then
		failed=$((failed + 1))
		grep -q "in use" "$T/err" && inuse=$((inuse + 1))
		[ "$failed" -eq 1 ] && sed 's/^/    /' "$T/err"
		kvfs_wait_closed
	fi
done
expect "umount && fsck.kvfs -p: no failure in $ROUNDS rounds ($failed failed, $inuse 'in use')" \
	[ "$failed" -eq 0 ]
inuse=0 failed=0
for i in $(seq "$ROUNDS"); do
	kvfs_mount
	echo "$i" >"$MNT/f"
	fusermount3 -u "$MNT" || { bad "fusermount3 -u (round $i)"; break; }
	if ! "$KVFS_BIN" "$IMG" "$MNT" 2>"$T/err"; then
		failed=$((failed + 1))
		grep -q "in use" "$T/err" && inuse=$((inuse + 1))
		sed 's/^/    /' "$T/err"
		kvfs_wait_closed
		continue
	fi
	[ "$(cat "$MNT/f")" = "$i" ] || bad "remount (round $i): the file reads '$(cat "$MNT/f")'"
	kvfs_umount
done
expect "fusermount3 -u; kvfs: no failure in $ROUNDS rounds ($failed failed, $inuse 'in use')" \
	[ "$failed" -eq 0 ]
echo "$((2 * ROUNDS)) rounds of unmount-then-use: $(ms_since "$t0") ms"
expect "fsck clean after the rounds" eval '"$FSCK_BIN" -n "$IMG" >/dev/null'

# a read-only view of the image (which holds no lock) does not make a
# leaving writer's lock look taken for good
mkdir -p "$T/ro"
"$KVFS_BIN" "$IMG" "$T/ro" -o ro || bad "a read-only view"
CLEANUP_EXTRA='fusermount3 -u "$T/ro" 2>/dev/null'
failed=0
for i in $(seq 20); do
	kvfs_mount
	echo "$i" >"$MNT/f"
	umount "$MNT" || { bad "umount beside a view (round $i)"; break; }
	if ! "$KVFS_BIN" "$IMG" "$MNT" 2>"$T/err"; then
		failed=$((failed + 1))
		sed 's/^/    /' "$T/err"
		kvfs_wait_closed
		continue
	fi
	umount "$MNT"
	"$FSCK_BIN" -p "$IMG" >/dev/null 2>"$T/err" || { failed=$((failed + 1)); sed 's/^/    /' "$T/err"; }
done
expect "beside a read-only view: umount, then mount and fsck -p ($failed of 20 failed)" \
	[ "$failed" -eq 0 ]
fusermount3 -u "$T/ro"
CLEANUP_EXTRA=:

# a mounted image is refused at once, by everything that needs its lock
kvfs_mount
mkdir -p "$T/mnt2"
for what in fsck mkfs kvfs; do
	t0=$EPOCHREALTIME
	case $what in
	fsck) "$FSCK_BIN" -p "$IMG" ;;
	mkfs) "$MKFS_BIN" -q -f "$IMG" ;;
	kvfs) "$KVFS_BIN" "$IMG" "$T/mnt2" ;;
	esac >/dev/null 2>"$T/err"
	rc=$? ms=$(ms_since "$t0")
	expect "mounted: $what refused (exit $rc)" [ "$rc" -ne 0 ]
	expect "mounted: $what says in use" grep -q "in use" "$T/err"
	expect "mounted: $what refused at once ($ms ms)" [ "$ms" -lt 1000 ]
	expect "mounted: $what says nothing of waiting" eval '! grep -q waiting "$T/err"'
done
expect "mounted: still mounted and whole" grep -qx hello "$MNT/hello"
kvfs_umount

# held by a process that has no mount of it (a daemon on its way out, or
# another tool): wait a few seconds, saying so after the first
flock -x "$IMG" sleep 1.6 &
holder=$!
while flock -n -x "$IMG" true; do sleep 0.01; done # the holder has it
t0=$EPOCHREALTIME
"$FSCK_BIN" -p "$IMG" >"$T/out" 2>"$T/err"; rc=$?
ms=$(ms_since "$t0")
wait "$holder"
expect "held briefly: fsck -p waits and runs (exit $rc, $ms ms)" \
	eval '[ "$rc" -eq 0 ] && [ "$ms" -ge 1000 ]'
expect "held briefly: fsck says it waits" grep -q "waiting for .*$(basename "$IMG")" "$T/err"
exec 8<"$IMG" # this shell holds it now, and until fd 8 closes
flock -x 8
for what in fsck kvfs; do
	t0=$EPOCHREALTIME
	case $what in
	fsck) "$FSCK_BIN" -p "$IMG" ;;
	kvfs) "$KVFS_BIN" "$IMG" "$MNT" ;;
	esac >/dev/null 2>"$T/err" 8<&-
	rc=$? ms=$(ms_since "$t0")
	expect "held on: $what gives up after a few seconds (exit $rc, $ms ms)" \
		eval '[ "$rc" -ne 0 ] && [ "$ms" -ge 2000 ] && [ "$ms" -lt 15000 ]'
	expect "held on: $what says in use" grep -q "in use" "$T/err"
	expect "held on: $what said it waited" grep -q "waiting" "$T/err"
done
exec 8<&-

kvfs_results
