#!/bin/bash
# build.sh - build the libFuzzer target with clang (ASan, UBSan, libFuzzer).
#   tests/fuzz/build.sh OUTDIR   -> OUTDIR/fuzz_image
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/build-fuzz}
mkdir -p "$OUT"
FLAGS="-g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
	-D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -DKVFS_VERSION=\"fuzz\" -DKVFS_NO_CRASH_GUARD
	-I$ROOT/kv -I$ROOT/common -I$ROOT/tools $(pkg-config --cflags lmdb libxxhash libzstd libarchive libpq)"
objs=()
compile() { # source, extra flags...
	local src=$1 obj=$OUT/$(echo "$1" | tr / _).o
	shift
	clang $FLAGS "$@" -c "$ROOT/$src" -o "$obj"
	objs+=("$obj")
}
for f in "$ROOT"/kv/*.c "$ROOT"/kv/lmdb/*.c "$ROOT"/kv/pg/*.c; do compile "${f#"$ROOT"/}"; done
for f in "$ROOT"/common/*.c; do compile "common/$(basename "$f")"; done
for f in cli.c inomap.c progress.c walk.c dump/dump_show.c dump/dump_export.c dump/dump_tar.c; do
	compile "tools/$f"
done
compile tools/dump/dump.c -Dmain=kvfs_dump_main
for f in problem.c repair.c pass1.c pass2.c pass3.c pass4.c pass5.c pass6.c pass7.c share.c; do
	compile "tools/fsck/$f"
done
compile tools/fsck/main.c -Dmain=fsck_main
compile tests/fuzz/fuzz_image.c
clang -fsanitize=fuzzer,address,undefined "${objs[@]}" -o "$OUT/fuzz_image" \
	$(pkg-config --libs lmdb libxxhash libzstd libarchive libpq) -lpthread
echo "$OUT/fuzz_image"
