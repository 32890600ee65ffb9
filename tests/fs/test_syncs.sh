#!/bin/bash
# test_syncs.sh - what an fsync costs the device: a random 4 KiB write
# followed by fsync(2) takes the syncs LMDB needs for one durable commit (its
# data pages, then its meta page: 2) and no commit of its own for the WRITE
# or the times it changes. Counted with strace on the daemon: fdatasync,
# fsync, msync and sync_file_range calls, in durability=fsync with a window
# long enough that only the fsyncs commit, with and without the writeback
# cache. Skipped (77) without strace.
. "$(dirname "$0")/lib.sh"
command -v strace >/dev/null || { echo "SKIP: strace missing"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 missing"; exit 77; }
ROUNDS=40
STRACE=
CLEANUP_EXTRA='[ -n "$STRACE" ] && kill "$STRACE" 2>/dev/null'

# syncs_per_fsync OPTIONS: mount, write+fsync ROUNDS times under strace,
# print the device syncs counted per fsync (times 100, an integer)
syncs_per_fsync() {
	local pid n
	kvfs_mkfs
	kvfs_mount -o "durability=fsync,window=60000$1"
	python3 - "$MNT/f" <<-'EOF'
		import os, sys
		fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
		os.write(fd, b"x" * (1 << 20))
		os.fsync(fd)
		os.close(fd)
	EOF
	pid=$(kvfs_pid)
	# -f with -p: every thread of the daemon, the writer's among them
	strace -f -qq -p "$pid" -o "$T/strace" \
		-e trace=fdatasync,fsync,msync,sync_file_range,syncfs &
	STRACE=$!
	# strace says nothing once attached: wait until it shows as the tracer
	for _ in $(seq 100); do
		grep -q "^TracerPid:[[:space:]]*$STRACE\$" "/proc/$pid/status" && break
		sleep 0.05
	done
	python3 - "$MNT/f" "$ROUNDS" <<-'EOF'
		import os, random, sys
		fd = os.open(sys.argv[1], os.O_RDWR)
		rng = random.Random(7)
		for _ in range(int(sys.argv[2])):
		    os.pwrite(fd, os.urandom(4096), rng.randrange(256) * 4096)
		    os.fsync(fd)
		os.close(fd)
	EOF
	kill "$STRACE"
	wait "$STRACE" 2>/dev/null
	STRACE=
	kvfs_umount
	n=$(grep -cE "(fdatasync|fsync|msync|sync_file_range|syncfs)\(" "$T/strace")
	echo "$1: $n device syncs for $ROUNDS fsyncs" >&2
	echo $((n * 100 / ROUNDS))
}

for opts in "" ",nowriteback"; do
	per=$(syncs_per_fsync "$opts")
	expect "syncs per fsync${opts:+ ($opts)}: $per/100, at most 2" [ "$per" -le 200 ]
	expect "syncs per fsync${opts:+ ($opts)}: $per/100, some counted" [ "$per" -ge 100 ]
	"$FSCK_BIN" -n "$IMG" >/dev/null 2>&1 || bad "fsck after the rounds${opts:+ ($opts)}"
done
kvfs_results
