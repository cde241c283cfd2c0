#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The static library is position-independent: all of it links into a shared object.
#   tests/install/pic.sh LIBREMORA_A
set -euo pipefail
lib=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
${CXX:-c++} -shared -o "$work/libwhole.so" -Wl,--whole-archive "$lib" -Wl,--no-whole-archive \
    $(pkg-config --libs libfabric) -lpthread
echo "pic: $(basename "$lib") links whole into a shared object"
