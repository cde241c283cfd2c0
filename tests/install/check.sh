#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs remora from a build tree into a scratch prefix, then builds and runs a consumer
# through find_package(remora) (targets remora::remora, static, and remora::shared, from C++ and
# from C) and through pkg-config (remora.pc for C++, remora-c.pc for C).
set -euo pipefail
build=$1
src=$(cd "$(dirname "$0")" && pwd)/consumer
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/cmake" >/dev/null
"$work/cmake/consumer"
"$work/cmake/consumer_shared"
"$work/cmake/consumer_c"
# ldd's output first: `ldd | grep -q` fails at random under pipefail (grep -q stops reading, ldd
# gets SIGPIPE).
linked=$(ldd "$work/cmake/consumer_shared")
grep -q "libremora.so.0 => $work/prefix/" <<<"$linked" ||
    { echo "install: consumer_shared does not load the installed libremora.so.0" >&2; exit 1; }
pc_dir=$(dirname "$(find "$work/prefix" -name remora.pc)")
g++ -std=c++20 "$src/main.cpp" $(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs remora) \
    -o "$work/pc-consumer"
# -lremora picks libremora.so where both libraries are installed; the scratch prefix is not on
# the loader's path.
LD_LIBRARY_PATH="$(dirname "$pc_dir")" "$work/pc-consumer"
# The C API through remora-c.pc, with the strict C flags.
${CC:-cc} -std=c11 -pedantic -Werror -Wall -Wextra "$src/main.c" \
    $(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs remora-c) -o "$work/pc-c-consumer"
LD_LIBRARY_PATH="$(dirname "$pc_dir")" "$work/pc-c-consumer"
echo "install: find_package (static, shared, C) and pkg-config (remora, remora-c) consumers built and ran"
