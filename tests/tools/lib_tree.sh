# lib_tree.sh - shared by the tools tests: a source tree holding every kind of
# entry kvfs keeps, and the comparisons that say two trees are equal.
# Source it after setting T (a scratch directory).

passes=${passes:-0} fails=${fails:-0}
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
exit_is() { # expected code, command... (stdout in $T/out, stderr in $T/err)
	local want=$1 got
	shift
	"$@" >"$T/out" 2>"$T/err"
	got=$?
	[ "$got" -eq "$want" ] || { echo "  exit $got, wanted $want: $*"; head -c 2000 "$T/err"; return 1; }
}
summary() {
	echo "$passes passed, $fails failed"
	[ "$fails" -eq 0 ]
}

AS_ROOT=0
[ "$(id -u)" -eq 0 ] && AS_ROOT=1

# make_tree DIR: hard links (within and across directories), symlinks
# (relative, absolute, dangling, a long target), xattrs (binary, empty,
# on a directory; trusted.* on a symlink and a FIFO as root), POSIX ACLs
# where DIR's filesystem keeps them (then HAVE_ACL=1: named users and
# groups, an owning group's entry above the mask, a FIFO's, a directory's
# default ACL and what a file and a directory made in it take), a sparse file,
# a file of holes only, a file of written zeros, odd names (newline, tab,
# backslash, UTF-8, invalid UTF-8, 255 bytes), empty files and directories,
# a FIFO, device nodes (as root), several MB of data, many small files,
# set-ID and sticky modes, other owners (as root), fixed nanosecond times.
make_tree() {
	local d=$1 i
	mkdir -p "$d/dir/sub/deeper" "$d/empty dir" "$d/closed" "$d/many"
	printf 'hello\n' >"$d/dir/file"
	ln "$d/dir/file" "$d/hardlink"
	ln "$d/dir/file" "$d/dir/sub/hard2"
	ln -s file "$d/dir/rel-link"
	ln -s /nonexistent/target "$d/abs-link"
	ln -s "$(printf 't%.0s' {1..1000})" "$d/long-link"
	ln "$d/abs-link" "$d/symlink-hardlink"
	: >"$d/empty-file"
	mkfifo "$d/fifo"
	printf x >"$d/$(printf 'n%.0s' {1..255})"
	printf nl >"$d/new"$'\n'"line"
	printf tab >"$d/tab"$'\t'"here"
	printf bs >"$d/back\\slash"
	printf utf >"$d/ünïcødé-名前"
	printf raw >"$d/latin1-"$'\xe9\xff'
	head -c 6000000 /dev/urandom >"$d/dir/big"
	truncate -s 64M "$d/sparse"
	printf middle | dd of="$d/sparse" bs=1 seek=30000000 conv=notrunc status=none
	printf end >>"$d/sparse"
	truncate -s 10M "$d/all-hole"
	head -c 1000000 /dev/zero >"$d/zeros"
	printf 'tail' >>"$d/zeros"
	for i in $(seq 300); do printf '%s\n' "$i" >"$d/many/f$i"; done
	setfattr -n user.color -v blue "$d/dir/file"
	setfattr -n user.bin -v 0x00ff7f00 "$d/dir/big"
	setfattr -n user.empty "$d/empty-file"
	setfattr -n user.long -v "$(printf 'v%.0s' {1..1000})" "$d/empty-file"
	setfattr -n user.on-dir -v yes "$d/dir"
	HAVE_ACL=0
	mkdir "$d/acl-dir"
	chmod 644 "$d/many/f1" "$d/dir/big" # not the umask's
	chmod 755 "$d/acl-dir"
	if setfacl -m u:1234:rw,g:5678:r "$d/dir/big" 2>/dev/null; then
		HAVE_ACL=1
		setfacl -m g::rwx,u:42:rx,m::r "$d/many/f1"
		setfacl -m u:7:rwx "$d/fifo"
		setfacl -m u:99:rx "$d/acl-dir"
		setfacl -d -m u:1234:rwx,g:5678:rx,o::- "$d/acl-dir"
		printf inherits >"$d/acl-dir/file"
		mkdir "$d/acl-dir/sub"
	fi
	if [ "$AS_ROOT" = 1 ]; then
		mknod "$d/chardev" c 1 3
		mknod "$d/blockdev" b 7 42
		setfattr -h -n trusted.on-link -v yes "$d/dir/rel-link"
		setfattr -n trusted.on-fifo -v yes "$d/fifo"
		chown 1234:5678 "$d/empty-file"
		chown -h 42:43 "$d/abs-link"
		chown 7:8 "$d/dir/sub"
	fi
	chmod 4755 "$d/dir/file"
	chmod 2750 "$d/dir/sub"
	chmod 1777 "$d/empty dir"
	chmod 0 "$d/closed"
	chmod 600 "$d/zeros"
	touch -h -d '2001-02-03 04:05:06.123456789 UTC' "$d/dir/rel-link" "$d/dir/big" "$d/fifo"
	touch -d '1969-07-20 20:17:40.5 UTC' "$d/empty-file"
	# directories last, deepest first: adding entries moved their times
	find "$d" -depth -type d -exec touch -d '2010-10-10 10:10:10.101010101 UTC' {} +
}

# meta DIR: type, mode, owner, size (not of directories: theirs is the
# filesystem's own), mtime in ns, link target and link count of everything
# under DIR, one NUL-free line per entry (names escaped by printf %q).
meta() {
	(cd "$1" && find . -printf '%y %m %U %G %s %T@ %n\0%p\0%l\0' |
		while IFS= read -r -d '' a && IFS= read -r -d '' p && IFS= read -r -d '' l; do
			set -- $a
			[ "$1" = d ] && a="$1 $2 $3 $4 - $6 $7"
			printf '%s name=%q target=%q\n' "$a" "$p" "$l"
		done | LC_ALL=C sort)
}

# xattrs DIR: every extended attribute of everything under DIR (all
# namespaces getfattr shows), in name order.
xattrs() {
	(cd "$1" && find . -print0 | LC_ALL=C sort -z |
		xargs -0 getfattr -h -d -e hex -m - -- 2>/dev/null)
}

# acls DIR: getfacl of everything under DIR but symlinks (which have
# none), in name order, ids as numbers.
acls() {
	(cd "$1" && find . ! -type l -print0 | LC_ALL=C sort -z |
		xargs -0 getfacl -n -- 2>/dev/null)
}

# same_tree A B [what]: contents (diff -r, without following symlinks),
# metadata, xattrs (ACLs among them, as bytes) and ACLs (as getfacl shows
# them) equal.
same_tree() {
	local a=$1 b=$2 what=${3:-trees}
	meta "$a" >"$T/meta.a"
	meta "$b" >"$T/meta.b"
	check "$what: metadata equal" diff "$T/meta.a" "$T/meta.b"
	xattrs "$a" >"$T/xattr.a"
	xattrs "$b" >"$T/xattr.b"
	check "$what: xattrs equal" diff "$T/xattr.a" "$T/xattr.b"
	check "$what: xattrs compared" grep -q user.color "$T/xattr.b"
	acls "$a" >"$T/acl.a"
	acls "$b" >"$T/acl.b"
	check "$what: ACLs equal" diff "$T/acl.a" "$T/acl.b"
	check "$what: ACLs compared" grep -q "^other::" "$T/acl.b"
	# FIFOs and devices have no contents to compare (diff -r calls them
	# different); meta covers them
	check "$what: contents equal" diff -r --no-dereference -x fifo -x chardev -x blockdev \
		"$a" "$b"
}
