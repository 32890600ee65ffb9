#!/bin/bash
# func_length.sh - no product function over MAX lines (90 unless -n says).
#
# usage: func_length.sh [-n MAX] [-a] [SRCDIR]
#
# Product code is every .c and .h below SRCDIR (default: the tree this script
# lives in) outside tests/, bench/, .git/, build*/ and any CMake build directory. A
# function is laid out as .clang-format (BreakBeforeBraces: Linux) makes it: its opening
# brace alone at column 0, its closing brace at column 0; its length is the
# lines from the one to the other, both counted. The name is the identifier
# before the first '(' of the declaration above the brace (a line at column 0
# and the indented lines continuing it); a brace at column 0 with no '(' above
# it (an initializer, a struct) is no function.
#
# Prints "file:line name length" for each function over MAX (line: where its
# name is) and exits 1 if there is any, 0 if none. -a prints every function
# with its length instead, for checking the counting by hand.
set -euo pipefail

max=90
all=0
while getopts an: opt; do
	case $opt in
	a) all=1 ;;
	n) max=$OPTARG ;;
	*) echo "usage: $0 [-n MAX] [-a] [SRCDIR]" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
src=${1:-$(cd "$(dirname "$0")/.." && pwd)}
[[ $max =~ ^[0-9]+$ ]] || { echo "func_length: bad limit '$max'" >&2; exit 2; }
[ -d "$src" ] || { echo "func_length: no directory '$src'" >&2; exit 2; }

exec python3 - "$src" "$max" "$all" <<'EOF'
import os, re, sys

src, limit, show_all = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
skip = {"tests", "bench", ".git"}
ident = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*$")

def sources():
    for root, dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        if "CMakeCache.txt" in files:  # a build tree inside the sources
            dirs[:] = []
            continue
        # build*/ at the top is .gitignore's: build trees, and sources
        # fetched into them that are not the project's (build-libfuse/)
        dirs[:] = sorted(d for d in dirs
                         if not (rel == "." and (d in skip or d.startswith("build")))
                         and d != "CMakeFiles")
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                yield os.path.join(root, f)

def declaration(lines, brace):
    """(line index, name) of the function whose body opens at lines[brace]"""
    i = brace - 1
    while i >= 0 and lines[i][:1] in (" ", "\t"):
        i -= 1  # a continuation line of the declaration
    if i < 0 or not lines[i].strip() or lines[i].startswith(("#", "/", "}")):
        return None
    decl = " ".join(l.strip() for l in lines[i:brace])
    paren = decl.find("(")
    if paren < 0 or "=" in decl[:paren] or decl.rstrip().endswith("="):
        return None
    m = ident.search(decl[:paren])
    return (i, m.group(1)) if m else None

over = 0
for path in sources():
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    rel = os.path.relpath(path, src)
    n = 0
    while n < len(lines):
        if not lines[n].startswith("{"):
            n += 1
            continue
        d = declaration(lines, n)
        end = n + 1
        while end < len(lines) and not lines[end].startswith(("}", "{")):
            end += 1
        if end == len(lines) or lines[end].startswith("{") or d is None:
            n = end
            continue
        length = end - n + 1
        if show_all:
            print(f"{rel}:{d[0] + 1} {d[1]} {length}")
        elif length > limit:
            print(f"{rel}:{d[0] + 1} {d[1]} {length}")
            over += 1
        n = end + 1
if over:
    print(f"func_length: {over} function(s) over {limit} lines", file=sys.stderr)
sys.exit(1 if over else 0)
EOF
