#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds remora as its users do, with warnings as errors (REMORA_WERROR): each build type given
# (default Release) with GCC and with Debian's clang 14, the library, examples and the remora
# command. The tests are built and run by scripts/test.sh (RelWithDebInfo and the sanitizer's
# Debug build); REMORA_MATRIX_TESTS=ON builds them here too. REMORA_MATRIX_COMPILERS chooses the
# compilers (default "g++ clang++-14"). Every source file is compiled on its own
# (REMORA_UNITY=OFF), so each one is checked to include what it needs.
#   scripts/build-matrix.sh [BUILD_TYPE...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(Release)
for type in "${types[@]}"; do
    for cxx in ${REMORA_MATRIX_COMPILERS:-g++ clang++-14}; do
        build=build-matrix/$type-$cxx
        cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="$type" -DCMAKE_CXX_COMPILER="$cxx" \
            -DREMORA_WERROR=ON -DREMORA_UNITY=OFF -DREMORA_TESTS="${REMORA_MATRIX_TESTS:-OFF}" \
            >/dev/null
        cmake --build "$build" -j "$(nproc)"
        echo "build-matrix: $type with $cxx built without warnings"
    done
done
