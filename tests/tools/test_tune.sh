#!/bin/bash
# test_tune.sh - kvfs-tune: the label and the UUID changed and shown (by
# kvfs-tune -l and kvfs-dump summary), mount defaults stored, then used by a
# mount (max_size: df's size; noatime: a read leaves the access time) unless
# the mount's own options say otherwise; bad values refused with exit 16 and
# the image unchanged; refused while mounted read-write (exit 1, naming the
# mountpoint), -l allowed then; an image with wrong defaults refused by the
# mount and repaired by fsck -y; fsck -n clean after each change. -O
# compress / nocompress: what mounts write from then on is compressed or
# not, the blocks stored before stay as they are, the other defaults are
# kept, and a mount's own -o nocompress wins.
#
# Environment: KVFS_BIN, MKFS_BIN, TUNE_BIN, DUMP_BIN, FSCK_BIN.
. "$(dirname "$0")/../fs/lib.sh"
: "${TUNE_BIN:?}" "${DUMP_BIN:?}" "${FSCK_BIN:?}"

tune() { "$TUNE_BIN" "$@" >"$T/out" 2>"$T/err"; }
has() { grep -qxF -- "$1" "$T/out" || { echo "  no line '$1' in:"; cat "$T/out" "$T/err"; return 1; }; }
says() { grep -qF -- "$1" "$T/err" || { echo "  no '$1' in:"; cat "$T/err"; return 1; }; }
clean() { "$FSCK_BIN" -n "$IMG" >"$T/fsck" 2>&1 || { cat "$T/fsck"; return 1; }; }
size_mb() { df -m --output=size "$MNT" | tail -1 | tr -d ' '; }

kvfs_mkfs -L first
tune "$IMG"
expect "list: exit 0" [ $? -eq 0 ]
expect "list: label" has "label:          'first'"
expect "list: no defaults" has "mount defaults: (none)"
old_uuid=$(sed -n 's/^uuid: *//p' "$T/out")
expect "list: no lock file left" [ ! -e "$IMG-lock" ]

# ---- label and uuid
tune -L second -U random "$IMG"
expect "label and random uuid: exit 0" [ $? -eq 0 ]
tune -l "$IMG"
expect "label changed" has "label:          'second'"
new_uuid=$(sed -n 's/^uuid: *//p' "$T/out")
expect "uuid changed ($old_uuid -> $new_uuid)" [ -n "$new_uuid" ] && [ "$new_uuid" != "$old_uuid" ]
expect "uuid is version 4" eval '[[ $new_uuid =~ ^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$ ]]'
tune -U 01234567-89AB-cdef-0123-456789abcdef -L '' "$IMG"
"$DUMP_BIN" "$IMG" summary >"$T/out"
expect "dump: the uuid given" has "uuid:           01234567-89ab-cdef-0123-456789abcdef"
expect "dump: label cleared" has "label:          (none)"
expect "fsck -n clean after label and uuid" clean

# ---- bad values: exit 16, nothing changed
cp "$IMG" "$T/before"
for args in "-U 1234" "-U 01234567-89ab-cdef-0123-456789abcdeg" "-o durability=fast" \
	"-o max_size=12" "-o ro" "-o noatime,,relatime" "-o window=70000" \
	"-L $(printf 'x%.0s' $(seq 64))"; do
	# shellcheck disable=SC2086
	tune $args "$IMG"
	expect "refused: $args (exit 16)" [ $? -eq 16 ]
	expect "refused: $args (a message)" [ -s "$T/err" ]
done
expect "refused: the image unchanged" cmp -s "$IMG" "$T/before"
tune "$T/missing.img"
expect "no image: exit 1" [ $? -eq 1 ]
expect "no image: message" says "missing.img"
tune -L x
expect "no image given: exit 16" [ $? -eq 16 ]

# ---- mount defaults: stored, shown, used
tune -o durability=full,noatime,max_size=64M "$IMG"
expect "defaults: exit 0" [ $? -eq 0 ]
"$DUMP_BIN" "$IMG" summary >"$T/out"
expect "dump shows the defaults" has "mount defaults: durability=full,noatime,max_size=64M"
expect "fsck -n clean with defaults" clean
kvfs_mount
expect "defaults used: max_size ($(size_mb) MiB)" [ "$(size_mb)" -le 64 ]
echo data >"$MNT/f"
touch -a -d '2001-01-01 00:00:00 UTC' "$MNT/f"
cat "$MNT/f" >/dev/null
kvfs_umount
kvfs_mount
expect "defaults used: noatime ($(stat -c %X "$MNT/f"))" [ "$(stat -c %X "$MNT/f")" = 978307200 ]
# while mounted read-write: changes refused, listing works
tune -L third "$IMG"
expect "mounted: refused (exit 1)" [ $? -eq 1 ]
expect "mounted: names the mountpoint" says "$MNT"
tune -l "$IMG"
expect "mounted: -l works" has "mount defaults: durability=full,noatime,max_size=64M"
kvfs_umount
# the mount's own options win
kvfs_mount -o relatime,max_size=256M
expect "own options: max_size ($(size_mb) MiB)" [ "$(size_mb)" -gt 128 ]
cat "$MNT/f" >/dev/null
kvfs_umount
kvfs_mount -o noatime
expect "own options: relatime updated the access time" [ "$(stat -c %X "$MNT/f")" != 978307200 ]
kvfs_umount
# cleared
tune -o '' "$IMG"
tune -l "$IMG"
expect "cleared" has "mount defaults: (none)"
kvfs_mount
expect "cleared: no max_size ($(size_mb) MiB)" [ "$(size_mb)" -gt 256 ]
kvfs_umount

