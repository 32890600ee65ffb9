#!/bin/bash
# build.sh - libfuse 3.18 or later, with FUSE over io_uring, for kvfs to link
# statically: Debian's source package of fuse3 from the unstable suite,
# fetched through apt from the Debian mirror this machine's apt already uses,
# patched (the patches beside this script) and built with meson into
# DEST/prefix. Nothing is installed on the system; apt's own state is not
# touched (a private list under DEST/apt).
#
#   build.sh DEST       prints the prefix on its last line; exit 0 when
#                       DEST/prefix holds a usable build (made now or before)
#
# Exit 2 with a message when it cannot (no deb-src reachable, a version
# older than 3.18, a failed build): the caller falls back to the system's
# libfuse3-dev. Needs dpkg-dev, meson, ninja-build, liburing-dev, libnuma-dev.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
DEST=${1:?usage: build.sh DEST}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
PREFIX=$DEST/prefix
MIN=3.18

die() { echo "libfuse: $*" >&2; exit 2; }

# The stamp names the source version and a digest of the patches: a change
# of the patches builds again; a newer upload to unstable is taken when the
# build tree is made anew.
patches_digest() {
	cat "$HERE"/*.patch | sha256sum | cut -c1-16
}

# The mirror of the machine's Debian sources (deb822 or one-line form): the
# first URI that serves Debian's main archive.
debian_mirror() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk '$1 == "deb" && $0 !~ /security/ {
			for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' "$f"
	done
}

APT=$DEST/apt
apt_private() {
	local tool=apt-get
	[ "$1" = showsrc ] && tool=apt-cache
	"$tool" -q -o Dir::Etc::SourceList="$APT/sources.list" -o Dir::Etc::SourceParts=/nonexistent \
		-o Dir::State::Lists="$APT/lists" -o Dir::Cache="$APT/cache" \
		-o APT::Sandbox::User=root "$@"
}

fetch_source() {
	local mirror
	mirror=$(debian_mirror | head -1)
	[ -n "$mirror" ] || die "no Debian mirror in /etc/apt's sources"
	mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$DEST/src"
	echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror unstable main" \
		>"$APT/sources.list"
	apt_private update >"$APT/update.log" 2>&1 ||
		die "cannot read the unstable suite's sources from $mirror (see $APT/update.log)"
	VERSION=$(apt_private showsrc fuse3 2>/dev/null | sed -n 's/^Version: //p' | sort -V | tail -1)
	[ -n "$VERSION" ] || die "no fuse3 source package in the unstable suite"
	UPSTREAM=${VERSION%-*}
	if ! printf '%s\n%s\n' "$MIN" "$UPSTREAM" | sort -V -C; then
		die "the unstable suite has fuse3 $VERSION, older than $MIN"
	fi
}

if [ -f "$PREFIX/.stamp" ] && [ "$(cut -d' ' -f2 "$PREFIX/.stamp")" = "$(patches_digest)" ]; then
	echo "libfuse $(cut -d' ' -f1 "$PREFIX/.stamp") with io_uring, built before in $PREFIX"
	echo "$PREFIX"
	exit 0
fi
VERSION= UPSTREAM=
fetch_source

echo "libfuse: building Debian's fuse3 $VERSION with io_uring in $DEST"
rm -rf "$DEST/src" "$DEST/build" "$PREFIX"
mkdir -p "$DEST/src"
# apt checks the files against the suite's signed Sources index
(cd "$DEST/src" && apt_private source --download-only "fuse3=$VERSION" >"$APT/source.log" 2>&1) ||
	die "cannot download fuse3 $VERSION (see $APT/source.log)"
(cd "$DEST/src" && dpkg-source --no-check -x ./*.dsc tree >/dev/null) ||
	die "cannot unpack fuse3 $VERSION"
for p in "$HERE"/*.patch; do
	patch -s -d "$DEST/src/tree" -p1 <"$p" || die "$(basename "$p") does not apply to $VERSION"
done
meson setup "$DEST/build" "$DEST/src/tree" --prefix="$PREFIX" --libdir=lib \
	--default-library=static --buildtype=release -Denable-io-uring=true \
	-Dutils=false -Dtests=false -Dexamples=true -Duseroot=false -Dinitscriptdir= \
	>"$DEST/meson.log" 2>&1 || die "meson setup failed (see $DEST/meson.log)"
grep -q "enable-io-uring: true" "$DEST/meson.log" && grep -q "^Run-time dependency numa found: YES" "$DEST/meson.log" ||
	die "io_uring is off in this build: liburing-dev or libnuma-dev is missing (see $DEST/meson.log)"
ninja -C "$DEST/build" >"$DEST/ninja.log" 2>&1 && ninja -C "$DEST/build" install >>"$DEST/ninja.log" 2>&1 ||
	die "the build failed (see $DEST/ninja.log)"
# libfuse's examples (bench/ runs passthrough_ll over io_uring as a peer)
mkdir -p "$PREFIX/examples"
cp "$DEST/build/example/passthrough_ll" "$PREFIX/examples/"
echo "$VERSION $(patches_digest)" >"$PREFIX/.stamp"
echo "libfuse $UPSTREAM with io_uring, built in $PREFIX"
echo "$PREFIX"
