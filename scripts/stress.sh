#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The whole suite on a busy machine: ctest -j4 on 2 cores, RUNS times in a row (default 5), each
# beside a CPU hog (one busy process per core, at the same priority). Every run must be green and
# pass the skip check; the first red run stops it. Uses the release build of scripts/test.sh.
# Left out here (they run in scripts/test.sh, release and sanitizer): the two-host tests, whose
# faults are timed against the target's progress, the fault sweep (minutes of its own), and the
# same_host label's second runs of binaries this run has just run over their provider.
#   scripts/stress.sh [RUNS] [JOBS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
jobs=${2:-4}
bash scripts/install-deps.sh
build=build
cmake -S . -B "$build" -DREMORA_WERROR=ON -DREMORA_TESTS=ON >/dev/null
cmake --build "$build" -j "$(nproc)"
hogs=()
stop_hogs() { for h in "${hogs[@]}"; do kill "$h" 2>/dev/null || true; done; hogs=(); }
trap stop_hogs EXIT
for i in $(seq "$runs"); do
    for _ in $(seq "$(nproc)"); do
        bash -c 'while :; do :; done' &
        hogs+=($!)
    done
    log=$build/stress-$i.log
    start=$(date +%s)
    rc=0
    ctest --test-dir "$build" --output-on-failure --no-tests=error -j "$jobs" --timeout 300 \
        -E '^(twohost_test|providers/fault_sweep\.)' -LE same_host > "$log" 2>&1 || rc=$?
    stop_hogs
    took=$(( $(date +%s) - start ))
    grep -E "tests passed, [0-9]+ tests failed out of" "$log" || true
    if [ $rc -ne 0 ]; then
        echo "stress: run $i of $runs FAILED after ${took}s (ctest -j$jobs beside $(nproc) CPU hogs):"
        # What each failed test printed (its failures and their context), then the summary.
        grep -E -B3 -A12 '(Failure|Which is|Expected|FAILED +\]|Exception|Sanitizer)' "$log" |
            tail -n 80 || true
        sed -n '/tests failed out of/,$p' "$log"
        exit 1
    fi
    bash scripts/check-skips.sh "$log" > /dev/null || { bash scripts/check-skips.sh "$log"; exit 1; }
    echo "stress: run $i of $runs green in ${took}s (ctest -j$jobs beside $(nproc) CPU hogs)"
done
