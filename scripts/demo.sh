#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Sets up (Debian packages), builds remora, runs its examples end to end over loopback and then
# remora's main job: `remora bench` with the default suite and its plain-libfabric baseline
# (about half a minute) on loopback, charted into build/bench-default.png.
# FI_PROVIDER=sockets selects the sockets provider instead of the automatic choice (tcp here).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
for ex in connection write read write_imm ping_pong receive_cq shared_channel shared_cq \
          flush_persistent flush_gpspm append_log cas_lock; do
    bin=build/examples/example_$ex
    [ -x "$bin" ] || continue
    echo "== example $ex"
    "$bin"
done
echo "== remora info"
build/tools/remora/remora info
echo "== remora bench (default suite)"
prov=()
[ -n "${FI_PROVIDER:-}" ] && prov=(--provider "$FI_PROVIDER")
build/tools/remora/remora bench --suite default --duration 2 --baseline --plot build/bench-default.png \
    "${prov[@]}"
echo "(chart: build/bench-default.png)"
