# lib.sh - shared by the mounted tests: make an image, mount it, unmount.
# Source it; it sets T (a temporary directory removed on exit), IMG, MNT.
# Tests that need /dev/fuse exit 77 (skipped) where it is missing.
#
# Environment: KVFS_BIN, MKFS_BIN (the binaries under test); KVFS_TEST_DEPTH
# (full, the default, or quick: see depth below).

set -u
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
	echo "SKIP: /dev/fuse or fusermount3 missing"
	exit 77
fi
: "${KVFS_BIN:?}" "${MKFS_BIN:?}"
T=$(mktemp -d /tmp/kvfs-test.XXXXXX)
IMG=$T/img
MNT=$T/mnt
mkdir -p "$MNT"
# KVFS_TEST_PG_URL (set by tests/pg/cluster.sh run): the image is a new
# database of that throwaway cluster, not a file; it goes at exit
PGDB=
if [ -n "${KVFS_TEST_PG_URL:-}" ]; then
	PGDB=kvfs_$(basename "$T" | tr 'A-Z' 'a-z' | tr -c 'a-z0-9\n' _)
	psql -qX -v ON_ERROR_STOP=1 "$KVFS_TEST_PG_URL" -c "CREATE DATABASE $PGDB" >/dev/null ||
		{ echo "FAIL: cannot make the test's database"; exit 1; }
	IMG=${KVFS_TEST_PG_URL/\/postgres\?//$PGDB?}
fi
# KVFS_TEST_TRANSPORT=devfuse: every mount of the test over /dev/fuse, not
# io_uring (kvfs's default where its libfuse and the kernel have it): the
# daemon is run through a wrapper that adds -o noio_uring (dev.sh check's
# sanitizer pass, so that both transports run every test). KVFS_DAEMON is
# the binary itself (ldd asks it whether it is a sanitizer build).
KVFS_DAEMON=$KVFS_BIN
if [ "${KVFS_TEST_TRANSPORT:-}" = devfuse ]; then
	printf '#!/bin/sh\nexec "%s" "$@" -o noio_uring\n' "$KVFS_BIN" >"$T/kvfs"
	chmod +x "$T/kvfs"
	KVFS_BIN=$T/kvfs
fi
# a sanitizer build's daemon has no terminal: its reports go to files,
# and any report fails the test at exit
export ASAN_OPTIONS="log_path=$T/sanitizer:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="log_path=$T/sanitizer:print_stacktrace=1:${UBSAN_OPTIONS:-}"

# depth FULL QUICK: how much of a randomized or sized run to do (seeds,
# rounds, entries). The Release pass runs FULL; the sanitizer pass, where an
# operation costs 5-50 times as much and what is sought is a memory or UB
# fault on a path (which the first seeds already take), runs QUICK:
# dev.sh check sets KVFS_TEST_DEPTH=quick there unless given --full.
depth() {
	if [ "${KVFS_TEST_DEPTH:-full}" = quick ]; then echo "$2"; else echo "$1"; fi
}

# Counted checks: expect NAME COMMAND... passes when COMMAND succeeds; ok and
# bad count one result; kvfs_results prints the counts and fails on any bad.
passes=0 fails=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect() {
	local name=$1
	shift
	if "$@"; then ok; else bad "$name"; fi
}
kvfs_results() {
	echo "$passes passed, $fails failed"
	[ "$fails" -eq 0 ]
}

# CLEANUP_EXTRA: shell code (a command line or a function's name) run first
CLEANUP_EXTRA=:
kvfs_cleanup() {
	local rc=$?
	eval "$CLEANUP_EXTRA"
	if mountpoint -q "$MNT" 2>/dev/null; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
		kvfs_wait_closed
	fi
	if ls "$T"/sanitizer.* >/dev/null 2>&1; then
		echo "FAIL: sanitizer reports:"
		cat "$T"/sanitizer.*
		rc=1
	fi
	[ -z "$PGDB" ] || psql -qX "$KVFS_TEST_PG_URL" -c "DROP DATABASE $PGDB WITH (FORCE)" \
		>/dev/null 2>&1
	rm -rf "$T"
	exit $rc
}
trap kvfs_cleanup EXIT

# kvfs_mkfs [mkfs options]
kvfs_mkfs() {
	"$MKFS_BIN" -q -f "$@" "$IMG"
}

# kvfs_mount [kvfs options]: returns once mounted (the daemon reports
# readiness before its parent exits), fails the test otherwise.
kvfs_mount() {
	"$KVFS_BIN" "$IMG" "$MNT" "$@" || { echo "FAIL: mount $*"; exit 1; }
	mountpoint -q "$MNT" || { echo "FAIL: $MNT not a mountpoint after kvfs returned"; exit 1; }
}

# kvfs_umount: unmount and wait until the daemon has closed the image.
kvfs_umount() {
	fusermount3 -u "$MNT" || { echo "FAIL: fusermount3 -u"; exit 1; }
	kvfs_wait_closed
}

# kvfs_wait_closed [image]: wait (up to 30 s) until no process holds the
# lock of image ($IMG by default).
kvfs_wait_closed() {
	local i img=${1:-$IMG}
	if [ -n "$PGDB" ]; then # no file to lock: the daemon of $MNT is gone
		for i in $(seq 300); do
			pgrep -f -- " $MNT( |\$)" >/dev/null || return 0
			sleep 0.1
		done
		echo "FAIL: the daemon of $MNT did not exit"
		exit 1
	fi
	for i in $(seq 300); do
		flock -n -x "$img" true 2>/dev/null && return 0
		sleep 0.1
	done
	echo "FAIL: the daemon did not let go of $img"
	exit 1
}

# The daemon's pid, from the lock it holds on the image.
kvfs_pid() {
	[ -z "$PGDB" ] || { pgrep -f -- " $MNT( |\$)" | head -1; return; }
	fuser "$IMG" 2>/dev/null | tr -s ' ' '\n' | grep -v '^$' | head -1
}

# kvfs_second_user: a second user for permission tests, kvfstest (made as a
# system user if absent; the test is skipped when it cannot be): sets U and
# G (its uid and gid), OTHER_GID (a group it is not in), defines as_user
# CMD... (run CMD as it) and lets it reach $T.
kvfs_second_user() {
	command -v setpriv >/dev/null || { echo "SKIP: setpriv missing"; exit 77; }
	if ! id -u kvfstest >/dev/null 2>&1; then
		useradd -r -M -s /usr/sbin/nologin kvfstest 2>/dev/null ||
			{ echo "SKIP: no user kvfstest and useradd failed"; exit 77; }
	fi
	U=$(id -u kvfstest)
	G=$(id -g kvfstest)
	OTHER_GID=4242
	chmod 755 "$T" # mktemp made it 0700: the user must reach the mountpoint
}
as_user() { setpriv --reuid="$U" --regid="$G" --init-groups "$@"; }
