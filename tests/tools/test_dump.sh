#!/bin/bash
# test_dump.sh - kvfs-dump's views on a known image (summary, tree, inode,
# keys give the expected lines), its usage errors (exit 16, checked before
# IMAGE is opened), damage (reported, exit 8, the walk goes on, nothing
# written outside DEST) and garbage images (exit 8, never a crash); shared
# blocks (shown, exported as the files read, damage to them named), a
# version 1 image (read as it is, not upgraded), and compressed blocks
# (counted, shown with their frames, exported as the files read, borrowed
# ones too; a frame that does not decompress named).
#
# Arguments: MKFS DUMP FSCK_BREAK (the binaries under test).
set -u
MKFS=$1
DUMP=$2
BRK=$3
T=$(mktemp -d /tmp/kvfs-dump.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib_tree.sh"
PY=/usr/bin/python3 # with python3-lmdb, to damage images on purpose

# ---- the known image
# a.txt 10,000 bytes (blocks of 4072, 4072, 1856) with an xattr, linked as
# dir/hard; dir/link -> ../a.txt; a FIFO; a name with a newline. The walk
# takes names in byte order, so inodes are 1 /, 2 a.txt, 3 dir, 4 dir/link,
# 5 fifo, 6 new\nline.
K=$T/known
mkdir -p "$K/dir"
head -c 10000 /dev/zero | tr '\0' A >"$K/a.txt"
ln "$K/a.txt" "$K/dir/hard"
ln -s ../a.txt "$K/dir/link"
mkfifo "$K/fifo"
printf z >"$K/new"$'\n'"line"
setfattr -n user.k -v val "$K/a.txt"
chmod 640 "$K/a.txt"
chmod 750 "$K/dir"
touch -d '2001-02-03 04:05:06.123456789 UTC' "$K/a.txt"
touch -d '2010-10-10 10:10:10 UTC' "$K/dir" "$K"
U=$(id -u) G=$(id -g)
"$MKFS" -q -L known -d "$K" "$T/k.img" || { echo "FAIL: mkfs -d"; exit 1; }

check "summary" exit_is 0 "$DUMP" "$T/k.img" summary
cp "$T/out" "$T/summary"
has() { grep -qxF -- "$1" "$2" || { echo "  no line '$1' in:"; cat "$2"; return 1; }; }
check "summary: label" has "label:          'known'" "$T/summary"
check "summary: block size" has "block size:     4072" "$T/summary"
check "summary: format" has "format version: 2" "$T/summary"
check "summary: counter" has "inode counter:  7" "$T/summary"
check "summary: inodes" \
	has "inodes:         6 (dir 2, file 2, symlink 1, fifo 1, chr 0, blk 0, sock 0)" "$T/summary"
check "summary: dirents" has "dirents:        6 names in 6 keys" "$T/summary"
check "summary: blocks" has "data blocks:    4 (0 unwritten: fallocate's, read as zeros)" "$T/summary"
check "summary: xattrs" has "xattrs:         1" "$T/summary"
check "summary: no extents" has "extents:        0 (0 blocks borrowed)" "$T/summary"
check "summary: nothing lent" has "blocks lent:    0 (distinct home blocks; homes: 0)" "$T/summary"
check "summary: no deleted home" \
	has "deleted homes:  0 (keeping 0 blocks for their borrowers)" "$T/summary"
check "summary: nothing saved" has "sharing saves:  0 bytes (no file borrows blocks)" "$T/summary"
check "summary: orphans" has "orphans:        0" "$T/summary"
check "summary: stored" \
	has "data stored:    10018 bytes (9.8 KiB: file blocks 10001, inline 8, xattrs 9)" "$T/summary"
check "summary: amplification" grep -q "^amplification:  [0-9.]* (image size / data stored)$" \
	"$T/summary"
check "summary: uuid" grep -q "^uuid:           [0-9a-f]\{8\}-[0-9a-f]\{4\}-4" "$T/summary"

check "tree" exit_is 0 "$DUMP" "$T/k.img" tree
line() { printf '%10s %-7s %12s  %s\n' "$@"; }
{
	line 1 dir 4 "/"
	line 2 file 10000 "  a.txt [links 2]"
	line 3 dir 2 "  dir/"
	line 2 file 10000 "    hard [links 2]"
	line 4 symlink 8 "    link -> ../a.txt"
	line 5 fifo 0 "  fifo"
	line 6 file 1 '  new\nline'
} >"$T/tree.want"
check "tree: the expected lines" diff "$T/tree.want" "$T/out"
check "tree of a subdirectory" exit_is 0 "$DUMP" "$T/k.img" tree /dir
check "tree of a subdirectory: 3 lines" [ "$(wc -l <"$T/out")" -eq 3 ]
check "tree of a missing path: exit 8" exit_is 8 "$DUMP" "$T/k.img" tree /nosuch
check "tree of a missing path: named" grep -q "'/nosuch': No such file" "$T/err"

check "inode by path" exit_is 0 "$DUMP" "$T/k.img" inode /a.txt
cp "$T/out" "$T/inode"
check "inode by number gives the same" exit_is 0 "$DUMP" "$T/k.img" inode 2
check "inode by number gives the same lines" cmp -s "$T/out" "$T/inode"
for want in "inode:          2" "type:           file" "mode:           100640" \
	"uid:            $U" "gid:            $G" "nlink:          2" "size:           10000" \
	"nblocks:        3" "flags:          0" \
	"mtime:          2001-02-03 04:05:06.123456789 UTC (981173106.123456789)" \
	"name:           /a.txt (directory 1, slot 0)" \
	"name:           /dir/hard (directory 3, slot 0)" "names:          2" \
	"block:          0 length 4072 ok" "block:          1 length 4072 ok" \
	"block:          2 length 1856 ok" "blocks:         3 (0 bad)" \
	"extents:        0 (0 blocks borrowed)" "lends:          0 (0 blocks lent)" \
	'xattr:          user.k (3 bytes) "val"' "xattrs:         1"; do
	check "inode: '$want'" has "$want" "$T/inode"
done
check "inode of a symlink" exit_is 0 "$DUMP" "$T/k.img" inode /dir/link
check "inode of a symlink: target" has "target:         '../a.txt' (8 bytes)" "$T/out"
check "inode of a directory: its parent" exit_is 0 "$DUMP" "$T/k.img" inode /dir
check "inode of a directory: parent 1" has "parent:         1" "$T/out"
check "inode of an odd name: escaped" exit_is 0 "$DUMP" "$T/k.img" inode 6
check "inode of an odd name: escaped name" has 'name:           /new\nline (directory 1, slot 0)' "$T/out"
check "missing inode: exit 8" exit_is 8 "$DUMP" "$T/k.img" inode 99
check "missing inode: named" grep -q "inode 99: no such inode" "$T/err"

check "keys meta" exit_is 0 "$DUMP" "$T/k.img" keys meta
check "keys meta: the superblock" grep -q \
	"^super version 2 block_size 4072 compat 0 ro_compat 0 incompat 0 uuid .* next_ino 7 created [0-9]* label 'known' (136 bytes)$" \
	"$T/out"
check "keys inode" exit_is 0 "$DUMP" "$T/k.img" keys inode
check "keys inode: 6 records" [ "$(wc -l <"$T/out")" -eq 6 ]
check "keys inode: a.txt" grep -q \
	"^2 mode 100640 uid $U gid $G nlink 2 size 10000 rdev 0 flags 0 nblocks 3 atime [0-9]* mtime 981173106123456789 ctime [0-9]* btime [0-9]* parent 0 inline 0$" \
	"$T/out"
check "keys inode: the symlink" grep -q "^4 mode 120777 .* inline 8 '../a.txt'$" "$T/out"
check "keys dirent" exit_is 0 "$DUMP" "$T/k.img" keys dirent
check "keys dirent: 6 entries" [ "$(wc -l <"$T/out")" -eq 6 ]
check "keys dirent: a.txt" grep -q "^1 0x[0-9a-f]* slot 0 type 8 ino 2 name 'a.txt'$" "$T/out"
check "keys dirent: the link" grep -q "^3 0x[0-9a-f]* slot 0 type 8 ino 2 name 'hard'$" "$T/out"
check "keys dirent: escaped" grep -qF "ino 6 name 'new\\nline'" "$T/out"
check "keys data" exit_is 0 "$DUMP" "$T/k.img" keys data
printf '%s\n' "2 0 length 4072 ok" "2 1 length 4072 ok" "2 2 length 1856 ok" \
	"6 0 length 1 ok" >"$T/data.want"
check "keys data: the expected lines" diff "$T/data.want" "$T/out"
check "keys xattr" exit_is 0 "$DUMP" "$T/k.img" keys xattr
check "keys xattr: the line" has '2 user.k length 3 "val"' "$T/out"
check "keys xattr --hex" exit_is 0 "$DUMP" "$T/k.img" keys xattr --hex
check "keys xattr --hex: the record" has "0000000000000002757365722e6b 76616c" "$T/out"
check "keys orphan: none" exit_is 0 "$DUMP" "$T/k.img" keys orphan
check "keys orphan: empty" [ ! -s "$T/out" ]
for db in extent lend; do
	check "keys $db: none" exit_is 0 "$DUMP" "$T/k.img" keys "$db"
	check "keys $db: empty" [ ! -s "$T/out" ]
done

# ---- --help, --version, usage errors (IMAGE is garbage: arguments first)
head -c 65536 /dev/urandom >"$T/random.img"
check "--help" exit_is 0 "$DUMP" --help
check "--help lists the commands" [ "$(grep -cE '^  (summary|tree|inode|keys|export|backup) ' \
	"$T/out")" -eq 6 ]
check "--help lists the databases" \
	has "The databases keys reads: meta, inode, dirent, data, xattr, orphan, extent" "$T/out"
check "--help: lend among them" grep -q "^lend (the same records" "$T/out"
check "--version" exit_is 0 "$DUMP" --version
check "--version names the format" grep -q "image format 2" "$T/out"
for args in "" "$T/random.img" "--bogus $T/random.img summary" "$T/random.img nosuch" \
	"$T/random.img summary extra" "$T/random.img tree relative" "$T/random.img tree / /" \
	"$T/random.img inode" "$T/random.img inode abc" "$T/random.img inode 0" \
	"$T/random.img inode -1" "$T/random.img inode 1 2" "$T/random.img keys" \
	"$T/random.img keys nosuch" "$T/random.img keys inode --bogus" \
	"$T/random.img keys inode data" "$T/random.img export" "$T/random.img export a b" \
	"$T/random.img backup"; do
	check "usage error: exit 16 ($args)" exit_is 16 "$DUMP" $args
	check "usage error: a message ($args)" grep -q "^kvfs-dump: " "$T/err"
done
check "keys of no such database: the databases named" \
	exit_is 16 "$DUMP" "$T/random.img" keys nosuch
check "keys of no such database: extent and lend among them" \
	grep -q "no database 'nosuch' (meta, inode, dirent, data, xattr, orphan, extent, lend)" \
	"$T/err"
check "unknown option: named" exit_is 16 "$DUMP" --bogus "$T/random.img" summary
check "unknown option: named, by the program's name" \
	grep -q "^kvfs-dump: unknown option '--bogus'" "$T/err"

# ---- garbage images: exit 8 with a message, never a crash, nothing written
: >"$T/empty.img"
printf 'just some text\n%.0s' {1..1000} >"$T/text.img"
head -c $(($(stat -c %s "$T/k.img") / 2)) "$T/k.img" >"$T/truncated.img"
head -c 12288 "$T/k.img" >"$T/short.img"
printf 'VERSION=3\nformat=print\ntype=btree\nHEADER=END\n key\n value\nDATA=END\n' |
	mdb_load -n -f /dev/stdin "$T/foreign.img" 2>/dev/null
mkdir "$T/dir.img"
for img in random empty text truncated short foreign dir nosuch; do
	for cmd in summary tree "inode 1" "inode /" "keys inode" "keys meta --hex" \
		"export $T/x.$img" "export $T/x.$img.tar" "backup $T/b.$img"; do
		check "$img image, $cmd: exit 8" exit_is 8 "$DUMP" "$T/$img.img" $cmd
		check "$img image, $cmd: a message" grep -q "^kvfs-dump: .*$img.img" "$T/err"
	done
	check "$img image: nothing exported" [ ! -e "$T/x.$img" ] && [ ! -e "$T/x.$img.tar" ] &&
		[ ! -e "$T/b.$img" ]
done
check "foreign image: exit 8" exit_is 8 "$DUMP" "$T/foreign.img" summary
check "foreign image: named as such" grep -q "foreign.img' is not a kvfs image" "$T/err"

# a B-tree page smashed: LMDB trusts its pages and may crash reading it; the
# crash guard makes that exit 8 with a message (a sanitizer build reports
# the crash itself instead, so the check is for other builds)
if ! ldd "$DUMP" | grep -q libasan; then
	"$PY" - "$T/k.img" "$T/smashed.img" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
pg = data.find(b"user.k") // 4096            # the leaf of the xattr database
assert struct.unpack_from("<QHH", data, pg * 4096)[0] == pg
data[pg * 4096 + 16:(pg + 1) * 4096] = b"\xff" * (4096 - 16)
open(sys.argv[2], "wb").write(bytes(data))
PY
	for cmd in summary "keys xattr" "inode 2" "export $T/smashed.out"; do
		check "smashed page, $cmd: exit 8" exit_is 8 "$DUMP" "$T/smashed.img" $cmd
		check "smashed page, $cmd: a message" grep -q "smashed.img'" "$T/err"
	done
fi

# ---- damage: reported, the walk goes on, exit 8
cp "$T/k.img" "$T/bad.img"
"$PY" - "$T/bad.img" <<'PY' || echo "FAIL: could not damage the image"
import lmdb, struct, sys
env = lmdb.open(sys.argv[1], subdir=False, max_dbs=8, lock=False)
dbs = {n: env.open_db(n.encode()) for n in ("inode", "dirent", "data")}
key = lambda *v: b"".join(struct.pack(">Q", x) for x in v)
ent = lambda slot, typ, ino, name: bytes([slot, typ, len(name)]) + struct.pack("<Q", ino) + name
with env.begin(write=True) as t:
    blk = bytearray(t.get(key(2, 1), db=dbs["data"]))
    blk[100] ^= 0xFF                                 # a.txt block 1: checksum fails
    t.put(key(2, 1), bytes(blk), db=dbs["data"])
    d = dbs["dirent"]
    t.put(key(1, 0x111), ent(0, 8, 2, b"../escape"), db=d)    # a name with a slash
    t.put(key(1, 0x222), ent(0, 8, 99, b"ghost"), db=d)       # no inode 99
    t.put(key(3, 0x333), ent(0, 4, 1, b"loop"), db=d)         # dir/loop -> the root
    t.put(key(3, 0x444), b"\x00\x08", db=d)                   # a list cut short
    t.put(key(50), b"short", db=dbs["inode"])                 # a record cut short
env.close()
PY
check "damaged: tree exit 8" exit_is 8 "$DUMP" "$T/bad.img" tree
check "damaged: tree goes on" grep -q "fifo" "$T/out"
check "damaged: tree names the missing inode" grep -q "ghost.*inode 99" "$T/err"
check "damaged: tree reports the loop" grep -q "loop" "$T/err"
check "damaged: tree escapes the name" grep -qF "../escape" "$T/out"
check "damaged: summary exit 8" exit_is 8 "$DUMP" "$T/bad.img" summary
check "damaged: summary still prints" grep -q "^inodes:" "$T/out"
check "damaged: inode shows the bad block" exit_is 8 "$DUMP" "$T/bad.img" inode /a.txt
check "damaged: BAD block line" has "block:          1 length 4072 BAD" "$T/out"
check "damaged: blocks count" has "blocks:         3 (1 bad)" "$T/out"
check "damaged: keys data" exit_is 8 "$DUMP" "$T/bad.img" keys data
check "damaged: keys data BAD" has "2 1 length 4072 BAD" "$T/out"
check "damaged: keys dirent" exit_is 8 "$DUMP" "$T/bad.img" keys dirent
check "damaged: keys dirent bad hash" grep -q "name '../escape' BAD hash" "$T/out"
check "damaged: keys dirent malformed" grep -q "^0000000000000003.* malformed" "$T/out"
check "damaged: keys inode malformed" exit_is 8 "$DUMP" "$T/bad.img" keys inode
check "damaged: keys inode line" grep -q "^0000000000000032 malformed (value of 5 bytes)" "$T/out"
mkdir "$T/jail"
check "damaged: export exit 8" exit_is 8 "$DUMP" "$T/bad.img" export "$T/jail/out"
cp "$T/err" "$T/export.err"
check "damaged: nothing outside DEST" [ ! -e "$T/jail/escape" ] && [ ! -e "$T/escape" ]
check "damaged: the rest exported" [ -p "$T/jail/out/fifo" ] && [ -L "$T/jail/out/dir/link" ]
check "damaged: bad block exported as zeros" \
	[ "$(tr -d A <"$T/jail/out/a.txt" | wc -c)" -eq 4072 ]
check "damaged: the path is named" grep -Eq "'(a.txt|dir/hard)': block 1 fails its checksum" "$T/export.err"
check "damaged: the impossible name is named" grep -qF "an entry with an impossible name ('../escape')" \
	"$T/export.err"
check "damaged: the missing inode is named" grep -q "'ghost': inode 99: missing" "$T/export.err"
check "damaged: the loop is not followed" [ ! -e "$T/jail/out/dir/loop" ]
check "damaged: tar export exit 8" exit_is 8 "$DUMP" "$T/bad.img" export "$T/jail/out.tar"
check "damaged: tar has the rest" exit_is 0 tar tf "$T/jail/out.tar" ./fifo
check "damaged: tar has no escape" [ -z "$(tar tf "$T/jail/out.tar" | grep escape)" ]

# ---- POSIX ACLs: shown as the short text form; a damaged one quoted and
# reported, and left out of a tar export, as is one the kernel never sets
cp "$T/k.img" "$T/acl.img"
"$PY" - "$T/acl.img" <<'PY' || echo "FAIL: could not add ACLs to the image"
import lmdb, struct, sys
env = lmdb.open(sys.argv[1], subdir=False, max_dbs=8, lock=False)
x = env.open_db(b"xattr")
key = lambda ino, name: struct.pack(">Q", ino) + name
acl = lambda *e: struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *t) for t in e)
N = 0xFFFFFFFF
with env.begin(write=True) as t:
    t.put(key(2, b"system.posix_acl_access"),                  # a.txt: a valid one
          acl((1, 6, N), (2, 4, 1000), (4, 4, N), (8, 6, 50), (16, 6, N), (32, 0, N)), db=x)
    t.put(key(3, b"system.posix_acl_default"), acl((1, 7, N)), db=x)   # dir: damaged
    t.put(key(5, b"system.posix_acl_default"),                 # fifo: never set there
          acl((1, 6, N), (4, 4, N), (32, 4, N)), db=x)
