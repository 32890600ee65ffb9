#!/bin/bash
# dev.sh - install what kvfs needs, build it, and mount or test it.
#
#   ./dev.sh up     install missing packages, build, make the default image
#                   (if absent) and mount it
#   ./dev.sh test   install missing packages, build, run the whole test suite
#   ./dev.sh down   unmount the default image
#   ./dev.sh check  what CI runs: test, then the whole suite again under
#                   ASan+UBSan (build-asan/) at the depth chosen for it
#                   (KVFS_TEST_DEPTH=quick: fewer difftest seeds, power-loss
#                   points and crash rounds, a smaller bigdir), the unit tests
#                   under valgrind memcheck, 60 s of fuzzing (tests/fuzz/),
#                   and the Debian package test (tests/pkg/); any report
#                   fails it. The Release pass mounts over io_uring (where
#                   the kernel and the libfuse built have it), the sanitizer
#                   pass over /dev/fuse, and a short suite checks a build
#                   with the system's libfuse3. Ends with the ten slowest
#                   tests.
#   ./dev.sh check --full   the same with the sanitizer pass at full depth:
#                   run it before resolving write-path or transport work
#
# Environment: KVFS_IMAGE (default /var/lib/kvfs/default.img),
# KVFS_MNT (default /mnt/kvfs), BUILD_DIR (default ./build),
# KVFS_SANITIZE=1 builds with AddressSanitizer and UBSan.
set -euo pipefail

cd "$(dirname "$0")"
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
IMAGE=${KVFS_IMAGE:-/var/lib/kvfs/default.img}
MNT=${KVFS_MNT:-/mnt/kvfs}

# Debian 12 packages: build, run and test (meson to liburing-dev: libfuse
# 3.18 with io_uring, contrib/libfuse/build.sh).
PACKAGES=(build-essential cmake pkg-config libfuse3-dev fuse3 meson ninja-build liburing-dev
	libnuma-dev liblmdb-dev lmdb-utils
	libcmocka-dev libxxhash-dev libzstd-dev libarchive-dev libarchive-tools attr acl python3 python3-lmdb
	procps psmisc util-linux valgrind debhelper dpkg-dev man-db bash-completion clang fio fuse2fs e2fsprogs gnuplot-nox rsync strace
	postgresql-15 libpq-dev)

say() { printf '==> %s\n' "$*"; }

