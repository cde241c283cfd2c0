#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every C++ block of README.md compiles, warnings as errors, against the build tree (its remora.pc).
#   readme.sh README.md BUILD_DIR
# A ```cpp block is one of three kinds, said by an HTML comment on the line(s) just before it:
#   (none)                                   a whole program: compiled, linked and run (exit 0)
#   <!-- readme-test: given DECLARATIONS -->  a fragment: compiled (not linked) as the body of a
#                                             function, after DECLARATIONS at namespace scope
#                                             (`extern connection_request& req;` and the like)
#   <!-- readme-test: fragment -->           not compiled (say why in the README's text)
# Every block sees <remora/remora.hpp>, the standard headers it names, `using namespace remora;`
# and std::chrono_literals. A fragment may leave variables unused (it shows one step), so
# -Wunused-variable/-parameter are off for fragments; everything else, [[nodiscard]] included, fails.
set -euo pipefail
readme=$1
build=$2
CXX=${CXX:-g++}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PKG_CONFIG_PATH=$build
read -r -a pc_cflags <<<"$(pkg-config --cflags remora)"
read -r -a pc_libs <<<"$(pkg-config --libs remora)"
libdir=$(pkg-config --variable=libdir remora)

# Splits the README into $work/block-N.cpp (the code), block-N.kind and block-N.given, N from 1;
# block-N.line is the README line of the opening fence.
awk -v dir="$work" '
    function flush_comment() { kind = ckind; given = cgiven; ckind = "program"; cgiven = "" }
    BEGIN { ckind = "program"; cgiven = ""; n = 0; incomment = 0; inblock = 0 }
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
    /^```cpp/ {
        flush_comment(); n++; inblock = 1; f = dir "/block-" n ".cpp"
        printf "" > f
        print kind > (dir "/block-" n ".kind"); close(dir "/block-" n ".kind")
        printf "%s", given > (dir "/block-" n ".given"); close(dir "/block-" n ".given")
        print NR > (dir "/block-" n ".line"); close(dir "/block-" n ".line")
        next
    }
    /^[[:space:]]*$/ { next }  # a blank line between the comment and the block keeps it
    { ckind = "program"; cgiven = "" }
' "$readme"

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

n=0 programs=0 fragments=0 skipped=0 failed=0
for f in "$work"/block-*.cpp; do
    n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "readme: no C++ block found in $readme" >&2; exit 1; }
for i in $(seq 1 "$n"); do
    b=$work/block-$i
    kind=$(cat "$b.kind")
    at="$readme:$(cat "$b.line")"
    case "$kind" in
        fragment)
            skipped=$((skipped + 1))
            continue
            ;;
        program)
            if ! "$CXX" -x c++ "$b.cpp" -Wall -Wextra -Werror "${pc_cflags[@]}" "${pc_libs[@]}" \
                -Wl,-rpath,"$libdir" -o "$b.exe" 2>"$b.err"; then
                echo "readme: $at: the program does not compile:" >&2
                cat "$b.err" >&2
                failed=$((failed + 1))
                continue
            fi
            if ! timeout 60 "$b.exe" >"$b.out" 2>&1; then
                echo "readme: $at: the program failed (exit or timeout):" >&2
                cat "$b.out" >&2
                failed=$((failed + 1))
                continue
            fi
            programs=$((programs + 1))
            ;;
        given)
            {
                echo "$prelude"
                cat "$b.given"
                echo "void readme_block() {"
                echo "#line 1 \"README block at line $(cat "$b.line")\""
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
echo "readme: $n C++ blocks: $programs program(s) built and run, $fragments fragment(s) compiled, $skipped marked fragment (not compiled), $failed failed"
[ "$failed" -eq 0 ]