env.close()
PY
check "ACL: inode" exit_is 0 "$DUMP" "$T/acl.img" inode /a.txt
check "ACL: inode shows it as text" has "xattr:          system.posix_acl_access (52 bytes) \
user::rw-,user:1000:r--,group::r--,group:50:rw-,mask::rw-,other::---" "$T/out"
check "ACL: keys (the damaged one too: exit 8)" exit_is 8 "$DUMP" "$T/acl.img" keys xattr
check "ACL: keys line" has "2 system.posix_acl_access length 52 \
user::rw-,user:1000:r--,group::r--,group:50:rw-,mask::rw-,other::---" "$T/out"
check "ACL: a damaged one: exit 8" exit_is 8 "$DUMP" "$T/acl.img" inode /dir
check "ACL: a damaged one: quoted" has \
	'xattr:          system.posix_acl_default (12 bytes) "\x02\x00\x00\x00\x01\x00\x07\x00\xff\xff\xff\xff" (damaged ACL)' \
	"$T/out"
check "ACL: a damaged one: reported" grep -q "inode 3: ACL 'system.posix_acl_default' is damaged" \
	"$T/err"
check "ACL: tar export with a damaged one: exit 8" exit_is 8 "$DUMP" "$T/acl.img" export "$T/acl.tar"
check "ACL: the damaged one left out, named" \
	grep -q "'dir': ACL 'system.posix_acl_default' is damaged; left out" "$T/err"
