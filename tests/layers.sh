#!/bin/bash
# layers.sh - keeps the seam between kv/'s record layer and its engines
# (docs in kv/engine.h, contract 9; the layout in README.md):
#
#   1. only kv/lmdb/ includes lmdb.h (or its own lmdb_int.h),
#   2. only kv/lmdb/ calls what kv/lmdb/ defines or declares: the room,
#      the flusher, the tail check, the map's growth (the record layer
#      reaches them through the engine's hooks in kv_engine_lmdb),
#   3. only kv/pg/ includes libpq-fe.h (or its own pg_int.h),
#
# for every C file of the tree, but the exceptions below, each with its
# reason. An exception that no longer needs to be one fails too, so that
# the list stays what the tree is.
#
#   tests/layers.sh [SOURCE_DIR]    (exit 0: the seam holds; 1: it does not)
set -euo pipefail
ROOT=$(cd "${1:-$(dirname "$0")/..}" && pwd)
cd "$ROOT"

# file: what it may use of an engine, and why
declare -A LMDB_OK=(
	[tests/unit/testutil.c]="patches images through raw LMDB for the tests of damaged records"
	[tests/unit/test_env.c]="builds version 1 and damaged images through raw LMDB"
	[tests/unit/test_writer.c]="reads LMDB's transaction id to see which commit held an op"
	[tests/unit/test_flusher.c]="waits for the kicks the flusher served, in the engine's state"
	[tests/unit/test_format.c]="checks err.c's mapping of LMDB's own codes"
	[tests/tools/fsck_break.c]="breaks images through raw LMDB for fsck's tests"
	[tests/fuzz/fuzz_image.c]="applies the fuzzer's record edits through raw LMDB"
	[bench/kvbench.c]="the raw LMDB baseline beside each kv row"
)
declare -A PG_OK=(
	[tests/unit/engine_test.c]="the engine tests' admin connection to their cluster"
	[tests/unit/test_engine.c]="a test of the engines: resets their tables between tests"
	[tests/unit/test_engine_pg.c]="a test of the PostgreSQL engine: stops and starts its server"
)

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	mapfile -t files < <(git ls-files -co --exclude-standard -- '*.c' '*.h' | sort)
else
	mapfile -t files < <(find . -path ./.git -prune -o -path './build*' -prune -o \
		\( -name '*.c' -o -name '*.h' \) -type f -print | sed 's|^\./||' | sort)
fi

# A file's text without its comments (which may name anything), line
# numbers kept.
code_of() {
	perl -0777 -pe 's{/\*.*?\*/}{ my $c = $&; $c =~ tr/\n//cd; $c }gse; s{//[^\n]*}{}g' "$1"
}

# What kv/lmdb/ defines with external linkage, or declares in its header:
# the names no other file may call.
# (A definition starts its line with its type; a file's static ones are
# its own, a header's static inline ones the engine's.)
mapfile -t names < <(
	for f in kv/lmdb/*.c kv/lmdb/*.h; do
		code_of "$f" | grep -E '^[A-Za-z_][A-Za-z0-9_ ]*[ *]kv_[a-z0-9_]+\(' |
			{ if [[ $f == *.c ]]; then grep -v '^static' || true; else cat; fi } |
			grep -oE 'kv_[a-z0-9_]+\(' || true
	done | tr -d '(' | sort -u)
if [ "${#names[@]}" -lt 10 ]; then
	echo "layers: found only ${#names[@]} functions in kv/lmdb/: is this kvfs's tree?" >&2
	exit 1
fi
calls=$(IFS='|'; echo "${names[*]}")

fail=0
declare -A used_lmdb used_pg

# hits: lines of file f that use an engine; fine inside its home folder,
# and in a listed exception (noted as used), else reported.
judge() { # f home hits exceptions used
	local f=$1 home=$2 hits=$3
	local -n ok=$4 used=$5
	if [ -z "$hits" ] || [[ $f == "$home"/* ]]; then
		return 0
	elif [ -n "${ok[$f]:-}" ]; then
		used[$f]=1
	else
		sed "s|^|$f:|" <<<"$hits"
		fail=1
	fi
}

# An exception whose file no longer uses the engine.
stale() { # exceptions used what
	local -n ok=$1 used=$2
	for f in "${!ok[@]}"; do
		if [ -z "${used[$f]:-}" ]; then
			echo "layers: $f no longer uses $3: drop it from $1" >&2
			fail=1
		fi
	done
}

for f in "${files[@]}"; do
	code=$(code_of "$f")
	hits=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](lmdb|lmdb_int)\.h[>"]' \
		<<<"$code" || true)
	hits+=$'\n'$(grep -nE "(^|[^A-Za-z0-9_>.])($calls)[[:space:]]*\(" <<<"$code" |
		sed 's/$/  <- kv\/lmdb\/'"'"'s/' || true)
	judge "$f" kv/lmdb "$(sed '/^$/d' <<<"$hits")" LMDB_OK used_lmdb
	hits=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](libpq-fe|pg_int)\.h[>"]' \
		<<<"$code" || true)
	judge "$f" kv/pg "$hits" PG_OK used_pg
done
[ $fail = 0 ] || echo "layers: the lines above reach into an engine from outside its folder" \
	"(kv/lmdb/, kv/pg/); the record layer uses the engine's hooks (kv/engine.h)" >&2
stale LMDB_OK used_lmdb LMDB
stale PG_OK used_pg libpq
[ $fail = 0 ] && echo "layers: ${#files[@]} files, ${#names[@]} names of kv/lmdb/: the seam holds"
exit $fail
