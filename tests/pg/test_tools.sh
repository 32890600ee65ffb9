#!/bin/bash
# test_tools.sh - the tools on a postgresql:// image: mkfs.kvfs makes it,
# refuses to replace it without -f and while it is mounted anywhere; -d
# copies a tree in and kvfs-dump export and tree give it back; kvfs-dump backup
# names the database's own tools; kvfs-tune and fsck.kvfs work on it, and
# the tools that change it wait for no mount but are refused while one is
# there (fsck -n and kvfs-dump read it meanwhile). A database without a
# filesystem and a server that is not there get a clear message and exit 1.
#
#   tests/pg/cluster.sh run bash test_tools.sh
#
# Environment: KVFS_BIN, MKFS_BIN, FSCK_BIN, DUMP_BIN, TUNE_BIN; KVFS_TEST_PG_URL.
. "$(dirname "$0")/../fs/lib.sh"
[ -n "$PGDB" ] || { echo "SKIP: no cluster (run it through tests/pg/cluster.sh run)"; exit 77; }

# fails NAME STATUS PATTERN CMD...: CMD exits STATUS saying PATTERN
fails() {
	local name=$1 want=$2 pat=$3 out rc
	shift 3
	out=$("$@" 2>&1)
	rc=$?
	if [ "$rc" -ne "$want" ] || ! grep -q -- "$pat" <<<"$out"; then
		bad "$name: exit $rc, said: $out"
	else
		ok
	fi
}

fails "mount of an empty database" 1 "holds no kvfs filesystem" "$KVFS_BIN" "$IMG" "$MNT"
expect "mkfs" "$MKFS_BIN" -q "$IMG"
fails "mkfs over it" 1 "use -f" "$MKFS_BIN" -q "$IMG"
mkdir -p "$T/src/sub"
head -c 300000 /dev/urandom > "$T/src/big"
echo small > "$T/src/sub/small"
ln -s big "$T/src/link"
# names of many lengths, more than a fetch of the server's rows: kvfs-dump
# tree keeps each while it walks on
mkdir "$T/src/many"
for i in $(seq 1 300); do : >"$T/src/many/n$i$(printf "%$((i % 50))s" | tr ' ' x)"; done
expect "mkfs -f -d" "$MKFS_BIN" -q -f -d "$T/src" "$IMG"
expect "export" "$DUMP_BIN" "$IMG" export "$T/out"
expect "the tree back" diff -r "$T/src" "$T/out"
tree_names() { "$DUMP_BIN" "$IMG" tree /many | tail -n +2 | awk '{print $NF}'; }
expect "kvfs-dump tree: every name, in order" diff <(tree_names) <(LC_ALL=C ls "$T/src/many")
fails "backup" 8 "pg_dump" "$DUMP_BIN" "$IMG" backup "$T/copy"
expect "tune -L" "$TUNE_BIN" -L first "$IMG"
expect "the label" sh -c "'$DUMP_BIN' '$IMG' summary | grep -q \"label: *'first'\""
expect "fsck" "$FSCK_BIN" -n "$IMG"

kvfs_mount
fails "mkfs -f while mounted" 1 "is mounted" "$MKFS_BIN" -q -f "$IMG"
fails "tune while mounted" 1 "is mounted" "$TUNE_BIN" -L second "$IMG"
expect "fsck -n while mounted" "$FSCK_BIN" -n "$IMG"
expect "the files through the mount" cmp "$T/src/big" "$MNT/big"
kvfs_umount
expect "tune once unmounted" "$TUNE_BIN" -L second "$IMG"

# no server there: a bounded wait, a message naming the image
dead="postgresql:///x?host=$T/nowhere&connect_timeout=2"
mkdir -p "$T/nowhere"
start=$(date +%s)
fails "mount with no server" 1 "nowhere" "$KVFS_BIN" "$dead" "$MNT"
fails "fsck with no server" 8 "nowhere" "$FSCK_BIN" -n "$dead"
expect "within a few seconds" [ $(($(date +%s) - start)) -le 10 ]
kvfs_results
