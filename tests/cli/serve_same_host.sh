#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The same-host path with the defaults: `remora serve` and `put`/`get` with no same-host option, in
# separate processes of this host and user, take it (serve logs "same host, shared memory" on the
# client's line) wherever the kernel would let the two attach to each other; a client with
# REMORA_SAME_HOST=off, `serve --same-host off` and a read-only client stay on the provider.
#   serve_same_host.sh REMORA PROVIDER
set -u
remora=$1
provider=$2
# shellcheck source=tests/cli/serve_lib.sh
. "$(dirname "$0")/serve_lib.sh"
unset REMORA_SAME_HOST # the defaults decide

# Whether the path can be taken here: libfabric offers shm (not when FI_PROVIDER leaves it out),
# no provider rules (REMORA_RULES), and the kernel lets a process of this user attach to another
# (no Yama restriction; no capabilities unless root's).
expected=yes
"$remora" info --endpoint rdm --provider shm > /dev/null 2>&1 || expected=no
case ${REMORA_RULES:-native} in native) ;; *) expected=no ;; esac
yama=/proc/sys/kernel/yama/ptrace_scope
if [ -e "$yama" ] && [ "$(cat "$yama" 2>/dev/null)" != 0 ]; then expected=no; fi
if [ "$(id -u)" != 0 ] && grep -Eq '^CapPrm:.*[1-9a-f]' /proc/self/status; then expected=no; fi

# on_path N: serve's log has N client lines on the same-host path.
on_path() {
    local n
    n=$(grep -c "connected (.*; same host, shared memory" "$dir/serve.log")
    [ "$n" -eq "$1" ] || fail "$n clients on the same-host path, expected $1"
}
# clients N: serve has logged N clients (it logs a client once it serves it: wait up to 5 s).
clients() {
    local n
    for _ in $(seq 100); do
        n=$(grep -c "^client [0-9]* connected (" "$dir/serve.log")
        [ "$n" -ge "$1" ] && break
        sleep 0.05
    done
    [ "$n" -eq "$1" ] || fail "$n clients logged, expected $1"
}

# ---- the defaults on both sides: put and get take the path (where it can be taken)
start_serve --region mem:64K
t=127.0.0.1:$port
echo hello > "$dir/hello"
expect_run --exit 2 --stdin "$dir/hello" --stderr "NOT durable" -- r put -t "$t" --offset 100 ||
    fail "put with the defaults"
expect_run --stdout "^hello$" --stderr-lines 0 -- r get -t "$t" --offset 100 -l 5 ||
    fail "get with the defaults"
clients 2
if [ $expected = yes ]; then on_path 2; else on_path 0; fi

# ---- the client turns it off (its domain opens without shm)
expect_run --stdout "^hello$" --stderr-lines 0 -- env REMORA_SAME_HOST=off "$remora" get \
    -p "$provider" -t "$t" --offset 100 -l 5 || fail "get with REMORA_SAME_HOST=off"
clients 3
if [ $expected = yes ]; then on_path 2; else on_path 0; fi
stop_serve

# ---- serve turns it off
start_serve --region mem:64K --same-host off
expect_run --exit 2 --stdin "$dir/hello" --stderr "NOT durable" -- r put -t "127.0.0.1:$port" \
    --offset 0 || fail "put to serve --same-host off"
expect_run --stdout "^hello$" -- r get -t "127.0.0.1:$port" --offset 0 -l 5 ||
    fail "get from serve --same-host off"
clients 2
on_path 0
stop_serve

# ---- a read-only client never takes it (shared memory checks no keys)
start_serve --region mem:64K --access ro
expect_run --out "$dir/ro.bin" -- r get -t "127.0.0.1:$port" --offset 0 -l 5 ||
    fail "get from serve --access ro"
cmp -s "$dir/ro.bin" <(head -c 5 /dev/zero) || fail "get from serve --access ro: other bytes"
clients 1
grep -q "read-only" "$dir/serve.log" || fail "no read-only client logged"
on_path 0
stop_serve
echo "serve same-host path on $provider: ok (path expected: $expected)"
