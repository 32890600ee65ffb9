#!/bin/bash
# cluster.sh - a throwaway PostgreSQL cluster for the tests: initdb in a
# temporary directory as an unprivileged user, listening on a Unix socket in
# that directory only (no TCP), trust authentication, fsync off.
#
#   cluster.sh start        start one; prints its directory, then its URL
#   cluster.sh stop DIR     stop it and remove DIR
#   cluster.sh pgctl DIR stop [fast|immediate] | start | promote
#                           stop DIR's server and keep its files (default
#                           fast: sessions are ended; immediate: as a crash),
#                           start it again on the same socket, or promote it
#                           (a standby) to a primary
#   cluster.sh standby DIR  a streaming standby of DIR's server in a new
#                           directory (pg_basebackup -R), started; prints its
#                           directory, then its URL; stop DIR removes it
#   cluster.sh run [-o] CMD...
#                           start one, run CMD with KVFS_TEST_PG_URL set to
#                           its URL and KVFS_TEST_PG_DIR to its directory,
#                           stop it; exit with CMD's status. With -o (the
#                           cluster optional) and no server binaries: run
#                           CMD without it
#
# Exits 77 (skipped) when the PostgreSQL server binaries are missing.
# Environment: PG_BIN (default: the newest /usr/lib/postgresql/*/bin).
set -euo pipefail

pg_bin() {
	if [ -n "${PG_BIN:-}" ]; then
		echo "$PG_BIN"
		return
	fi
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	echo "${d:-}"
}
BIN=$(pg_bin)
if [ -z "$BIN" ] || [ ! -x "$BIN/initdb" ] || [ ! -x "$BIN/pg_ctl" ]; then
	if [ "${1:-}" = run ] && [ "${2:-}" = -o ]; then
		shift 2
		unset KVFS_TEST_PG_URL
		exec "$@"
	fi
	echo "SKIP: PostgreSQL server binaries missing (postgresql-15)" >&2
	exit 77
fi

# The server refuses to run as root: as root, run it as kvfstest (the fs
# tests' second user, made here when missing).
as_owner() {
	if [ "$(id -u)" -ne 0 ]; then
		"$@"
		return
	fi
	setpriv --reuid=kvfstest --regid="$(id -g kvfstest)" --init-groups "$@"
}
owner() {
	[ "$(id -u)" -ne 0 ] && { id -un; return; }
	if ! id -u kvfstest >/dev/null 2>&1; then
		useradd -r -M -s /usr/sbin/nologin kvfstest 2>/dev/null ||
			{ echo "SKIP: no user kvfstest and useradd failed" >&2; exit 77; }
	fi
	echo kvfstest
}

# server_start DIR: start the server of DIR/data, its socket in DIR, and
# wait until it takes connections (a standby: read-only ones).
server_start() {
	local dir=$1 i
	as_owner "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 -s \
		-o "-c listen_addresses='' -c unix_socket_directories='$dir' -c fsync=off \
		-c full_page_writes=off -c max_connections=60 -c shared_buffers=32MB" start ||
		{ cat "$dir/server.log" >&2; return 1; }
	# pg_ctl -w waited for the socket; pg_isready says it takes connections.
	for i in $(seq 1 100); do
		"$BIN/pg_isready" -q -h "$dir" -U "$(owner)" -d postgres && return 0
		sleep 0.1
	done
	echo "the server of $dir takes no connections" >&2
	return 1
}

# new_dir: an empty directory for a cluster, the owner's. A short path: a
# Unix socket's name must fit 107 bytes.
new_dir() {
	local dir
	dir=$(mktemp -d /tmp/kvfs-pg.XXXXXX)
	chmod 755 "$dir"
	[ "$(id -u)" -ne 0 ] || chown "$(owner):" "$dir"
	echo "$dir"
}

start() {
	local user dir
	user=$(owner)
	dir=$(new_dir)
	if ! as_owner "$BIN/initdb" -D "$dir/data" -U "$user" --auth=trust --no-sync \
		--no-instructions -E UTF8 --locale=C >"$dir/initdb.log" 2>&1; then
		cat "$dir/initdb.log" >&2
		rm -rf "$dir"
		return 1
	fi
	server_start "$dir" || { rm -rf "$dir"; return 1; }
	echo "$dir"
	echo "postgresql:///postgres?host=$dir&user=$user"
}

# standby DIR: initdb's pg_hba.conf lets local replication connections in
# (trust), and PostgreSQL 15's defaults stream (wal_level replica, 10
# senders).
standby() {
	local primary=$1 user dir
	is_cluster "$primary" || return 1
	user=$(owner)
	dir=$(new_dir)
	if ! as_owner "$BIN/pg_basebackup" -D "$dir/data" -h "$primary" -U "$user" -R \
		-X stream -c fast --no-sync >"$dir/basebackup.log" 2>&1; then
		cat "$dir/basebackup.log" >&2
		rm -rf "$dir"
		return 1
	fi
	server_start "$dir" || { rm -rf "$dir"; return 1; }
	echo "$dir"
	echo "postgresql:///postgres?host=$dir&user=$user"
}

is_cluster() {
	case $1 in /tmp/kvfs-pg.*) [ -d "$1/data" ] && return 0;; esac
	echo "not a cluster directory: $1" >&2
	return 1
}

pgctl() {
	local dir=$1 what=${2:-}
	is_cluster "$dir" || return 1
	case $what in
	stop) as_owner "$BIN/pg_ctl" -D "$dir/data" -m "${3:-fast}" -w -t 30 -s stop ;;
	start) server_start "$dir" ;;
	promote) as_owner "$BIN/pg_ctl" -D "$dir/data" -w -t 30 -s promote ;;
	*) echo "usage: cluster.sh pgctl DIR stop [fast|immediate] | start | promote" >&2
	   return 2 ;;
	esac
}

stop() {
	local dir=$1
	case $dir in /tmp/kvfs-pg.*) ;; *) echo "not a cluster directory: $dir" >&2; return 1;; esac
	[ -d "$dir/data" ] && as_owner "$BIN/pg_ctl" -D "$dir/data" -m immediate -s stop \
		>/dev/null 2>&1 || true
	rm -rf "$dir"
}

case ${1:-} in
start)
	start
	;;
stop)
	stop "${2:?cluster.sh stop DIR}"
	;;
pgctl)
	pgctl "${2:?cluster.sh pgctl DIR ...}" "${@:3}"
	;;
standby)
	standby "${2:?cluster.sh standby DIR}"
	;;
run)
	shift
	[ "${1:-}" = -o ] && shift
	out=$(start)
	dir=$(sed -n 1p <<<"$out")
	trap 'stop "$dir"' EXIT
	trap 'exit 130' INT TERM
	rc=0
	KVFS_TEST_PG_URL=$(sed -n 2p <<<"$out") KVFS_TEST_PG_DIR=$dir "$@" || rc=$?
	exit $rc
	;;
*)
	echo "usage: cluster.sh start | stop DIR | pgctl DIR ... | standby DIR | run CMD..." >&2
	exit 2
	;;
esac