check "ACL: one on a FIFO left out, named" \
	grep -q "'fifo': ACL 'system.posix_acl_default' where the kernel never sets one; left out" "$T/err"
check "ACL: the valid one in the archive" \
	grep -qa "SCHILY.acl.access=user::rw-,group::r--,other::---,user:1000:r--,group:50:rw-,mask::rw-" \
	"$T/acl.tar"

# ---- an inode's records end where its key prefix ends: inode 0 (damage:
# numbers start at 1) named /fifo, its xattr, then a 7-byte key, which sorts
# right after inode 0's records (no xattr of inodes 1 to 255 is left between)
cp "$T/k.img" "$T/zero.img"
"$PY" - "$T/zero.img" <<'PY' || echo "FAIL: could not damage the image"
import lmdb, struct, sys
env = lmdb.open(sys.argv[1], subdir=False, max_dbs=8, lock=False)
dbs = {n: env.open_db(n.encode()) for n in ("inode", "dirent", "xattr")}
key = lambda *v: b"".join(struct.pack(">Q", x) for x in v)
with env.begin(write=True) as t:
    t.put(key(0), t.get(key(5), db=dbs["inode"]), db=dbs["inode"])   # the fifo, as inode 0
    for k, v in list(t.cursor(db=dbs["dirent"])):
        at = v.find(b"fifo")                 # entry: slot type namelen ino name
        if k[:8] == key(1) and at >= 11 and v[at - 9] == 4:
            v = bytearray(v); v[at - 8:at] = struct.pack("<Q", 0)    # /fifo names inode 0
            t.put(k, bytes(v), db=dbs["dirent"])
    t.delete(key(2) + b"user.k", db=dbs["xattr"])
    t.put(key(0) + b"user.z", b"zz", db=dbs["xattr"])
    t.put(key(0)[:6] + b"\x01", b"other", db=dbs["xattr"])
