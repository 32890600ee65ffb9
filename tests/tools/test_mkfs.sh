#!/bin/bash
# test_mkfs.sh - mkfs.kvfs as a user runs it: creates an image whose
# databases are the ones docs/FORMAT.md names, refuses to overwrite without
# -f, rejects bad arguments with exit 16, and leaves foreign files alone.
set -u
MKFS=$1
FORMAT_MD=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0 passes=0

check() { # name, then a command that must succeed
	local name=$1
	shift
	if "$@"; then
		passes=$((passes + 1))
	else
		echo "FAIL: $name"
		fails=$((fails + 1))
	fi
}
exit_is() { # expected code, command...
	local want=$1 got
	shift
	"$@" >"$T/out" 2>"$T/err"
	got=$?
	[ "$got" -eq "$want" ] || { echo "  exit $got, wanted $want: $*"; cat "$T/err"; return 1; }
}

check "mkfs creates an image" exit_is 0 "$MKFS" -L test "$T/a.img"
check "mkfs reports the image" grep -q "created kvfs image .*block size 4072.*label 'test'" "$T/out"

# every database docs/FORMAT.md names is in the image, and no other
want=$(grep -o '^| `[a-z]*` |' "$FORMAT_MD" | tr -d '|` ' | sort -u | tr '\n' ' ')
got=$(mdb_stat -a -n "$T/a.img" | sed -n 's/^Status of \([a-z]*\)$/\1/p' | sort -u | tr '\n' ' ')
check "databases match FORMAT.md ($want)" [ "$want" = "$got" ]
check "databases are eight" [ "$(echo $got | wc -w)" -eq 8 ]

cp "$T/a.img" "$T/a.copy"
check "existing image refused without -f" exit_is 1 "$MKFS" "$T/a.img"
check "message names the file" grep -q "a.img' exists (use -f" "$T/err"
check "refused image untouched" cmp -s "$T/a.img" "$T/a.copy"
check "-f overwrites" exit_is 0 "$MKFS" -f -b 8168 "$T/a.img"
check "-f applied the block size" grep -q "block size 8168" "$T/out"

# the image holds every file of the filesystem: its owner's alone, whatever
# the umask; -f keeps the mode (and owner) of the image it replaces
mode() { stat -c %a "$1"; }
check "a new image is 0600 (got $(mode "$T/a.img"))" [ "$(mode "$T/a.img")" = 600 ]
(umask 0; "$MKFS" "$T/umask0.img" >/dev/null) # the report reopens it: a lock file
check "umask 0: still 0600 (got $(mode "$T/umask0.img"))" [ "$(mode "$T/umask0.img")" = 600 ]
check "umask 0: its lock file 0600 (got $(mode "$T/umask0.img-lock"))" \
	[ "$(mode "$T/umask0.img-lock")" = 600 ]
(umask 077; "$MKFS" -q "$T/umask077.img")
check "umask 077: 0600 (got $(mode "$T/umask077.img"))" [ "$(mode "$T/umask077.img")" = 600 ]
chmod 640 "$T/a.img"
check "-f over a 0640 image" exit_is 0 "$MKFS" -q -f "$T/a.img"
check "-f keeps 0640 (got $(mode "$T/a.img"))" [ "$(mode "$T/a.img")" = 640 ]
if [ "$(id -u)" -eq 0 ]; then
	chown 1234:5678 "$T/a.img"
	check "-f as root over another user's image" exit_is 0 "$MKFS" -q -f "$T/a.img"
	check "-f keeps the owner (got $(stat -c %u:%g "$T/a.img"))" \
		[ "$(stat -c %u:%g "$T/a.img")" = 1234:5678 ]
	check "-f keeps the mode too (got $(mode "$T/a.img"))" [ "$(mode "$T/a.img")" = 640 ]
fi
chmod 600 "$T/a.img"

check "no image: usage exit 16" exit_is 16 "$MKFS"
check "two images: usage exit 16" exit_is 16 "$MKFS" "$T/x" "$T/y"
check "unknown option: exit 16" exit_is 16 "$MKFS" --bogus "$T/b.img"
check "unknown option: named, by the program's name" \
	grep -q "^mkfs.kvfs: unrecognized option '--bogus'" "$T/err"
check "missing argument: exit 16" exit_is 16 "$MKFS" "$T/b.img" -L
check "missing argument: named, by the program's name" \
	grep -q "^mkfs.kvfs: option requires an argument -- 'L'" "$T/err"
check "bad block size: exit 16" exit_is 16 "$MKFS" -b 12 "$T/b.img"
check "non-numeric block size: exit 16" exit_is 16 "$MKFS" -b 4k2 "$T/b.img"
check "long label: exit 16" exit_is 16 "$MKFS" -L "$(printf 'x%.0s' {1..64})" "$T/b.img"
check "no image written on usage errors" [ ! -e "$T/b.img" ]
check "--help exits 0" exit_is 0 "$MKFS" --help
check "--help shows usage" grep -q "^usage: mkfs.kvfs" "$T/out"
check "--version exits 0" exit_is 0 "$MKFS" --version
check "--version names the format" grep -q "image format 2" "$T/out"
check "missing directory: exit 1" exit_is 1 "$MKFS" "$T/no/such/dir/c.img"
mkdir "$T/d"
check "a directory is refused even with -f" exit_is 1 "$MKFS" -f "$T/d"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