install_deps() {
	local missing=() p
	for p in "${PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	say "installing ${missing[*]}"
	local sudo=
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# LIBFUSE: the prefix of libfuse 3.18 or later with io_uring, fetched as
# Debian's source package and built once into build-libfuse/
# (contrib/libfuse/build.sh), or empty for the system's libfuse3 (3.14,
# /dev/fuse only): KVFS_LIBFUSE=system asks for that, and a fetch or build
# that fails falls back to it, saying why.
LIBFUSE= LIBFUSE_SOUGHT=
find_libfuse() {
	local dir=$ROOT/build-libfuse
	LIBFUSE= LIBFUSE_SOUGHT=1
	if [ "${KVFS_LIBFUSE:-}" = system ]; then
		say "libfuse: the system's (KVFS_LIBFUSE=system)"
		return 0
	fi
	mkdir -p "$dir"
	if bash "$ROOT/contrib/libfuse/build.sh" "$dir" >"$dir/build.log" 2>&1; then
		LIBFUSE=$(tail -1 "$dir/build.log")
		say "$(tail -2 "$dir/build.log" | head -1)"
	else
		say "$(tail -1 "$dir/build.log"); building with the system's libfuse3 (/dev/fuse only)"
	fi
}

# FUSE over io_uring is off in the kernel until its fuse module's
# enable_uring parameter is set; as root, turn it on (until the next boot:
# README says how to keep it).
uring_on() {
	local p=/sys/module/fuse/parameters/enable_uring
	[ -e "$p" ] || modprobe fuse 2>/dev/null || true
	[ -e "$p" ] || return 0 # a kernel without FUSE over io_uring
	[ "$(cat "$p")" = Y ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		say "the kernel's FUSE over io_uring is off: as root, echo Y > $p"
		return 0
	fi
	say "turning on the kernel's FUSE over io_uring ($p)"
	echo Y >"$p"
}

build() {
	local type=Release san=OFF
	[ "${KVFS_SANITIZE:-0}" = 1 ] && { type=Debug; san=ON; }
	[ -n "$LIBFUSE_SOUGHT" ] || find_libfuse
	say "building in $BUILD_DIR ($type${LIBFUSE:+, libfuse from $LIBFUSE})"
	cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=$type -DKVFS_SANITIZE=$san \
		-DKVFS_ASSERTS=ON -DKVFS_LIBFUSE="$LIBFUSE" >/dev/null
	cmake --build "$BUILD_DIR" -j"$(nproc)"
}

cmd_up() {
	install_deps
	uring_on
	build
	if [ ! -e "$IMAGE" ]; then
		mkdir -p "$(dirname "$IMAGE")"
		"$BUILD_DIR/tools/mkfs.kvfs" "$IMAGE"
	else
		say "using the existing image $IMAGE"
	fi
	if [ ! -x "$BUILD_DIR/fs/kvfs" ]; then
		say "the kvfs daemon is not built yet: stopping after mkfs"
		return 0
	fi
	mkdir -p "$MNT"
	if mountpoint -q "$MNT"; then
		say "$MNT is already mounted"
		return 0
	fi
	"$BUILD_DIR/fs/kvfs" "$IMAGE" "$MNT"
	say "mounted $IMAGE on $MNT (unmount: ./dev.sh down or fusermount3 -u $MNT)"
}

cmd_down() {
	if mountpoint -q "$MNT"; then
		fusermount3 -u "$MNT"
		say "unmounted $MNT"
	fi
}

# ctest in the current directory, its output kept in ctest.log for slowest
ctest_logged() {
	local rc=0
	ctest --output-on-failure -j"$(nproc)" "$@" 2>&1 | tee ctest.log || rc=$?
	return "$rc"
}

cmd_test() {
	install_deps
	uring_on
	build
	say "running the test suite"
	cd "$BUILD_DIR"
	ctest_logged --timeout 900
}

# The ten slowest tests of the passes whose ctest.log files are given, as
# "seconds pass name", so that a test's creep shows in every CI log.
slowest() {
	local log
	for log in "$@"; do
		[ -f "$log" ] || continue
		sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec$/\2 \1/p' "$log" |
			awk -v pass="$(basename "$(dirname "$log")")" '{ printf "%8.1f s  %-10s %s\n", $1, pass, $2 }'
	done | sort -rn | head -10
}

# valgrind memcheck over one unit test binary; its log beside it
valgrind_one() {
	local t=$1 wrap=() rc=0
	# the engine test runs on a PostgreSQL cluster of its own
	[ "$(basename "$t")" = test_engine ] && wrap=(bash "$ROOT/tests/pg/cluster.sh" run -o)
	timeout 900 "${wrap[@]}" valgrind -q --leak-check=full \
		--errors-for-leak-kinds=definite,indirect --error-exitcode=1 "$t" \
		>/dev/null 2>"$t.valgrind.log" || rc=$?
	echo "$rc" >"$t.valgrind.rc"
}

# The unit tests under valgrind, as many at a time as there are cores.
valgrind_units() {
	local t fails=0 runs=0 rc
	for t in "$BUILD_DIR"/tests/unit/test_*; do
		[ -x "$t" ] && [ "${t%.valgrind.*}" = "$t" ] || continue
		while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
		valgrind_one "$t" &
	done
	wait
	for t in "$BUILD_DIR"/tests/unit/test_*.valgrind.rc; do
		[ -f "$t" ] || continue
		rc=$(cat "$t")
		[ "$rc" -eq 77 ] && continue # skipped: no server binaries
		runs=$((runs + 1))
		if [ "$rc" -ne 0 ]; then
			echo "valgrind: $(basename "${t%.valgrind.rc}") failed:"
			cat "${t%.rc}.log"
			fails=$((fails + 1))
		fi
	done
	echo "valgrind: $((runs - fails)) passed, $fails failed"
	[ "$fails" -eq 0 ] && [ "$runs" -gt 0 ]
}

cmd_check() {
	local depth=quick
	[ "${1:-}" = --full ] && depth=full
	SECONDS=0
	cmd_test
	# the Release pass mounts over io_uring where it can; this one over
	# /dev/fuse, so that both transports run every test
	say "the whole suite under ASan+UBSan over /dev/fuse (depth: $depth)"
	BUILD_DIR=$ROOT/build-asan KVFS_SANITIZE=1 build
	(cd "$ROOT/build-asan" && ASAN_OPTIONS=detect_leaks=1 KVFS_TEST_DEPTH=$depth \
		KVFS_TEST_TRANSPORT=devfuse ctest_logged --timeout 1800)
	if [ -n "$LIBFUSE" ]; then
		say "the fallback: built with the system's libfuse3, a short suite"
		LIBFUSE= BUILD_DIR=$ROOT/build-fuse3sys build
		(cd "$ROOT/build-fuse3sys" &&
			ctest_logged -R '^unit_|^fs\.(posix|multiuser|acl|crash|options)$' --timeout 900)
	fi
	say "unit tests under valgrind memcheck"
	rm -f "$BUILD_DIR"/tests/unit/test_*.valgrind.*
	valgrind_units
	say "fuzzing image open, fsck and dump for 60 s (libFuzzer, ASan, UBSan)"
	bash "$ROOT/tests/fuzz/build.sh" "$ROOT/build-fuzz" >/dev/null
	rm -rf "$ROOT/build-fuzz/corpus" && cp -r "$ROOT/tests/corpus/fuzz_image" "$ROOT/build-fuzz/corpus"
	"$ROOT/build-fuzz/fuzz_image" -max_total_time=60 -timeout=10 -close_fd_mask=3 \
		-artifact_prefix="$ROOT/build-fuzz/" "$ROOT/build-fuzz/corpus" 2>"$ROOT/build-fuzz/fuzz.log" ||
		{ tail -60 "$ROOT/build-fuzz/fuzz.log"; echo "fuzz: 0 passed, 1 failed"; return 1; }
	grep -E "^Done [0-9]+ runs" "$ROOT/build-fuzz/fuzz.log"
	say "the Debian package: build, install, mount via fstab, fsck, man, purge"
	local rc=0
	bash "$ROOT/tests/pkg/test_deb.sh" "$ROOT" || rc=$?
	[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ]
	say "the ten slowest tests"
	slowest "$BUILD_DIR/ctest.log" "$ROOT/build-asan/ctest.log"
	say "check passed in $((SECONDS / 60)) min $((SECONDS % 60)) s"
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
test) cmd_test ;;
check) cmd_check "${2:-}" ;;
*)
	echo "usage: $0 up|down|test|check [--full]" >&2
	exit 2
	;;
esac
