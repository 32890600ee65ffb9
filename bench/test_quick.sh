#!/bin/bash
# test_quick.sh BUILD_DIR - CTest "bench.quick": run bench/run --quick (small
# sizes, one run) on every target this machine can mount, with the binaries
# of BUILD_DIR, and check that the table and the kvbench lines were
# produced: every row, every kvfs column. Never a figure: CI machines are
# shared and noisy. Exit 77 (skipped) where /dev/fuse is missing.
set -u
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
	echo "SKIP: /dev/fuse or fusermount3 missing"
	exit 77
fi
for tool in fio rsync; do
	command -v $tool >/dev/null || { echo "FAIL: $tool missing (./dev.sh installs it)"; exit 1; }
done
BUILD=${1:?usage: test_quick.sh BUILD_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mktemp -d /tmp/kvfs-bench-test.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

/usr/bin/python3 "$HERE/run" --quick --no-build --build-dir "$BUILD" --out "$OUT" \
	>"$OUT/stdout" 2>"$OUT/stderr"
rc=$?
if [ $rc -ne 0 ]; then
	echo "FAIL: bench/run --quick exited $rc"
	tail -30 "$OUT/stderr"
	exit 1
fi
fail=0
check() { # file, fixed string
	grep -qF -- "$2" "$1" || { echo "FAIL: '$2' missing from $(basename "$1")"; fail=1; }
}
T=$OUT/results.md
check "$T" "| job | unit | kvfs-full | kvfs-fsync | kvfs-none |"
for row in "seq write 1 MiB" "seq read 1 MiB" "rand read 4 KiB O_DIRECT, 1 job" \
	"rand read 4 KiB O_DIRECT, 2 jobs" "rand write 4 KiB O_DIRECT, 1 job" \
	"rand write 4 KiB O_DIRECT, 2 jobs" "rand write 4 KiB + fsync each" \
	"small files: create" "small files: stat (warm)" "small files: stat (cold dcache)" \
	"small files: open+read+close (cold)" "small files: delete" \
	"small files: create, 2 threads" "dir of 2000: create" "dir of 2000: lookup (cold)" \
	"dir of 2000: list (cold)" "space: 64m file" "space: 1000 x 4 KiB files" \
	"user's day: untar " "user's day: find -ls (cold)" \
	"user's day: read all, tar to a pipe (cold)" "user's day: grep -r (warm)" \
	"user's day: rm -rf" "rsync -a of " "rsync -a again (nothing to transfer)" \
	"SQLite: 300 one-row txns, rollback journal" "SQLite: 300 one-row txns, WAL"; do
	# a row with a figure in each kvfs column (a dash would mean a job failed)
	grep -F "| $row" "$T" | grep -qE '^\| [^|]+ \| [^|]+ \| [0-9][0-9,.]* \| [0-9][0-9,.]* \| [0-9][0-9,.]* \|' ||
		{ echo "FAIL: row '$row' missing or without kvfs figures"; fail=1; }
done
check "$T" "Median of 1 run"
K=$OUT/kvbench.txt
for row in "fillseq" "fillrandom" "overwrite batch=1 " "overwrite batch=1000" \
	"readrandom 1/txn 1T" "readrandom 1000/txn 2T" "readseq 1000/txn" "raw mdb_get 1/txn 1T"; do
	check "$K" "$row"
done
if [ -s "$OUT/ratios.png" ] || ! command -v gnuplot >/dev/null; then :; else
	echo "FAIL: no chart although gnuplot is installed"
	fail=1
fi
[ $fail -eq 0 ] && echo "PASS: bench table, chart and kvbench produced"
exit $fail