env.close()
PY
check "inode 0: shown" exit_is 0 "$DUMP" "$T/zero.img" inode /fifo
check "inode 0: its xattr" has 'xattr:          user.z (2 bytes) "zz"' "$T/out"
check "inode 0: no record of another inode" has "xattrs:         1" "$T/out"

# ---- shared blocks, as copy_file_range leaves them (kv/share.c): blocks 1-2
# of "new\nline" (inode 6, 1 byte in block 0) read as blocks 0-1 of a.txt
# (inode 2, all A); its size grows to 3 blocks. Records made by hand, so the
# views are checked against known values (test_dump_mounted.sh makes them
# through a mount)
cp "$T/k.img" "$T/share.img"
share_py() { # IMAGE: the share above; then python statements on t, dbs, key
	"$PY" - "$@" <<PY || echo "FAIL: could not edit $1"
import lmdb, struct, sys
env = lmdb.open(sys.argv[1], subdir=False, max_dbs=10, lock=False)
dbs = {n: env.open_db(n.encode(), create=False)
       for n in ("meta", "inode", "data", "extent", "lend")}
key = lambda *v: b"".join(struct.pack(">Q", x) for x in v)
le = lambda *v: b"".join(struct.pack("<Q", x) for x in v)
with env.begin(write=True) as t:
    if not t.get(key(6, 1), db=dbs["extent"]):
        sb = bytearray(t.get(b"super", db=dbs["meta"]))
        struct.pack_into("<Q", sb, 32, struct.unpack_from("<Q", sb, 32)[0] | 2)
        t.put(b"super", bytes(sb), db=dbs["meta"])
        for ino, flag, size, nblocks in ((2, 1, None, None), (6, 2, 3 * 4072, 3)):
            r = bytearray(t.get(key(ino), db=dbs["inode"]))
            struct.pack_into("<Q", r, 32, flag)
            if size:
                struct.pack_into("<Q", r, 16, size)
                struct.pack_into("<Q", r, 40, nblocks)
            t.put(key(ino), bytes(r), db=dbs["inode"])
        t.put(key(6, 1), le(2, 0, 2), db=dbs["extent"])
        t.put(key(2, 0, 6, 1), le(2), db=dbs["lend"])
$(cat)
env.close()
PY
}
share_py "$T/share.img" </dev/null
check "share: summary" exit_is 0 "$DUMP" "$T/share.img" summary
for want in "features:       compat 0, ro_compat 0, incompat 0x2 (shared blocks)" \
	"data blocks:    4 (0 unwritten: fallocate's, read as zeros)" \
	"extents:        1 (2 blocks borrowed)" \
	"blocks lent:    2 (distinct home blocks; homes: 1)" \
	"deleted homes:  0 (keeping 0 blocks for their borrowers)" \
	"sharing saves:  8144 bytes (8.0 KiB: 2 borrowed blocks of 4072, stored once)" \
	"data stored:    10018 bytes (9.8 KiB: file blocks 10001, inline 8, xattrs 9)"; do
	check "share: summary '$want'" has "$want" "$T/out"
