#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `remora serve`, `put` and `get` driven as a user would, in separate processes on loopback.
# Every run is checked for its exact exit code, its message and no sanitizer report (lib.sh).
#   serve_put_get.sh REMORA PROVIDER
set -u
remora=$1
provider=$2
# shellcheck source=tests/cli/serve_lib.sh
. "$(dirname "$0")/serve_lib.sh"

# ---- a persistent file region
start_serve --region "file:$dir/region.bin:1M" --create
t=127.0.0.1:$port
head -c 100000 /dev/urandom > "$dir/in.bin"
expect_run --stdin "$dir/in.bin" --stderr "durable \(gpspm\)" -- r put -t "$t" --offset 4096 || fail put
expect_run --out "$dir/out.bin" --stderr-lines 0 -- r get -t "$t" --offset 4096 -l 100000 || fail get
cmp "$dir/in.bin" "$dir/out.bin" || fail "get returned other bytes than put wrote"

# Out of range: one line on stderr, exit 1, and nothing written.
echo x > "$dir/x"
expect_run --exit 1 --stderr-lines 1 --stdin "$dir/x" --stderr "out of range" \
    -- r put -t "$t" --offset 1048576 || fail "put out of range"
expect_run --exit 1 --stderr-lines 1 --stderr "exceed" -- r get -t "$t" --offset 1048000 -l 1000 ||
    fail "get out of range"

# Stopped and continued (SIGSTOP, SIGCONT): it goes on serving, with nothing in its log.
kill -STOP "$serve_pid"
sleep 0.3
kill -CONT "$serve_pid"
sleep 0.3
expect_run --out "$dir/out.bin" --stderr-lines 0 -- r get -t "$t" --offset 4096 -l 100000 ||
    fail "get after SIGSTOP and SIGCONT"
# SIGTERM: drains, persists, exits 0.
stop_serve
grep -q "Interrupted" "$dir/serve.log" && fail "a signal was logged as an error"
grep -q "region persisted" "$dir/serve.log" || fail "serve did not persist on SIGTERM"
# The file holds them too (the region is the file; serve holds it alone while it runs).
cmp <(tail -c +4097 "$dir/region.bin" | head -c 100000) "$dir/in.bin" || fail "file content"
expect_run --exit 1 --stderr-lines 1 --stderr "^remora get: " -- r get -t "$t" --offset 0 -l 8 ||
    fail "get from a stopped target"

# Reopened without --create: the bytes are still there, the file was not truncated.
start_serve --region "file:$dir/region.bin"
expect_run --out "$dir/out2.bin" -- r get -t "127.0.0.1:$port" --offset 4096 -l 100000 ||
    fail "get after restart"
cmp "$dir/in.bin" "$dir/out2.bin" || fail "bytes lost across a restart"
[ "$(stat -c %s "$dir/region.bin")" -eq 1048576 ] || fail "file size changed"
stop_serve

# ---- a volatile region: put works, says the bytes are not durable (exit 2)
start_serve --region mem:64K
echo hello > "$dir/hello"
expect_run --exit 2 --stdin "$dir/hello" --stderr "NOT durable" -- r put -t "127.0.0.1:$port" --offset 0 ||
    fail "put to volatile"
expect_run --stdout "^hello$" -- r get -t "127.0.0.1:$port" --offset 0 -l 5 || fail "get volatile"
stop_serve

# ---- bad arguments: 64 and the line that says why; a file that is not there: a failed run (1)
expect_run --exit 64 --stderr-lines 1 --stderr "disk" -- r serve --region disk:1M || fail "region kind"
expect_run --exit 64 --stderr-lines 1 --stderr "0 bytes" -- r serve --region mem:0 || fail "empty region"
expect_run --exit 1 --stderr-lines 1 --stderr "missing\.bin" -- r serve --region "file:$dir/missing.bin" ||
    fail "missing file"
expect_run --exit 64 --stderr-lines 1 --stderr "nohost" -- r serve --listen nohost || fail "bad listen"
expect_run --exit 64 --stderr-lines 1 --stderr "notaport" -- r get --target 127.0.0.1:notaport ||
    fail "bad target"
echo "serve/put/get on $provider: ok"
