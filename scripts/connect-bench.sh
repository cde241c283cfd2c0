#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# scripts/connect-bench.sh [N] [PROVIDER...]: N connections (default 500) set up from one thread
# with connect_async (`remora bench --suite connect`), first against a loopback target in the
# bench's own process, then against a `remora serve` (--max-clients N + 100): the bench's time
# and RSS per connection, serve's RSS growth (VmHWM while they were connected, minus VmRSS
# before) and how many clients it logged as connected. Not a test: it prints figures.
set -euo pipefail
n=${1:-500}
shift || true
providers=("$@")
[ ${#providers[@]} -eq 0 ] && providers=(tcp sockets)
remora=${REMORA:-build/tools/remora/remora}
# Each connection holds a few descriptors on each side (socket, event queue, CQ wait fds).
ulimit -n "$(ulimit -Hn)"
echo "open files limit: $(ulimit -n)"
for p in "${providers[@]}"; do
    echo "== $p, loopback target in process"
    "$remora" bench --suite connect --setups "$n" -p "$p"
    echo "== $p, against remora serve"
    log=$(mktemp)
    "$remora" serve -p "$p" --listen 127.0.0.1:0 --region mem:1M --max-clients $((n + 100)) \
        >"$log" 2>&1 &
    pid=$!
    port=""
    for _ in $(seq 100); do
        port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
        [ -n "$port" ] && break
        sleep 0.1
    done
    if [ -z "$port" ]; then
        cat "$log"
        kill "$pid" 2>/dev/null || true
        exit 1
    fi
    before=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
    rc=0
    "$remora" bench --suite connect --setups "$n" -p "$p" --target "127.0.0.1:$port" || rc=$?
    peak=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
    connected=$(grep -c "connected (" "$log" || true)
    errors=$(grep -ciE "failed|rejected|refused" "$log" || true)
    kill -INT "$pid"
    wait "$pid" || true
    echo "  serve: $connected clients logged as connected, $errors failures logged;" \
        "RSS $before KiB before, peak $peak KiB ($(((peak - before) / n)) KiB per connection)"
    [ "$rc" -eq 0 ] || { tail -5 "$log"; exit "$rc"; }
    rm -f "$log"
done
