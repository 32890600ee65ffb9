#!/bin/bash
# test_completion.sh - the bash completion offers kvfs-dump's commands and
# databases, completes mount options (kvfs's, and kvfs-tune's defaults)
# inside a comma-separated list, the -O features of mkfs.kvfs and
# kvfs-tune, and kvfs-clone's two paths and no third.
COMP_FILE=$1
BC=/usr/share/bash-completion/bash_completion
[ -r "$BC" ] || { echo "SKIP: bash-completion not installed"; exit 77; }
# shellcheck disable=SC1090
source "$BC"
source "$COMP_FILE"
passes=0 fails=0
complete_line() { # function, words...
	local fn=$1; shift
	COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
	COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
	COMPREPLY=()
	"$fn"
	echo "${COMPREPLY[*]}"
}
expect() { # name, got, wanted
	if [ "$2" = "$3" ]; then passes=$((passes + 1)); else
		echo "FAIL: $1: got '$2', wanted '$3'"; fails=$((fails + 1)); fi
}
expect "dump commands" "$(complete_line _kvfs_dump kvfs-dump img '')" \
	"summary tree inode keys export backup"
expect "dump command prefix" "$(complete_line _kvfs_dump kvfs-dump img ex)" "export"
expect "dump databases" "$(complete_line _kvfs_dump kvfs-dump img keys d)" "dirent data"
expect "mount option in a list" "$(complete_line _kvfs kvfs img mnt -o ro,dura)" \
	"ro,durability=full ro,durability=fsync ro,durability=none"
expect "mount option" "$(complete_line _kvfs kvfs img mnt -o nocache)" \
	"nocachedir nocachesymlinks"
expect "export to standard output" "$(complete_line _kvfs_dump kvfs-dump img export -)" "-"
expect "fsck flags" "$(complete_line _fsck_kvfs fsck.kvfs --j)" "--json"
expect "tune defaults in a list" "$(complete_line _kvfs_tune kvfs-tune -o noatime,dura)" \
	"noatime,durability=full noatime,durability=fsync noatime,durability=none"
expect "tune uuid" "$(complete_line _kvfs_tune kvfs-tune -U r)" "random"
expect "tune flags" "$(complete_line _kvfs_tune kvfs-tune --l)" "--label --list"
expect "mkfs -O" "$(complete_line _mkfs_kvfs mkfs.kvfs -O '')" \
	"compress compress=zstd: nocompress"
expect "mkfs -O prefix" "$(complete_line _mkfs_kvfs mkfs.kvfs -O comp)" "compress compress=zstd:"
expect "mkfs --features" "$(complete_line _mkfs_kvfs mkfs.kvfs --feat)" "--features"
expect "tune -O" "$(complete_line _kvfs_tune kvfs-tune -O no)" "nocompress"
expect "tune defaults: compress" "$(complete_line _kvfs_tune kvfs-tune -o noatime,comp)" \
	"noatime,compress noatime,compress=zstd:"
expect "mount option: compress" "$(complete_line _kvfs kvfs img mnt -o nocomp)" "nocompress"
# readline completes only what follows the word's last = or : (word breaks)
expect "mkfs -O after =" "$(complete_line _mkfs_kvfs mkfs.kvfs -O compress=zs)" "zstd:"
expect "tune defaults after =" "$(complete_line _kvfs_tune kvfs-tune -o ro,durability=fs)" \
	"fsync"
expect "clone flags" "$(complete_line _kvfs_clone kvfs-clone --ver)" "--verbose --version"
T=$(mktemp -d)
mkdir "$T/tree"
expect "clone SRC" "$(cd "$T" && complete_line _kvfs_clone kvfs-clone tr)" "tree"
expect "clone DST" "$(cd "$T" && complete_line _kvfs_clone kvfs-clone -v tree tr)" "tree"
expect "clone: nothing past DST" \
	"$(cd "$T" && complete_line _kvfs_clone kvfs-clone tree copy tr)" ""
rm -rf "$T"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
