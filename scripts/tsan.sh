#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ThreadSanitizer over the tests of remora's multi-threaded paths (scripts/test.sh --tsan): a
# build with REMORA_TSAN=ON (build-tsan), then each test binary below in turn under a time
# limit. Any TSan report fails the run (halt_on_error, exit code 66); the only suppressions are
# inside libfabric (tests/tsan-libfabric.supp, each with its reason).
#   scripts/tsan.sh [BINARY...]     default: the subset below
# The subset covers the progress thread, shared CQs, receive pools, the slot pool's timer,
# channels, callbacks and the stress tests. Left out, each for a named reason:
#   peer_death_test   forks; it asserts the process has one thread before fork, and TSan's own
#                     background thread makes that two (and TSan does not support fork well).
#   progress_policy_test  measures a thread's CPU time and scheduler state against fixed budgets;
#                     TSan's 5-15x slow-down breaks the budgets, not the code.
#   durability_test, fabric_fault_test, bad_input_test, units_test, remote_region_test,
#   service_wire_test, serve_hello_test  single-threaded or child-process tests: nothing for TSan.
# and single tests (BINARY:-FILTER, a gtest negative filter), each for a named reason:
#   shared_cq_test destroying_a_connection_drops_only_its_completions  the test polls the
#                     receive buffer the provider writes into (landing is detected without reading
#                     the CQ, by design): a race in the test's method, not in remora.
#   service_messages_test killed_peer_process  forks a peer process (as peer_death_test).
#   replica_set_test rdm:shm  shm copies through its peers' shared memory from two progress
#                    threads of one process without a lock TSan sees (inside libfabric.so).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build=build-tsan
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
subset=(channels_test ops_test slot_pool_test slots_test
        "shared_cq_test:-*destroying_a_connection_drops_only_its_completions*"
        shared_cq_lifecycle_test delivery_test
        signalling_test signalling_pools_test stress_test accounting_test
        next_test api_test
        domain_close_test persistence_test overload_test budget_test bounce_test
        op_pool_test park_gate_test multi_key_test
        "service_messages_test:-*killed_peer_process*" liveness_test
        "replica_set_test:-*rdm_shm*")
[ $# -gt 0 ] && subset=("$@")
binaries=()
for entry in "${subset[@]}"; do
    binaries+=("${entry%%:*}")
done
cmake -S . -B "$build" -DREMORA_TSAN=ON -DREMORA_WERROR=ON -DREMORA_EXAMPLES=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${binaries[@]}"
supp=$PWD/tests/tsan-libfabric.supp
export TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:history_size=4:suppressions=$supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
limit=${REMORA_TSAN_TIMEOUT:-600}  # seconds per binary (multi_key_test takes about 170)
start=$(date +%s)
failed=()
for entry in "${subset[@]}"; do
    t=${entry%%:*}
    filter=()
    [ "$entry" != "$t" ] && filter=(--gtest_filter="${entry#*:}")
    log=$build/tsan-$t.log
    s=$(date +%s)
    rc=0
    timeout -k 10 "$limit" "$build/tests/$t" --gtest_brief=1 "${filter[@]}" >"$log" 2>&1 || rc=$?
    took=$(( $(date +%s) - s ))
    if [ $rc -eq 0 ]; then
        echo "tsan: $t passed in ${took} s ($(grep -E '^\[  PASSED  \]' "$log" | tail -1 | cut -c14- || true))"
        continue
    fi
    failed+=("$t")
    case $rc in
        66) why="ThreadSanitizer report" ;;
        124|137) why="timed out after ${limit} s" ;;
        *) why="exit code $rc" ;;
    esac
    echo "tsan: $t FAILED ($why) in ${took} s; log $log" >&2
    grep -E -A30 'WARNING: ThreadSanitizer' "$log" | head -60 >&2 || true
    grep -E '^\[  FAILED  \]' "$log" | head -10 >&2 || true
done
echo "tsan: ${#subset[@]} binaries ran in $(( $(date +%s) - start )) s"
if [ ${#failed[@]} -gt 0 ]; then
    echo "tsan: FAILED: ${failed[*]}" >&2
    exit 1
fi
