#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs the C example as two processes: the server (port 0, it prints the port it got) and a
# client connecting to it. Both must exit 0.
#   examples/c/run_pair.sh EXAMPLE_BINARY
set -euo pipefail
bin=$1
work=$(mktemp -d)
server_pid=
cleanup() {
    if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then kill "$server_pid"; fi
    rm -rf "$work"
}
trap cleanup EXIT
mkfifo "$work/out"
"$bin" server 0 >"$work/out" &
server_pid=$!
exec 3<"$work/out"
read -r -t 10 word port <&3 || { echo "run_pair: the server printed no port" >&2; exit 1; }
[[ $word == port ]] || { echo "run_pair: unexpected server output '$word $port'" >&2; exit 1; }
"$bin" client 127.0.0.1 "$port"
cat <&3
wait "$server_pid"
server_pid=
echo "run_pair: server and client processes exited 0"
