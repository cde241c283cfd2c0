#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# tests/cli/serve_lib.sh — what the CLI tests that run `remora serve` share. Sourced after
# setting $remora (the command) and $provider; sources lib.sh (expect_run, no_sanitizer_report).
#
#   $dir             a fresh temporary folder, removed on exit
#   pids+=(PID)      processes killed (SIGKILL) on exit; start_serve adds serve's
#   fail MESSAGE     prints "FAIL: MESSAGE" and serve's log ($dir/serve.log), exits 1
#   r ARGS...        `remora ARGS... -p $provider`
#   start_serve ARGS...   starts `remora serve -p $provider --listen 127.0.0.1:0 ARGS...` in the
#                    background, logging to $dir/serve.log; sets $serve_pid, and $port from the
#                    line that says it listens (fails when serve exits or says nothing in 10 s)
#   stop_serve       stops it with SIGTERM: it must drain, persist and exit 0, with no
#                    sanitizer report

# shellcheck source=tests/cli/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

dir=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$dir/serve.log" ] && cat "$dir/serve.log"; exit 1; }
# shellcheck disable=SC2154  # remora and provider are the sourcing script's
r() { "$remora" "$@" -p "$provider"; }

start_serve() {
    : > "$dir/serve.log"
    "$remora" serve -p "$provider" --listen 127.0.0.1:0 "$@" > "$dir/serve.log" 2>&1 &
    pids+=($!)
    serve_pid=$!
    for _ in $(seq 200); do
        port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$dir/serve.log")
        [ -n "$port" ] && return 0
        kill -0 "$serve_pid" 2>/dev/null || fail "serve exited"
        sleep 0.05
    done
    fail "serve did not start"
}
stop_serve() {
    kill -TERM "$serve_pid"
    local rc=0
    wait "$serve_pid" || rc=$?
    [ $rc -eq 0 ] || fail "serve exit status $rc after SIGTERM"
    no_sanitizer_report "$dir/serve.log" || fail "serve"
}
