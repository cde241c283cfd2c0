#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `remora serve --key-file`: clients with the key get in, clients without it or with another key
# are refused with one clear line and exit 1, and serve keeps serving; --max-clients refuses a
# client for load with an honest reason; keygen writes 0600 files and never overwrites them.
#   serve_admission.sh REMORA PROVIDER
set -u
remora=$1
provider=$2
# shellcheck source=tests/cli/serve_lib.sh
. "$(dirname "$0")/serve_lib.sh"

# ---- keygen: a 0600 file of 32 bytes, never overwritten
expect_run --stderr "wrote a new 32-byte admission key" -- "$remora" keygen "$dir/k" || fail keygen
[ "$(stat -c %a "$dir/k")" = 600 ] || fail "key file mode $(stat -c %a "$dir/k")"
[ "$(stat -c %s "$dir/k")" = 32 ] || fail "key file size"
cp "$dir/k" "$dir/k.before"
expect_run --exit 1 --stderr-lines 1 --stderr "never overwritten" -- "$remora" keygen "$dir/k" ||
    fail "keygen overwrote"
cmp "$dir/k" "$dir/k.before" || fail "keygen changed an existing key"
head -c 32 /dev/urandom > "$dir/wrong"
chmod 600 "$dir/wrong"

# ---- a key too open is refused at start
cp "$dir/k" "$dir/open"
chmod 644 "$dir/open"
expect_run --exit 1 --stderr-lines 1 --stderr "accessible by others.*chmod 600" \
    -- timeout 30 "$remora" serve -p "$provider" --listen 127.0.0.1:0 --region mem:4K \
    --key-file "$dir/open" || fail "open key"  # (timeout: a serve that starts anyway fails, not hangs)

# ---- serve with a key
start_serve --region mem:64K --key-file "$dir/k"
grep -q "admission by key" "$dir/serve.log" || fail "serve does not say it admits by key"
t=127.0.0.1:$port
echo hello > "$dir/hello"
expect_run --exit 2 --stdin "$dir/hello" --stderr "NOT durable" \
    -- r put -t "$t" --offset 0 --key-file "$dir/k" || fail "put with the key"
expect_run --stdout "^hello$" --stderr-lines 0 -- r get -t "$t" --offset 0 -l 5 --key-file "$dir/k" ||
    fail "get with the key"
expect_run --exit 1 --stderr-lines 1 --stderr "^remora get: the target at 127.0.0.1:[0-9]+ refused admission: wrong key" \
    -- r get -t "$t" --offset 0 -l 5 --key-file "$dir/wrong" || fail "get with a wrong key"
expect_run --exit 1 --stderr-lines 1 \
    --stderr "^remora get: the target at 127.0.0.1:[0-9]+ requires admission: pass --key-file" \
    -- r get -t "$t" --offset 0 -l 5 || fail "get without a key"
expect_run --exit 1 --stderr-lines 1 --stdin "$dir/hello" \
    --stderr "^remora put: the target at 127.0.0.1:[0-9]+ requires admission" -- r put -t "$t" --offset 0 || fail "put without a key"
# serve keeps serving: the right key still works, and it logged both refusals
expect_run --stdout "^hello$" -- r get -t "$t" --offset 0 -l 5 --key-file "$dir/k" || fail "get after refusals"
[ "$(grep -c "refused a client: admission refused: wrong key" "$dir/serve.log")" -eq 1 ] ||
    fail "serve did not log the wrong key"
[ "$(grep -c "refused a client: admission refused: no valid admission token" "$dir/serve.log")" -eq 2 ] ||
    fail "serve did not log the clients without a key"
stop_serve

# ---- serve without a key on loopback: no warning, and clients connect as before
start_serve --region mem:64K
grep -q "no admission" "$dir/serve.log" || fail "serve does not say it has no admission"
grep -q "WARNING" "$dir/serve.log" && fail "warned on loopback"
expect_run --exit 2 --stdin "$dir/hello" -- r put -t "127.0.0.1:$port" --offset 0 || fail "put, keyless"
expect_run --stdout "^hello$" -- r get -t "127.0.0.1:$port" --offset 0 -l 5 || fail "get, keyless"
stop_serve

# ---- beyond loopback without a key: a warning on stderr
"$remora" serve -p "$provider" --listen 0.0.0.0:0 --region mem:4K > "$dir/wide.log" 2>&1 &
pids+=($!)
wide=$!
for _ in $(seq 200); do grep -q "listening on" "$dir/wide.log" && break; sleep 0.05; done
grep -q "WARNING: listening on 0.0.0.0 without --key-file" "$dir/wide.log" ||
    fail "no warning: $(cat "$dir/wide.log")"
kill -TERM "$wide"
wait "$wide" || fail "wide serve exit status"

# ---- --max-clients 1: a second client is refused for load while the first is connected.
# The first is a get of 1 MiB into a pipe read one byte, then left: it stays connected, blocked
# in its write to stdout, while the second one tries.
start_serve --region mem:1M --key-file "$dir/k" --max-clients 1
mkfifo "$dir/fifo"
r get -t "127.0.0.1:$port" --key-file "$dir/k" > "$dir/fifo" &
holder=$!
pids+=($holder)
exec 3< "$dir/fifo"
head -c 1 <&3 > /dev/null  # the first client has its bytes: it is connected
expect_run --exit 1 --stderr-lines 1 \
    --stderr "^remora get: the target at 127.0.0.1:[0-9]+ refused admission: the target is at its limit" \
    -- r get -t "127.0.0.1:$port" --offset 0 -l 5 --key-file "$dir/k" || fail "second client not refused"
grep -q "rejected a client: 1 clients connected (--max-clients)" "$dir/serve.log" || fail "no load log"
cat <&3 > /dev/null
exec 3<&-
wait "$holder" || fail "the first client failed"
for _ in $(seq 200); do grep -q "client 1 closed" "$dir/serve.log" && break; sleep 0.05; done
expect_run --out "$dir/five" -- r get -t "127.0.0.1:$port" --offset 0 -l 5 --key-file "$dir/k" ||
    fail "get after the first client left"
stop_serve
echo "ok: serve_admission $provider"
