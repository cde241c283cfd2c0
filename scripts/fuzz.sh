#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the libFuzzer targets (tests/fuzz, REMORA_FUZZ=ON) with clang 14 under ASan + UBSan and
# runs each for a bounded time from its seed corpus (tests/fuzz/corpus/<target>/), printing the
# executions and coverage (cov: / ft: from libFuzzer's final stats) per target. Fails when a
# target crashes or breaks its contract; the input is saved in build-fuzz/artifacts/.
#   scripts/fuzz.sh [SECONDS]    seconds per target (default 30)
# New inputs found go to build-fuzz/corpus/<target>/, never into the repository's seeds.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
build=build-fuzz
bash scripts/install-deps.sh  # clang-14 and its sanitizer and libFuzzer runtimes (libclang-rt-14-dev)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DREMORA_FUZZ=ON -DREMORA_TESTS=OFF -DREMORA_EXAMPLES=OFF -DREMORA_TOOLS=OFF \
    -DREMORA_WERROR=ON "${launcher[@]}" >/dev/null
targets=()
for src in tests/fuzz/fuzz_*.cpp; do
    targets+=("$(basename "$src" .cpp)")
done
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$build/artifacts"
failed=()
for t in "${targets[@]}"; do
    seeds=tests/fuzz/corpus/$t
    [ -d "$seeds" ] || { echo "fuzz: $t has no seed corpus ($seeds)" >&2; exit 1; }
    work=$build/corpus/$t
    mkdir -p "$work"
    log=$build/$t.log
    if "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" "$work" "$seeds" \
        >"$log" 2>&1; then
        status=ok
    else
        status=FAILED
        failed+=("$t")
    fi
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$( (grep -Eo "cov: [0-9]+ ft: [0-9]+" "$log" || true) | tail -1)
    echo "fuzz: $t $status: ${execs:-?} executions in ${seconds} s, ${cov:-no coverage line}," \
        "corpus $(find "$work" -type f | wc -l) inputs"
    if [ "$status" = FAILED ]; then
        grep -E 'ERROR|contract broken|SUMMARY|Test unit written' "$log" | head -20 >&2 || true
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]} (logs in $build/<target>.log, inputs in $build/artifacts/)" >&2
    exit 1
fi
echo "fuzz: ${#targets[@]} targets ran ${seconds} s each without a crash"
