#!/bin/bash
# test_share.sh - copies that share blocks (copy_file_range, what cp uses):
# a copy costs records, not data; a change to either file costs what it
# changes and leaves the other alone; deleting the original keeps what the
# copies read, deleting the last copy gives the room back; the image then
# checks clean, and reads the same after a remount.
. "$(dirname "$0")/lib.sh"
: "${FSCK_BIN:?}" "${DUMP_BIN:?}"
MB=${KVFS_SHARE_MB:-64}

# pages in use by the image's last commit, in bytes: an fsync of the
# mount's root commits what kvfs holds in its window first
used() {
	sync "$MNT"
	"$DUMP_BIN" "$IMG" summary | awk '/^map used:/ { print $3 }'
}
sum() { md5sum < "$1" | cut -c1-32; }
# copy_file_range(2) of len bytes from $1 at $2 to $3 at $4, as one call
cfr() {
	python3 - "$@" <<'EOF'
import os, sys
src, soff, dst, doff, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
fi = os.open(src, os.O_RDONLY)
fo = os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644)
done = 0
while done < n:
    k = os.copy_file_range(fi, fo, n - done, soff + done, doff + done)
    if k == 0:
        break
    done += k
print(done)
EOF
}

kvfs_mkfs
kvfs_mount
head -c $((MB << 20)) /dev/urandom > "$T/orig"
cp "$T/orig" "$MNT/big"
want=$(sum "$T/orig")
u0=$(used)

# a copy: the same bytes, records only (an extent and its lend record for
# each 256 blocks: about 0.1 % of the data)
cp "$MNT/big" "$MNT/copy" || bad "cp"
u1=$(used)
expect "copy reads as the original" [ "$(sum "$MNT/copy")" = "$want" ]
grow=$((u1 - u0))
expect "a copy of $MB MiB grows the image by under 1 MiB (grew $grow)" [ "$grow" -lt $((1 << 20)) ]
expect "the copy's st_blocks count its blocks" \
	[ "$(stat -c %b "$MNT/copy")" -ge "$(stat -c %b "$MNT/big")" ]
"$DUMP_BIN" "$IMG" summary | grep -q "incompat 0x2" || bad "the feature bit is set"
ok

# 1 MiB changed in the copy: about that much more room, the original as it was
head -c $((1 << 20)) /dev/urandom > "$T/patch"
dd if="$T/patch" of="$MNT/copy" bs=1M seek=10 conv=notrunc status=none
u2=$(used)
grow=$((u2 - u1))
expect "1 MiB written into the copy takes 1-1.5 MiB (took $grow)" \
	[ "$grow" -ge $((1 << 20)) -a "$grow" -lt $((3 << 19)) ]
expect "the original is unchanged" [ "$(sum "$MNT/big")" = "$want" ]
dd if="$T/patch" of="$T/orig" bs=1M seek=10 conv=notrunc status=none
expect "the copy holds the change" [ "$(sum "$MNT/copy")" = "$(sum "$T/orig")" ]
dd if="$MNT/big" of="$T/orig" bs=1M count=11 conv=notrunc status=none # back to big's

# a copy of the copy, then changes to the original: the copies keep theirs
cp "$MNT/copy" "$MNT/copy2"
csum=$(sum "$MNT/copy")
expect "a copy of a copy reads as it" [ "$(sum "$MNT/copy2")" = "$csum" ]
dd if="$T/patch" of="$MNT/big" bs=4000 seek=3 count=300 conv=notrunc status=none
expect "a write to the original leaves the copy alone" [ "$(sum "$MNT/copy")" = "$csum" ]
expect "and the copy's copy" [ "$(sum "$MNT/copy2")" = "$csum" ]
truncate -s 5M "$MNT/big"
expect "a truncate of the original leaves the copy alone" [ "$(sum "$MNT/copy")" = "$csum" ]
fallocate -p -o 1M -l 2M "$MNT/copy2"
cp "$MNT/copy" "$T/c2" && fallocate -p -o 1M -l 2M "$T/c2"
expect "a punch in one copy leaves the other alone" [ "$(sum "$MNT/copy")" = "$csum" ]
expect "and punches the one" [ "$(sum "$MNT/copy2")" = "$(sum "$T/c2")" ]

