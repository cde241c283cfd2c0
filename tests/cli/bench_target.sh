#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `remora bench --target` against a `remora serve` in another process, and the same with the
# target killed mid-run: bench must stop with one clear line and a non-zero exit, not hang.
#   bench_target.sh REMORA PROVIDER
set -u
remora=$1
provider=$2
# shellcheck source=tests/cli/serve_lib.sh
. "$(dirname "$0")/serve_lib.sh"

start_serve --region "file:$dir/r.bin:4M" --create
t=127.0.0.1:$port

expect_run --out "$dir/ok.json" --stderr-lines 0 \
    -- "$remora" bench -p "$provider" --target "$t" --op write --op flush-gpspm --op fetch-add -d 0.3 --json ||
    fail "bench against the target"
[ "$(grep -c '"ops_per_s"' "$dir/ok.json")" -eq 3 ] || fail "expected 3 results: $(cat "$dir/ok.json")"
expect_run --exit 64 --stderr-lines 1 --stderr "loopback" \
    -- "$remora" bench -p "$provider" --target "$t" --op send -d 0.2 || fail "send against a serve target"

# Kill the target while a 20-second run is writing to it. It is writing once serve has logged
# its connection and bench (busy-polling) has burnt 0.3 s of CPU: its connect is behind it
# (a connect failure would say "connect:", and fails the test).
connected() { grep -c "client [0-9]* connected" "$dir/serve.log"; }
before=$(connected)
start=$(date +%s)
"$remora" bench -p "$provider" --target "$t" --op write --qd 8 -d 20 > /dev/null 2> "$dir/err" &
bench_pid=$!
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
for _ in $(seq 300); do
    [ "$(connected)" -gt "$before" ] && [ "$(cpu_ticks $bench_pid)" -ge 30 ] && break
    kill -0 "$bench_pid" 2>/dev/null || break
    sleep 0.05
done
[ "$(connected)" -gt "$before" ] || fail "bench never connected: $(cat "$dir/err")"
kill -9 "$serve_pid"; wait "$serve_pid" 2>/dev/null; pids=()
rc=0
wait "$bench_pid" || rc=$?
took=$(( $(date +%s) - start ))
[ $rc -eq 1 ] || fail "bench exited $rc after its target was killed: $(cat "$dir/err")"
[ "$(wc -l < "$dir/err")" -eq 1 ] || fail "expected one error line: $(cat "$dir/err")"
grep -Eq "^remora bench: write( failed)?: " "$dir/err" || fail "not a mid-run failure: $(cat "$dir/err")"
no_sanitizer_report "$dir/err" "$dir/serve.log" || fail "bench or serve"
[ $took -lt 15 ] || fail "bench took ${took}s to notice its target died"
echo "bench --target on $provider: ok (killed target noticed in ${took}s: $(cat "$dir/err"))"
