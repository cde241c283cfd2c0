#!/usr/bin/env bash
# `remora serve`, `put` and `get` driven as a user would, in separate processes on loopback.
#   serve_put_get.sh REMORA PROVIDER
set -u
remora=$1
provider=$2
dir=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$dir/serve.log" ] && cat "$dir/serve.log"; exit 1; }

# Starts `remora serve ARGS...` in the background; sets $port from its first line.
start_serve() {
    : > "$dir/serve.log"
    "$remora" serve -p "$provider" --listen 127.0.0.1:0 "$@" > "$dir/serve.log" 2>&1 &
    pids+=($!)
    serve_pid=$!
    for _ in $(seq 100); do
        port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$dir/serve.log")
        [ -n "$port" ] && return 0
        sleep 0.1
    done
    fail "serve did not start: $(cat "$dir/serve.log")"
}

# ---- a persistent file region
start_serve --region "file:$dir/region.bin:1M" --create
t=127.0.0.1:$port
head -c 100000 /dev/urandom > "$dir/in.bin"
"$remora" put -p "$provider" -t "$t" -o 4096 < "$dir/in.bin" 2> "$dir/put.err" || fail "put: $(cat "$dir/put.err")"
grep -q "durable (gpspm)" "$dir/put.err" || fail "put did not report durability: $(cat "$dir/put.err")"
"$remora" get -p "$provider" -t "$t" -o 4096 -n 100000 > "$dir/out.bin" || fail "get"
cmp "$dir/in.bin" "$dir/out.bin" || fail "get returned other bytes than put wrote"
# The file holds them too (the region is the file).
cmp <(tail -c +4097 "$dir/region.bin" | head -c 100000) "$dir/in.bin" || fail "file content"

# Out-of-range and unreachable: one line on stderr, exit 1.
echo x | "$remora" put -p "$provider" -t "$t" -o 1048576 2> "$dir/err"; rc=$?
[ $rc -eq 1 ] && [ "$(wc -l < "$dir/err")" -eq 1 ] && grep -q "out of range" "$dir/err" || fail "put out of range: rc=$rc $(cat "$dir/err")"
"$remora" get -p "$provider" -t "$t" -o 1048000 -n 1000 > /dev/null 2> "$dir/err"; rc=$?
[ $rc -eq 1 ] && grep -q "exceed" "$dir/err" || fail "get out of range: rc=$rc $(cat "$dir/err")"

# SIGTERM: drains, persists, exits 0.
kill -TERM "$serve_pid"
wait "$serve_pid"; rc=$?
[ $rc -eq 0 ] || fail "serve exit status $rc after SIGTERM"
grep -q "region persisted" "$dir/serve.log" || fail "serve did not persist on SIGTERM"
"$remora" get -p "$provider" -t "$t" -o 0 -n 8 > /dev/null 2> "$dir/err"; rc=$?
[ $rc -eq 1 ] && [ "$(wc -l < "$dir/err")" -eq 1 ] || fail "get from a stopped target: rc=$rc $(cat "$dir/err")"

# Reopened without --create: the bytes are still there, the file was not truncated.
start_serve --region "file:$dir/region.bin"
"$remora" get -p "$provider" -t "127.0.0.1:$port" -o 4096 -n 100000 > "$dir/out2.bin" || fail "get after restart"
cmp "$dir/in.bin" "$dir/out2.bin" || fail "bytes lost across a restart"
[ "$(stat -c %s "$dir/region.bin")" -eq 1048576 ] || fail "file size changed"
kill -9 "$serve_pid"; wait "$serve_pid" 2>/dev/null

# ---- a volatile region: put works, says the bytes are not durable (exit 2)
start_serve --region mem:64K
echo hello | "$remora" put -p "$provider" -t "127.0.0.1:$port" -o 0 2> "$dir/err"; rc=$?
[ $rc -eq 2 ] && grep -q "NOT durable" "$dir/err" || fail "put to volatile: rc=$rc $(cat "$dir/err")"
[ "$("$remora" get -p "$provider" -t "127.0.0.1:$port" -o 0 -n 5)" = hello ] || fail "get volatile"
kill -TERM "$serve_pid"; wait "$serve_pid"

# ---- bad arguments: one clear line, non-zero exit
for args in "serve --region disk:1M" "serve --region mem:0" "serve --region file:$dir/missing.bin" \
            "serve --listen nohost" "get --target 127.0.0.1:notaport"; do
    # shellcheck disable=SC2086
    "$remora" $args -p "$provider" > /dev/null 2> "$dir/err" < /dev/null; rc=$?
    [ $rc -ne 0 ] && [ "$(wc -l < "$dir/err")" -ge 1 ] || fail "'$args' exited $rc"
done
echo "serve/put/get on $provider: ok"
