#!/bin/bash
# test_mkfs.sh - mkfs.kvfs as a user runs it: creates an image whose
# databases are the ones docs/FORMAT.md names, refuses to overwrite without
# -f, rejects bad arguments with exit 16, and leaves foreign files alone.
# -O compress: blocks of 16360 unless -b says otherwise, compress=zstd:LEVEL
# in the mount defaults, -d's blocks stored compressed and read back as
# they were, and a mount of the image storing what it writes compressed
# (that part skipped without /dev/fuse or KVFS_BIN).
#
# usage: test_mkfs.sh MKFS FORMAT_MD DUMP
set -u
MKFS=$1
FORMAT_MD=$2
DUMP=$3
T=$(mktemp -d)
trap 'mountpoint -q "$T/mnt" 2>/dev/null && fusermount3 -u "$T/mnt"; rm -rf "$T"' EXIT
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
not_has() { ! grep -q -- "$1" "$T/out"; }
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

# ---- -O compress
has() { grep -qxF -- "$1" "$T/out" || { echo "  no line '$1' in:"; cat "$T/out"; return 1; }; }
check "-O compress" exit_is 0 "$MKFS" -O compress "$T/z.img"
check "-O compress: blocks of 16360" grep -q "created kvfs image .*block size 16360," "$T/out"
check "-O compress: says so" \
	has "new data blocks are stored compressed (zstd level 3; mount defaults 'compress=zstd:3')"
check "-O compress: summary" exit_is 0 "$DUMP" "$T/z.img" summary
check "-O compress: the defaults record" has "mount defaults: compress=zstd:3"
check "-O compress: no block yet, no feature bit" \
	has "features:       compat 0, ro_compat 0, incompat 0"
check "-O compress=zstd:9 -b 8168" exit_is 0 "$MKFS" -q -f -O compress=zstd:9 -b 8168 "$T/z.img"
check "-b kept with -O" exit_is 0 "$DUMP" "$T/z.img" summary
check "-b kept with -O: 8168" has "block size:     8168"
check "-O compress=zstd:9: level 9" has "mount defaults: compress=zstd:9"
check "-O compress=zstd, then -O nocompress" \
	exit_is 0 "$MKFS" -f -O compress=zstd -O nocompress "$T/z.img"
check "-O nocompress: blocks of 4072" grep -q "block size 4072," "$T/out"
check "-O nocompress: says nothing of it" not_has "compressed"
check "-O nocompress: summary" exit_is 0 "$DUMP" "$T/z.img" summary
check "-O nocompress: no defaults" has "mount defaults: (none)"
rm -f "$T/b.img"
for bad in lz4 compress=lz4 compress=zstd:0 compress=zstd:20 compress=zstd:x compress,nocompress \
	""; do
	check "-O '$bad': exit 16" exit_is 16 "$MKFS" -O "$bad" "$T/b.img"
	check "-O '$bad': a message" grep -q "^mkfs.kvfs: .*$bad" "$T/err"
done
check "-O: no image written on bad values" [ ! -e "$T/b.img" ]
check "-O 'lz4': names what -O takes" grep -q "compress, compress=zstd:LEVEL or nocompress" "$T/err"

# -d with -O compress: the tree's blocks stored compressed, read back as
# they were (text compresses; random bytes and a 1-byte file do not)
mkdir -p "$T/tree/sub"
seq 1 100000 >"$T/tree/text"
head -c 100000 /dev/urandom >"$T/tree/random"
printf z >"$T/tree/sub/short"
check "-d -O compress" exit_is 0 "$MKFS" -q -f -O compress -d "$T/tree" "$T/z.img"
check "-d -O compress: summary" exit_is 0 "$DUMP" "$T/z.img" summary
check "-d -O compress: the feature bit" \
	has "features:       compat 0, ro_compat 0, incompat 0x4 (compressed blocks)"
zline="^compressed:     36 blocks: 588895 bytes of data \(.*\) in frames of [0-9]+ \(.*\), "
check "-d -O compress: the text's 36 blocks compressed" \
	grep -Eq "${zline}ratio [3-9]\.[0-9]{2}$" "$T/out"
check "-d -O compress: export" exit_is 0 "$DUMP" "$T/z.img" export "$T/z.d"
check "-d -O compress: read back as they were" diff -r "$T/tree" "$T/z.d"
check "-d without -O: nothing compressed" exit_is 0 "$MKFS" -q -f -d "$T/tree" "$T/p.img"
check "-d without -O: summary" exit_is 0 "$DUMP" "$T/p.img" summary
check "-d without -O: no compressed block" has "compressed:     0 blocks"
check "-d -O compress: a smaller image" \
	[ "$(stat -c %s "$T/z.img")" -lt "$(stat -c %s "$T/p.img")" ]

# a mount of a -O compress image stores the blocks it writes compressed
if [ -c /dev/fuse ] && command -v fusermount3 >/dev/null && [ -x "${KVFS_BIN:-}" ]; then
	mkdir -p "$T/mnt"
	"$MKFS" -q -f -O compress "$T/m.img"
	if "$KVFS_BIN" "$T/m.img" "$T/mnt"; then
		# in large writes: a block a write covers in part is stored as
		# it is (4 KiB writes would leave every block of 16360 so)
		dd if="$T/tree/text" of="$T/mnt/text" bs=1M status=none
		check "mounted: reads back" cmp "$T/tree/text" "$T/mnt/text"
		fusermount3 -u "$T/mnt"
		for i in $(seq 300); do
			flock -n -x "$T/m.img" true 2>/dev/null && break
			sleep 0.1
		done
		check "mounted: summary" exit_is 0 "$DUMP" "$T/m.img" summary
		check "mounted: what it wrote is compressed" grep -Eq \
			"^compressed:     [1-9][0-9]* blocks: [0-9]+ bytes of data" "$T/out"
		check "mounted: the feature bit" has \
			"features:       compat 0, ro_compat 0, incompat 0x4 (compressed blocks)"
	else
		check "-O compress image mounts" false
	fi
else
	echo "SKIP: the mount of a -O compress image (no /dev/fuse, or KVFS_BIN not set)"
fi

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
