#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The README and the guides say what the code does: every code block compiles, warnings as
# errors, against the build tree (its remora.pc and remora-c.pc), and every program runs.
#   readme.sh README.md BUILD_DIR [GUIDE.md...]
# README.md must have at least one C++ block, stay within 300 lines, and its links to files
# (docs/*.md and the rest) must resolve, #anchors included; a guide's links must resolve too.
# A ```cpp block is one of three kinds, said by an HTML comment on the line(s) just before it:
#   (none)                                   a whole program: compiled, linked and run (exit 0)
#   <!-- readme-test: given DECLARATIONS -->  a fragment: compiled (not linked) as the body of a
#                                             function, after DECLARATIONS at namespace scope
#                                             (`extern connection_request& req;` and the like)
#   <!-- readme-test: fragment -->           not compiled (say why in the text)
# A ```c block is a whole C11 program (compiled against remora-c, linked with -lpthread and run)
# unless marked as a fragment.
# Every C++ fragment sees <remora/remora.hpp>, the standard headers it names, `using namespace
# remora;` and std::chrono_literals. A fragment may leave variables unused (it shows one step),
# so -Wunused-variable/-parameter are off for fragments; everything else, [[nodiscard]]
# included, fails.
set -euo pipefail
readme=$1
build=$2
shift 2
guides=("$@")
CXX=${CXX:-g++}
CC=${CC:-cc}
max_lines=300
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PKG_CONFIG_PATH=$build
read -r -a pc_cflags <<<"$(pkg-config --cflags remora)"
read -r -a pc_libs <<<"$(pkg-config --libs remora)"
read -r -a pc_c_cflags <<<"$(pkg-config --cflags remora-c)"
read -r -a pc_c_libs <<<"$(pkg-config --libs remora-c)"
libdir=$(pkg-config --variable=libdir remora)
failed=0

# The GitHub anchor of each heading of a Markdown file, one a line.
anchors() {
    awk '/^```/ { code = !code; next } !code && /^#+ / { sub(/^#+ +/, ""); print }' "$1" |
        tr '[:upper:]' '[:lower:]' | sed -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'
}

