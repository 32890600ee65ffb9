#!/bin/bash
# dev.sh - install what kvfs needs, build it, and mount or test it.
#
#   ./dev.sh up     install missing packages, build, make the default image
#                   (if absent) and mount it
#   ./dev.sh test   install missing packages, build, run the whole test suite
#   ./dev.sh down   unmount the default image
#   ./dev.sh check  what CI runs: test, then the whole suite again under
#                   ASan+UBSan (build-asan/), the unit tests under valgrind
#                   memcheck, 60 s of fuzzing (tests/fuzz/), and the Debian
#                   package test (tests/pkg/); any report fails it
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

# Debian 12 packages: build, run and test.
PACKAGES=(build-essential cmake pkg-config libfuse3-dev fuse3 liblmdb-dev lmdb-utils
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

build() {
	local type=Release san=OFF
	[ "${KVFS_SANITIZE:-0}" = 1 ] && { type=Debug; san=ON; }
	say "building in $BUILD_DIR ($type)"
	cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=$type -DKVFS_SANITIZE=$san >/dev/null
	cmake --build "$BUILD_DIR" -j"$(nproc)"
}

cmd_up() {
	install_deps
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

cmd_test() {
	install_deps
	build
	say "running the test suite"
	cd "$BUILD_DIR"
	ctest --output-on-failure -j"$(nproc)" --timeout 900
}

cmd_check() {
	cmd_test
	say "the whole suite under ASan+UBSan"
	BUILD_DIR=$ROOT/build-asan KVFS_SANITIZE=1 build
	(cd "$ROOT/build-asan" && ASAN_OPTIONS=detect_leaks=1 \
		ctest --output-on-failure -j"$(nproc)" --timeout 1800)
	say "unit tests under valgrind memcheck"
	local t fails=0 runs=0 rc
	for t in "$BUILD_DIR"/tests/unit/test_*; do
		[ -x "$t" ] || continue
		local wrap=()
		# the engine test runs on a PostgreSQL cluster of its own
		[ "$(basename "$t")" = test_engine ] && wrap=(bash "$ROOT/tests/pg/cluster.sh" run -o)
		runs=$((runs + 1))
		rc=0
		timeout 900 "${wrap[@]}" valgrind -q --leak-check=full \
			--errors-for-leak-kinds=definite,indirect --error-exitcode=1 "$t" \
			>/dev/null 2>"$BUILD_DIR/valgrind.log" || rc=$?
		[ "$rc" -eq 77 ] && runs=$((runs - 1)) # skipped: no server binaries
		if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
			echo "valgrind: $(basename "$t") failed:"; cat "$BUILD_DIR/valgrind.log"
			fails=$((fails + 1))
		fi
	done
	echo "valgrind: $((runs - fails)) passed, $fails failed"
	[ "$fails" -eq 0 ] && [ "$runs" -gt 0 ] || return 1
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
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
test) cmd_test ;;
check) cmd_check ;;
*)
	echo "usage: $0 up|down|test|check" >&2
	exit 2
	;;
esac
