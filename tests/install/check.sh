#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs remora from a build tree into a scratch prefix, then builds and runs consumers through
# find_package(remora) (tests/install/consumers.sh: remora::remora and remora::shared, each from
# C++ and from C, and a C-only project) and through pkg-config (remora.pc for C++, remora-c.pc
# for C).
#   check.sh BUILD_DIR
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
src=$here/consumer
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
# The installed package has no build-tree path left in it.
if grep -rqF "$build" "$work/prefix/lib"*/cmake "$work/prefix/lib"*/pkgconfig; then
    echo "install: the installed CMake or pkg-config files name the build tree $build" >&2
    exit 1
fi
bash "$here/consumers.sh" install "$work" "$work/prefix/" -DCMAKE_PREFIX_PATH="$work/prefix"
pc_dir=$(dirname "$(find "$work/prefix" -name remora.pc)")
# shellcheck disable=SC2046  # the flags are words
g++ "$src/main.cpp" $(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs remora) \
    -o "$work/pc-consumer"
# -lremora picks libremora.so where both libraries are installed; the scratch prefix is not on
# the loader's path (an installed .pc file carries no run path: see docs/install.md).
LD_LIBRARY_PATH="$(dirname "$pc_dir")" "$work/pc-consumer"
# The C API through remora-c.pc, with the strict C flags.
# shellcheck disable=SC2046
${CC:-cc} -std=c11 -pedantic -Werror -Wall -Wextra "$src/main.c" \
    $(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs remora-c) -o "$work/pc-c-consumer"
LD_LIBRARY_PATH="$(dirname "$pc_dir")" "$work/pc-c-consumer"
echo "install: find_package (remora::remora and remora::shared, from C++ and C) and pkg-config (remora, remora-c) consumers built and ran"