# ---- -O: compression of new writes on and off
seq 1 100000 >"$T/text"
zblocks() { "$DUMP_BIN" "$IMG" inode "$1" | grep -c "^block: .* ok, compressed [0-9]* bytes$"; }
write() { dd if="$T/text" of="$MNT/$1" bs=1M status=none; } # whole blocks a request
tune -o noatime,durability=full -O compress "$IMG"
expect "-O compress: exit 0" [ $? -eq 0 ]
tune -l "$IMG"
expect "-O compress: added to the defaults" \
	has "mount defaults: noatime,durability=full,compress=zstd:3"
expect "-O compress: listed" has "compression:    zstd level 3 (of new writes)"
kvfs_mount
write a
kvfs_umount
za=$(zblocks /a)
expect "-O compress: new writes compressed ($za blocks)" [ "$za" -gt 100 ]
expect "-O compress: fsck -n clean" clean
tune -O nocompress -l "$IMG"
expect "-O nocompress: the other defaults kept" has "mount defaults: noatime,durability=full"
expect "-O nocompress: listed" has "compression:    off"
kvfs_mount
write b
kvfs_umount
expect "-O nocompress: new writes as they are ($(zblocks /b) compressed)" [ "$(zblocks /b)" -eq 0 ]
expect "-O nocompress: stored blocks stay compressed ($(zblocks /a))" [ "$(zblocks /a)" -eq "$za" ]
kvfs_mount
expect "-O: both files read back" cmp "$T/text" "$MNT/a" && cmp "$T/text" "$MNT/b"
kvfs_umount
tune -O compress=zstd:19 -l "$IMG"
expect "-O compress=zstd:19" has "mount defaults: noatime,durability=full,compress=zstd:19"
tune -o noacl -O compress=zstd:5 -l "$IMG"
expect "-o and -O: -O edits what -o set" has "mount defaults: noacl,compress=zstd:5"
kvfs_mount -o nocompress
write c
kvfs_umount
expect "a mount's own -o nocompress wins ($(zblocks /c) compressed)" [ "$(zblocks /c)" -eq 0 ]
"$DUMP_BIN" "$IMG" summary >"$T/out"
expect "dump: the defaults" has "mount defaults: noacl,compress=zstd:5"
expect "dump: the compressed blocks" grep -q "^compressed:     $za blocks: " "$T/out"
cp "$IMG" "$T/before"
for args in "-O lz4" "-O compress=zstd:20" "-O compress=gzip" "-O nocompress=1"; do
	# shellcheck disable=SC2086
	tune $args "$IMG"
	expect "refused: $args (exit 16)" [ $? -eq 16 ]
	expect "refused: $args (a message)" says "-O"
done
expect "refused: the image unchanged" cmp -s "$IMG" "$T/before"
# 255 bytes of defaults leave no room for a compress option: refused whole
tune -o "$(printf 'noatime,%.0s' {1..31})noatime" "$IMG"
cp "$IMG" "$T/before"
tune -O compress "$IMG"
expect "-O with no room left: exit 1" [ $? -eq 1 ]
expect "-O with no room left: says why" says "would be longer than 255 bytes"
expect "-O with no room left: the image unchanged" cmp -s "$IMG" "$T/before"
tune -o '' "$IMG"

# ---- wrong defaults in the image (written by hand): the mount refuses
# them with a message, fsck -y drops them, then it mounts
"$TUNE_BIN" -o noatime "$IMG"
sed -i 's/noatime/noatimX/' "$IMG"
"$KVFS_BIN" "$IMG" "$MNT" 2>"$T/err"
expect "wrong defaults: the mount refuses" [ $? -eq 2 ]
expect "wrong defaults: says why" says "mount defaults it holds are wrong"
"$FSCK_BIN" -y "$IMG" >"$T/out" 2>&1
expect "wrong defaults: fsck -y repairs (exit 1)" [ $? -eq 1 ]
expect "wrong defaults: fsck names them" grep -q "mount defaults 'noatimX' are wrong" "$T/out"
expect "wrong defaults: clean after" clean
kvfs_mount
expect "wrong defaults: mounts after fsck" [ -f "$MNT/f" ]
kvfs_umount

kvfs_results