done
ratios="(image size / data stored; [0-9.]* / data stored + sharing saves)"
check "share: amplification, both ratios" grep -q "^amplification:  [0-9.]* $ratios$" "$T/out"
check "share: keys extent" exit_is 0 "$DUMP" "$T/share.img" keys extent
check "share: keys extent, the record" diff - "$T/out" <<<"6 1 home 2 0 count 2"
check "share: keys lend" exit_is 0 "$DUMP" "$T/share.img" keys lend
check "share: keys lend, the record" diff - "$T/out" <<<"2 0 borrower 6 1 count 2"
check "share: keys extent --hex" exit_is 0 "$DUMP" "$T/share.img" keys extent --hex
check "share: keys extent --hex, the record" diff - "$T/out" \
	<<<"00000000000000060000000000000001 020000000000000000000000000000000200000000000000"
check "share: keys lend --hex" exit_is 0 "$DUMP" "$T/share.img" keys lend -x
check "share: keys lend --hex, the record" diff - "$T/out" \
	<<<"0000000000000002000000000000000000000000000000060000000000000001 0200000000000000"
check "share: keys inode" exit_is 0 "$DUMP" "$T/share.img" keys inode
check "share: keys inode, the borrower's flags" \
	grep -q "^6 mode 100[0-7]* .* size 12216 rdev 0 flags 0x2 nblocks 3 " "$T/out"
