#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Sets up (Debian packages), builds and runs remora's whole test suite.
#   scripts/test.sh              release build (RelWithDebInfo), all tests, then the Debian
#                                packages (scripts/package.sh, tests/install/deb.sh)
#   scripts/test.sh --sanitize   the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   scripts/test.sh --tsan       ThreadSanitizer over the multi-threaded tests (scripts/tsan.sh)
# Fails when any test fails, when no test ran, and when a test is skipped on every provider it
# runs on (scripts/check-skips.sh): a skip counts as a pass in ctest, so it must not hide a test.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--tsan" ]; then
    exec bash scripts/tsan.sh
fi
bash scripts/install-deps.sh
# fio from Debian's source package (cached in build-fio/): the fio engine and its tests build
# against it (fio/CMakeLists.txt finds it there).
bash scripts/fio-build.sh >/dev/null
build=build
flags=()
select=()
if [ "${1:-}" = "--sanitize" ]; then
    build=build-asan
    flags=(-DREMORA_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
    # The same_host label runs binaries a second time over the same-host path; under the
    # sanitizers their own runs and the same-host tests cover that code (CI's time).
    select=(-LE same_host)
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi
# Tests on: a tree scripts/demo.sh configured has them off.
cmake -S . -B "$build" -DREMORA_WERROR=ON -DREMORA_TESTS=ON "${flags[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)"
log=$build/ctest.log
status=0
ctest --test-dir "$build" --output-on-failure --no-tests=error -j 2 --timeout 300 "${select[@]}" |
    tee "$log" ||
    status=$?
if [ "$status" -ne 0 ]; then
    # What the failed tests printed, again at the end where a truncated log still shows it: each
    # failed test's line and its output, up to the next test's start or end.
    echo "==== the failed tests' output ===="
    awk '/\*\*\*(Failed|Exception|Timeout)/ { on = 1; print; next }
         on && (/^ *Start +[0-9]+:/ || /^ *[0-9]+\/[0-9]+ Test +#/) { on = 0 }
         on { print }' "$log" | tail -n 400
    exit "$status"
fi
bash scripts/check-skips.sh "$log"
if [ -z "${flags[*]}" ]; then
    # The Debian packages: built and checked with lintian, then (as root) installed, used by
    # CMake and pkg-config consumers and purged (REMORA_DEB_REQUIRED=1 makes a skip fail).
    bash scripts/package.sh "$build"
    bash tests/install/deb.sh "$build/packages"
fi