# offsets alike within a block, not on one: the partial ends are copied,
# the blocks between shared; offsets unlike within a block: copied
expect "copy at 1000 -> 1000" [ "$(cfr "$MNT/copy" 1000 "$MNT/part" 1000 5000000)" = 5000000 ]
expect "copy at 1000 -> 5072 + 1000" \
	[ "$(cfr "$MNT/copy" 1000 "$MNT/part" 5073 3000000)" = 3000000 ]
expect "copy at 7 -> 8" [ "$(cfr "$MNT/copy" 7 "$MNT/part2" 8 3000000)" = 3000000 ]
# part: [1000, 5073) and [3005073, 5001000) from the first copy, [5073,
# 3005073) from the second; part2: copy's [7, 3000007) at 8
same() { cmp -s -i "$2:$4" -n "$5" "$1" "$3" || bad "bytes: $*"; }
same "$MNT/copy" 1000 "$MNT/part" 1000 4073
same "$MNT/copy" 1000 "$MNT/part" 5073 3000000
same "$MNT/copy" 3005073 "$MNT/part" 3005073 $((5001000 - 3005073))
same "$MNT/copy" 7 "$MNT/part2" 8 3000000
expect "part's size" [ "$(stat -c %s "$MNT/part")" = 5001000 ]
ok

# a range of a copy back into its original elsewhere: the original then
# borrows from itself (the blocks' home is the original), and a write to
# the blocks lent leaves the borrowed range as it was
head -c 3000000 "$T/orig" >"$MNT/self"
cp "$MNT/self" "$MNT/selfcp"
expect "copy into its original" \
	[ "$(cfr "$MNT/selfcp" 0 "$MNT/self" $((4072 * 600)) 1000000)" = 1000000 ]
head -c 1000000 "$T/orig" >"$T/first"
dd if="$T/patch" of="$MNT/self" bs=1000 count=10 conv=notrunc status=none
same "$T/first" 0 "$MNT/self" $((4072 * 600)) 1000000
same "$T/patch" 0 "$MNT/self" 0 10000

# remount: the same bytes; fsck finds nothing to say
kvfs_umount
expect "fsck -n clean with shares" "$FSCK_BIN" -n "$IMG"
kvfs_mount
expect "copy after remount" [ "$(sum "$MNT/copy")" = "$csum" ]

# deleting the original keeps what the copies read; deleting every copy
# gives the room back
rm "$MNT/big"
expect "copy after the original's delete" [ "$(sum "$MNT/copy")" = "$csum" ]
p2=$(sum "$MNT/part2")
rm "$MNT/copy" "$MNT/part"
expect "a copy's copy after the copy's delete" [ "$(sum "$MNT/copy2")" = "$(sum "$T/c2")" ]
expect "a copied range after its source's delete" [ "$(sum "$MNT/part2")" = "$p2" ]
rm "$MNT/copy2" "$MNT/part2" "$MNT/self" "$MNT/selfcp"
# kvfs frees a deleted file once the kernel forgets it, in a later commit
for i in $(seq 100); do
	sync "$MNT"
	"$DUMP_BIN" "$IMG" summary | grep -q "^data blocks:    0 " && break
	sleep 0.1
done
"$DUMP_BIN" "$IMG" summary | grep -q "^data blocks:    0 " || bad "all deleted: no block kept"
u3=$(used)
# the pages LMDB keeps track of freed pages with come and go
expect "all deleted: back within 4 MiB of the start (${u3} vs $u0 - $MB MiB)" \
	[ "$u3" -lt $((u0 - (MB << 20) + (4 << 20))) ]
kvfs_umount
expect "fsck -n clean after the deletes" "$FSCK_BIN" -n "$IMG"
kvfs_results