check "share: keys inode, the home's flags" \
	grep -q "^2 mode 100640 .* flags 0x1 nblocks 3 " "$T/out"
check "share: inode of the borrower" exit_is 0 "$DUMP" "$T/share.img" inode 6
for want in "flags:          0x2 (borrows)" "nblocks:        3" "blocks:         1 (0 bad)" \
	"extent:         blocks 1-2 from inode 2 blocks 0-1" \
	"extents:        1 (2 blocks borrowed)" \
	"lends:          0 (0 blocks lent)"; do
	check "share: borrower '$want'" has "$want" "$T/out"
done
check "share: inode of the home" exit_is 0 "$DUMP" "$T/share.img" inode /dir/hard
for want in "flags:          0x1 (lends)" "extents:        0 (0 blocks borrowed)" \
	"lent:           blocks 0-1 to inode 6 (its blocks 1-2)" \
	"lends:          1 (2 blocks lent)"; do
	check "share: home '$want'" has "$want" "$T/out"
done
# what a mount reads: the byte of its own, zeros to the block's end, then
# a.txt's first two blocks
{ printf z; head -c 4071 /dev/zero; head -c 8144 "$K/a.txt"; } >"$T/share.want"
check "share: export" exit_is 0 "$DUMP" "$T/share.img" export "$T/share.d"
check "share: the borrowed blocks exported" cmp "$T/share.want" "$T/share.d/new"$'\n'"line"
check "share: the home exported whole" cmp "$K/a.txt" "$T/share.d/a.txt"
check "share: tar export" exit_is 0 "$DUMP" "$T/share.img" export "$T/share.tar"
mkdir "$T/share.t"
check "share: tar extracts" tar -C "$T/share.t" -xf "$T/share.tar"
check "share: the borrowed blocks in the archive" cmp "$T/share.want" "$T/share.t/new"$'\n'"line"
check "share: the home in the archive" cmp "$K/a.txt" "$T/share.t/a.txt"

# damage: a home block gone (read as zeros, named), an extent record cut
# short (shown as malformed), a lend record without its extent (shown)
cp "$T/k.img" "$T/share-bad.img"
share_py "$T/share-bad.img" <<'PY'
    t.delete(key(2, 1), db=dbs["data"])
    t.put(key(6, 9), b"short", db=dbs["extent"])
    t.put(key(2, 5, 9, 0), le(1), db=dbs["lend"])
PY
check "share damage: keys extent exit 8" exit_is 8 "$DUMP" "$T/share-bad.img" keys extent
check "share damage: the malformed record" \
	has "00000000000000060000000000000009 malformed (value of 5 bytes)" "$T/out"
check "share damage: the good one" has "6 1 home 2 0 count 2" "$T/out"
check "share damage: keys lend" exit_is 0 "$DUMP" "$T/share-bad.img" keys lend
check "share damage: keys lend, both" [ "$(wc -l <"$T/out")" -eq 2 ]
check "share damage: inode exit 8" exit_is 8 "$DUMP" "$T/share-bad.img" inode 6
check "share damage: inode shows it" has "extent:         malformed" "$T/out"
check "share damage: inode counts the good one" has "extents:        1 (2 blocks borrowed)" "$T/out"
check "share damage: summary exit 8" exit_is 8 "$DUMP" "$T/share-bad.img" summary
check "share damage: summary names it" grep -q "malformed extent record" "$T/err"
check "share damage: export exit 8" exit_is 8 "$DUMP" "$T/share-bad.img" export "$T/share-bad.d"
check "share damage: the missing home block named" grep -qF \
	"'new\nline': block 2: its home, inode 2 block 1, is missing; exported as zeros" "$T/err"
check "share damage: the malformed extent named" grep -qF \
	"'new\nline': a malformed extent record; its blocks exported as zeros" "$T/err"
{ printf z; head -c 4071 /dev/zero; head -c 4072 "$K/a.txt"; head -c 4072 /dev/zero; } \
	>"$T/share.want"
check "share damage: the rest exported" cmp "$T/share.want" "$T/share-bad.d/new"$'\n'"line"

