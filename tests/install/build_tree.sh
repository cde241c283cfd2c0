#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The build tree's remora.pc works before install: a consumer compiled and linked with
# `pkg-config --cflags --libs remora` from PKG_CONFIG_PATH=BUILD (headers from the source tree,
# the library from the build tree) builds and runs.
#   build_tree.sh BUILD_DIR
set -euo pipefail
build=$1
src=$(cd "$(dirname "$0")" && pwd)/consumer
CXX=${CXX:-g++}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PKG_CONFIG_PATH=$build
flags=$(pkg-config --cflags --libs remora)
case "$flags" in
    *"$build"*) ;;
    *) echo "build_tree: pkg-config flags do not point into the build tree $build: $flags" >&2; exit 1 ;;
esac
libdir=$(pkg-config --variable=libdir remora)
# shellcheck disable=SC2086  # the flags are words
"$CXX" "$src/main.cpp" $flags -Wl,-rpath,"$libdir" -o "$work/pc-consumer"
"$work/pc-consumer"
echo "build_tree: a consumer built with the build tree's remora.pc ran"