# Every relative link of a Markdown file names a file that exists (and a heading there, for
# file#anchor and #anchor). Generated files (build/...) and web addresses are not checked.
check_links() {
    local md=$1 dir target file anchor
    dir=$(dirname "$md")
    while IFS= read -r target; do
        case "$target" in
            http://* | https://* | mailto:* | build/* | ../build/*) continue ;;
        esac
        file=${target%%#*}
        anchor=
        [ "$file" != "$target" ] && anchor=${target#*#}
        [ -n "$file" ] || file=$(basename "$md")
        if [ ! -e "$dir/$file" ]; then
            echo "readme: $md: the link ($target) names no file" >&2
            failed=$((failed + 1))
        elif [ -n "$anchor" ] && ! anchors "$dir/$file" | grep -qx -- "$anchor"; then
            echo "readme: $md: the link ($target) names no heading of $file" >&2
            failed=$((failed + 1))
        fi
    done < <(awk '/^```/ { code = !code; next } !code' "$md" | sed 's/`[^`]*`//g' |
        grep -oE '\]\([^)]*\)' | sed -e 's/^](//' -e 's/)$//' -e 's/ .*//')
}

lines=$(wc -l <"$readme")
if [ "$lines" -gt "$max_lines" ]; then
    echo "readme: $readme has $lines lines; keep it within $max_lines (move detail to docs/)" >&2
    failed=$((failed + 1))
fi
check_links "$readme"
for g in "${guides[@]}"; do
    check_links "$g"
done

# Splits a Markdown file into $work/block-N.cpp or .c (the code), block-N.kind and
# block-N.given, N counting on from $2; block-N.where is FILE:LINE of the opening fence.
split_blocks() {
    awk -v dir="$work" -v n="$2" -v md="$1" '
        function flush_comment() { kind = ckind; given = cgiven; ckind = "program"; cgiven = "" }
        function open_block(ext) {
            flush_comment(); n++; inblock = 1; f = dir "/block-" n "." ext
            printf "" > f
            print kind > (dir "/block-" n ".kind"); close(dir "/block-" n ".kind")
            printf "%s", given > (dir "/block-" n ".given"); close(dir "/block-" n ".given")
            print md ":" NR > (dir "/block-" n ".where"); close(dir "/block-" n ".where")
        }
        BEGIN { ckind = "program"; cgiven = ""; incomment = 0; inblock = 0 }
        inblock && /^```/ { inblock = 0; close(f); next }
        inblock { print > f; next }
        incomment {
            line = $0
            if (sub(/-->.*/, "", line)) { cgiven = cgiven line "\n"; incomment = 0 } else cgiven = cgiven line "\n"
            next
        }
        /^<!-- readme-test: fragment -->/ { ckind = "fragment"; cgiven = ""; next }
        /^<!-- readme-test: given/ {
            ckind = "given"; line = $0; sub(/^<!-- readme-test: given/, "", line)
            if (sub(/-->.*/, "", line)) cgiven = line "\n"; else { cgiven = line "\n"; incomment = 1 }
            next
        }
        /^```cpp/ { open_block("cpp"); next }
        /^```c *$/ { open_block("c"); next }
        /^```/ { flush_comment(); next }
        /^[[:space:]]*$/ { next }  # a blank line between the comment and the block keeps it
        { ckind = "program"; cgiven = "" }
        END { print n > (dir "/count") }
    ' "$1"
    cat "$work/count"
}

n=$(split_blocks "$readme" 0)
if ! ls "$work"/block-*.cpp >/dev/null 2>&1; then
    echo "readme: no C++ block found in $readme" >&2
    exit 1
fi
for g in "${guides[@]}"; do
    n=$(split_blocks "$g" "$n")
done

prelude='#include <remora/remora.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>
using namespace remora;
using namespace std::chrono_literals;'

# Runs a built program; a failure is reported with its output.
run() {
    if ! timeout 60 "$1" >"$1.out" 2>&1; then
        echo "readme: $2: the program failed (exit or timeout):" >&2
        cat "$1.out" >&2
        return 1
    fi
}

programs=0 fragments=0 skipped=0
for i in $(seq 1 "$n"); do
    b=$work/block-$i
    kind=$(cat "$b.kind")
    at=$(cat "$b.where")
    if [ "$kind" = fragment ]; then
        skipped=$((skipped + 1))
        continue
    fi
    if [ -e "$b.c" ]; then
        if ! "$CC" -std=c11 -pedantic -Wall -Wextra -Werror -x c "$b.c" "${pc_c_cflags[@]}" \
            "${pc_c_libs[@]}" -lpthread -Wl,-rpath,"$libdir" -o "$b.exe" 2>"$b.err"; then
            echo "readme: $at: the C program does not compile:" >&2
            cat "$b.err" >&2
            failed=$((failed + 1))
        elif run "$b.exe" "$at"; then
            programs=$((programs + 1))
        else
            failed=$((failed + 1))
        fi
        continue
    fi
    case "$kind" in
        program)
            if ! "$CXX" -x c++ "$b.cpp" -Wall -Wextra -Werror "${pc_cflags[@]}" "${pc_libs[@]}" \
                -Wl,-rpath,"$libdir" -o "$b.exe" 2>"$b.err"; then
                echo "readme: $at: the program does not compile:" >&2
                cat "$b.err" >&2
                failed=$((failed + 1))
            elif run "$b.exe" "$at"; then
                programs=$((programs + 1))
            else
                failed=$((failed + 1))
            fi
            ;;
        given)
            {
                echo "$prelude"
                cat "$b.given"
                echo "void readme_block() {"
                echo "#line 1 \"block at $at\""
                cat "$b.cpp"
                echo "}"
            } >"$b.tu.cpp"
            if ! "$CXX" -c "$b.tu.cpp" -Wall -Wextra -Werror -Wno-unused-variable \
                -Wno-unused-parameter -Wno-unused-but-set-variable "${pc_cflags[@]}" \
                -o "$b.o" 2>"$b.err"; then
                echo "readme: $at: the fragment does not compile:" >&2
                cat "$b.err" >&2
                failed=$((failed + 1))
                continue
            fi
            fragments=$((fragments + 1))
            ;;
    esac
done
echo "readme: $readme ($lines lines) and ${#guides[@]} guide(s): $n code blocks: $programs program(s) built and run, $fragments fragment(s) compiled, $skipped marked fragment (not compiled); $failed failure(s)"
[ "$failed" -eq 0 ]