# ---- a version 1 image (before shared blocks: no extent and lend
# databases): every command reads it, read-only, and leaves it version 1
cp "$T/k.img" "$T/v1.img"
"$PY" - "$T/v1.img" <<'PY' || echo "FAIL: could not make a version 1 image"
import lmdb, struct, sys
env = lmdb.open(sys.argv[1], subdir=False, max_dbs=10, lock=False)
meta = env.open_db(b"meta", create=False)
with env.begin(write=True) as t:
    for name in (b"extent", b"lend"):
        t.drop(env.open_db(name, txn=t, create=False), delete=True)
    sb = bytearray(t.get(b"super", db=meta))
    struct.pack_into("<I", sb, 8, 1)                 # the format version
    t.put(b"super", bytes(sb), db=meta)
with env.begin() as t:
    assert t.get(b"extent") is None and t.get(b"lend") is None
env.close()
PY
cp "$T/v1.img" "$T/v1.orig"
check "version 1: summary" exit_is 0 "$DUMP" "$T/v1.img" summary
check "version 1: summary says so" has "format version: 1" "$T/out"
check "version 1: no extents" has "extents:        0 (0 blocks borrowed)" "$T/out"
check "version 1: the rest counted" \
	has "data blocks:    4 (0 unwritten: fallocate's, read as zeros)" "$T/out"
check "version 1: keys meta" exit_is 0 "$DUMP" "$T/v1.img" keys meta
check "version 1: keys meta, the superblock" grep -q "^super version 1 block_size 4072 " "$T/out"
for db in extent lend; do
	check "version 1: keys $db" exit_is 0 "$DUMP" "$T/v1.img" keys "$db"
	check "version 1: keys $db, none" [ ! -s "$T/out" ]
	check "version 1: keys $db --hex" exit_is 0 "$DUMP" "$T/v1.img" keys "$db" --hex
	check "version 1: keys $db --hex, none" [ ! -s "$T/out" ]
done
check "version 1: tree" exit_is 0 "$DUMP" "$T/v1.img" tree
check "version 1: tree, the expected lines" diff "$T/tree.want" "$T/out"
check "version 1: inode" exit_is 0 "$DUMP" "$T/v1.img" inode /a.txt
check "version 1: inode, its blocks" has "blocks:         3 (0 bad)" "$T/out"
check "version 1: inode, no extents" has "extents:        0 (0 blocks borrowed)" "$T/out"
check "version 1: export" exit_is 0 "$DUMP" "$T/v1.img" export "$T/v1.d"
check "version 1: export, the file" cmp "$K/a.txt" "$T/v1.d/a.txt"
check "version 1: tar export" exit_is 0 "$DUMP" "$T/v1.img" export "$T/v1.tar"
check "version 1: tar export, the file" cmp "$K/a.txt" <(tar -xOf "$T/v1.tar" ./a.txt)
check "version 1: backup" exit_is 0 "$DUMP" "$T/v1.img" backup "$T/v1.backup"
check "version 1: the backup is version 1 too" exit_is 0 "$DUMP" "$T/v1.backup" summary
check "version 1: the backup says so" has "format version: 1" "$T/out"

# ---- a backup and a tar export carry every file's contents (root's 0600
# ones too): made 0600 whatever the umask, so only their owner reads them
others=
[ "$(id -u)" -eq 0 ] && command -v runuser >/dev/null && others=1
for mask in 022 000 077; do
	rm -f "$T/mask.backup" "$T/mask.tar"
	check "umask $mask: backup" exit_is 0 sh -c "umask $mask && '$DUMP' '$T/k.img' backup '$T/mask.backup'"
	check "umask $mask: the backup is 0600" [ "$(stat -c %a "$T/mask.backup")" = 600 ]
	check "umask $mask: tar export" exit_is 0 sh -c "umask $mask && '$DUMP' '$T/k.img' export '$T/mask.tar'"
	check "umask $mask: the archive is 0600" [ "$(stat -c %a "$T/mask.tar")" = 600 ]
	[ -n "$others" ] || continue
	chmod 711 "$T" # nobody may reach the files, and only the files decide
	check "umask $mask: another user cannot read the backup" \
		exit_is 1 runuser -u nobody -- head -c 1 "$T/mask.backup"
	check "umask $mask: another user cannot read the archive" \
		exit_is 1 runuser -u nobody -- head -c 1 "$T/mask.tar"
	chmod 700 "$T"
done
check "version 1: the image not upgraded (unchanged)" cmp "$T/v1.orig" "$T/v1.img"

# ---- compressed blocks: the known tree made with -O compress (blocks of
# 4072 kept): a.txt's three blocks of A are compressed, the 1-byte file's
# block is not (no room saved). The figures: data counts a compressed
# block's data, "as stored" its frame.
"$MKFS" -q -O compress -b 4072 -L known -d "$K" "$T/z.img" ||
	{ echo "FAIL: mkfs -O compress"; exit 1; }
check "compressed: summary" exit_is 0 "$DUMP" "$T/z.img" summary
cp "$T/out" "$T/zsummary"
stored="data stored:    10018 bytes (9.8 KiB: file blocks 10001, inline 8, xattrs 9;"
for want in "features:       compat 0, ro_compat 0, incompat 0x4 (compressed blocks)" \
	"mount defaults: compress=zstd:3" \
	"data blocks:    4 (0 unwritten: fallocate's, read as zeros)" \
	"$stored a compressed block counts the data it holds)"; do
	check "compressed: summary '$want'" has "$want" "$T/zsummary"
