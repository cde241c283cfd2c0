#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The quick tour: installs what building and running need (scripts/install-deps.sh
# --minimal: no test toolchain), builds the library, the remora command and the examples only
# (tests off), runs the examples end to end over loopback, then remora's main job: `remora bench`
# with the default suite and its plain-libfabric baseline on loopback (half a second a run),
# charted into BUILD/bench-default.png when gnuplot is there (gnuplot-nox; scripts/test.sh
# installs it).
#   scripts/demo.sh                 into build/ (REMORA_DEMO_BUILD=DIR: into DIR)
# FI_PROVIDER=sockets selects the sockets provider instead of the automatic choice (tcp here).
# The whole test suite: scripts/test.sh (it installs the rest and turns the tests back on).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
build=${REMORA_DEMO_BUILD:-build}
bash scripts/install-deps.sh --minimal
echo "   (packages: $((SECONDS - start)) s)"
echo "== build: library, command, examples ($build)"
# A new tree: optimized (-O2) without debug information, the quickest build to compile; an
# existing tree keeps its build type (scripts/test.sh turns the tests back on).
type=()
[ -f "$build/CMakeCache.txt" ] || type=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG")
cmake -S . -B "$build" -DREMORA_TESTS=OFF "${type[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)" --target remora remora_shared remora_cli examples >/dev/null
echo "   ($((SECONDS - start)) s so far)"
for ex in connection write read write_imm ping_pong receive_cq shared_channel shared_cq \
          flush_persistent flush_gpspm append_log cas_lock c_client_server; do
    bin=$build/examples/example_$ex
    [ -x "$bin" ] || continue
    echo "== example $ex"
    "$bin"
done
echo "== remora info"
"$build"/tools/remora/remora info
echo "== remora bench (default suite)"
prov=()
[ -n "${FI_PROVIDER:-}" ] && prov=(--provider "$FI_PROVIDER")
plot=()
command -v gnuplot >/dev/null && plot=(--plot "$build"/bench-default.png)
"$build"/tools/remora/remora bench --suite default --duration 0.5 "${plot[@]}" "${prov[@]}"
if [ ${#plot[@]} -gt 0 ]; then
    echo "(chart: $build/bench-default.png; demo took $((SECONDS - start)) s)"
else
    echo "(demo took $((SECONDS - start)) s; with gnuplot-nox installed, --plot FILE.png charts it)"
fi
