#!/usr/bin/env bash
# `remora bench --target` against a `remora serve` in another process, and the same with the
# target killed mid-run: bench must stop with one clear line and a non-zero exit, not hang.
#   bench_target.sh REMORA PROVIDER
set -u
remora=$1
provider=$2
dir=$(mktemp -d)
serve_pid=
cleanup() { [ -n "$serve_pid" ] && kill -9 "$serve_pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$dir/serve.log" 2>/dev/null; exit 1; }

"$remora" serve -p "$provider" --listen 127.0.0.1:0 --region "file:$dir/r.bin:4M" --create \
    > "$dir/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$dir/serve.log")
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || fail "serve did not start"
t=127.0.0.1:$port

"$remora" bench -p "$provider" --target "$t" --op write --op flush-gpspm --op fetch-add \
    -d 0.3 --json > "$dir/ok.json" || fail "bench against the target"
[ "$(grep -c '"ops_per_s"' "$dir/ok.json")" -eq 3 ] || fail "expected 3 results: $(cat "$dir/ok.json")"
"$remora" bench -p "$provider" --target "$t" --op send -d 0.2 2> "$dir/err"; rc=$?
[ $rc -eq 1 ] && grep -q "loopback" "$dir/err" || fail "send against a serve target: rc=$rc"

# Kill the target one second into a 20-second run.
start=$(date +%s)
"$remora" bench -p "$provider" --target "$t" --op write --qd 8 -d 20 > /dev/null 2> "$dir/err" &
bench_pid=$!
sleep 1
kill -9 "$serve_pid"; wait "$serve_pid" 2>/dev/null; serve_pid=
wait "$bench_pid"; rc=$?
took=$(( $(date +%s) - start ))
[ $rc -ne 0 ] || fail "bench exited 0 after its target was killed"
[ "$(wc -l < "$dir/err")" -eq 1 ] || fail "expected one error line: $(cat "$dir/err")"
[ $took -lt 15 ] || fail "bench took ${took}s to notice its target died"
echo "bench --target on $provider: ok (killed target noticed in ${took}s: $(cat "$dir/err"))"
