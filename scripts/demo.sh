#!/usr/bin/env bash
# Sets up (Debian packages), builds remora and runs its examples end to end over loopback on
# the tcp provider (set FI_PROVIDER=sockets to use sockets).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
export FI_PROVIDER=${FI_PROVIDER:-tcp}
for ex in info connection write read write_imm ping_pong receive_cq shared_channel; do
    bin=build/examples/example_$ex
    [ -x "$bin" ] || continue
    echo "== $ex"
    "$bin"
done