done
zline='^compressed:     3 blocks: 10000 bytes of data (9.8 KiB) in frames of \([0-9]*\) '
frames=$(sed -n "s/$zline(.*), ratio \([0-9.]*\)\$/\1 \2/p" "$T/zsummary")
read -r zf ratio <<<"$frames"
check "compressed: 3 blocks, 10000 bytes of data in frames of ${zf:-?}" [ -n "$zf" ] &&
	[ "$zf" -gt 0 ] && [ "$zf" -lt 1000 ]
check "compressed: the ratio, data / frames ($ratio)" \
	[ "$ratio" = "$(awk -v f="${zf:-1}" 'BEGIN { printf "%.2f", 10000 / f }')" ]
check "compressed: as stored, frames instead of data" \
	grep -q "^as stored:      $((18 + ${zf:-0})) bytes (" "$T/zsummary"
check "compressed: both ratios" grep -q \
	"^amplification:  [0-9.]* (image size / data stored; [0-9.]* / as stored)$" "$T/zsummary"
check "compressed: the summary of a plain image says none" \
	has "compressed:     0 blocks" "$T/summary"
check "compressed: keys data" exit_is 0 "$DUMP" "$T/z.img" keys data
check "compressed: keys data, data and frame lengths" \
	grep -Eq "^2 0 length 4072 ok compressed [0-9]+$" "$T/out"
check "compressed: keys data, the short block plain" grep -qx "6 0 length 1 ok" "$T/out"
check "compressed: inode" exit_is 0 "$DUMP" "$T/z.img" inode /a.txt
check "compressed: inode, each block" \
	[ "$(grep -Ec "^block:          [0-2] length (4072|1856) ok, compressed [0-9]+ bytes$" \
	"$T/out")" -eq 3 ]
check "compressed: inode, all good" has "blocks:         3 (0 bad)" "$T/out"
check "compressed: export" exit_is 0 "$DUMP" "$T/z.img" export "$T/z.d"
check "compressed: export is byte-identical" diff -r --no-dereference -x fifo "$K" "$T/z.d"
check "compressed: tar export" exit_is 0 "$DUMP" "$T/z.img" export "$T/z.tar"
mkdir "$T/z.t"
check "compressed: tar extracts" tar -C "$T/z.t" -xf "$T/z.tar"
check "compressed: tar export is byte-identical" diff -r --no-dereference -x fifo "$K" "$T/z.t"
# blocks borrowed from a compressed home, as the share above
cp "$T/z.img" "$T/zshare.img"
share_py "$T/zshare.img" </dev/null
check "compressed share: features" exit_is 0 "$DUMP" "$T/zshare.img" summary
check "compressed share: both bits named" has \
	"features:       compat 0, ro_compat 0, incompat 0x6 (shared blocks, compressed blocks)" \
	"$T/out"
{ printf z; head -c 4071 /dev/zero; head -c 8144 "$K/a.txt"; } >"$T/share.want"
check "compressed share: export" exit_is 0 "$DUMP" "$T/zshare.img" export "$T/zshare.d"
check "compressed share: the borrowed blocks unpacked" \
	cmp "$T/share.want" "$T/zshare.d/new"$'\n'"line"
check "compressed share: tar export" exit_is 0 "$DUMP" "$T/zshare.img" export "$T/zshare.tar"
check "compressed share: ... the borrowed blocks unpacked" \
	cmp "$T/share.want" <(tar -xOf "$T/zshare.tar" ./new$'\n'line)
# a frame cut short under a valid checksum: it verifies, does not decompress
cp "$T/z.img" "$T/zbad.img"
check "compressed damage: zcut" "$BRK" "$T/zbad.img" zcut /a.txt 1
check "compressed damage: inode exit 8" exit_is 8 "$DUMP" "$T/zbad.img" inode /a.txt
check "compressed damage: the BAD block" has "block:          1 length 4072 BAD" "$T/out"
check "compressed damage: named" \
	grep -q "inode 2 block 1: its compressed bytes do not decompress" "$T/err"
check "compressed damage: keys data exit 8" exit_is 8 "$DUMP" "$T/zbad.img" keys data
check "compressed damage: keys data BAD" has "2 1 length 4072 BAD" "$T/out"
check "compressed damage: export exit 8" exit_is 8 "$DUMP" "$T/zbad.img" export "$T/zbad.d"
check "compressed damage: export names it" \
	grep -Eq "'(a.txt|dir/hard)': block 1 does not decompress; exported as zeros" "$T/err"
{ head -c 4072 "$K/a.txt"; head -c 4072 /dev/zero; head -c 1856 "$K/a.txt"; } >"$T/zbad.want"
check "compressed damage: the rest exported" cmp "$T/zbad.want" "$T/zbad.d/a.txt"
share_py "$T/zbad.img" </dev/null
check "compressed damage: a borrower's export" exit_is 8 "$DUMP" "$T/zbad.img" export "$T/zbad2.d"
check "compressed damage: ... names the home block" grep -qF \
	"'new\nline': block 2: its home, inode 2 block 1, does not decompress; exported as zeros" \
	"$T/err"

summary
