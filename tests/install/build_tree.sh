#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The build tree works as a package before install:
# - find_package(remora) with -Dremora_DIR=BUILD (BUILD/remora-config.cmake and the targets
#   exported into BUILD/remora-targets.cmake): remora::remora and remora::shared, each from C++
#   and from C, and a C-only project (tests/install/consumers.sh);
# - pkg-config with PKG_CONFIG_PATH=BUILD (headers from the source tree, the libraries from the
#   build tree): a C++ consumer (remora.pc) and a C one (remora-c.pc) build and run as they are,
#   with no LD_LIBRARY_PATH: the build tree's .pc files put the build tree on the run path.
#   build_tree.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
src=$here/consumer
CXX=${CXX:-g++}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$here/consumers.sh" "build tree" "$work" "$build/" -Dremora_DIR="$build"
export PKG_CONFIG_PATH=$build
flags=$(pkg-config --cflags --libs remora)
case "$flags" in
    *"$build"*) ;;
    *) echo "build_tree: pkg-config flags do not point into the build tree $build: $flags" >&2; exit 1 ;;
esac
unset LD_LIBRARY_PATH
# shellcheck disable=SC2086  # the flags are words
"$CXX" "$src/main.cpp" $flags -o "$work/pc-consumer"
"$work/pc-consumer"
# shellcheck disable=SC2046
${CC:-cc} -std=c11 -pedantic -Werror -Wall -Wextra "$src/main.c" \
    $(pkg-config --cflags --libs remora-c) -o "$work/pc-c-consumer"
"$work/pc-c-consumer"
echo "build_tree: find_package (remora::remora and remora::shared, from C++ and C) and pkg-config (remora, remora-c) consumers built and ran"
