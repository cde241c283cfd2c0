#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `remora serve` reaps misbehaving clients with its default options: admitted clients (a read-only
# key is enough) flood it with service requests and never take a reply (tests/cli/serve_flooder).
#  - Three that exit mid-flood: their connections are closed, serve's fds are back to where they
#    were within 10 s, it uses < 5 % of a core over the next 3 s, and a legitimate put succeeds
#    (with --max-clients 3 they would otherwise hold every slot).
# Runs in a network namespace of its own whose TCP buffers are small (64 KiB at most), so a
# client that takes no replies backs the target up after a few thousand of them rather than after
# the 32 MiB a loopback socket may buffer by default. Root only (unshare -n): exit 77 otherwise.
#   serve_reap.sh REMORA FLOODER PROVIDER
set -u
if [ -z "${REMORA_REAP_NETNS:-}" ]; then
    unshare -n true 2>/dev/null || { echo "SKIP: unshare -n needs root"; exit 77; }
    REMORA_REAP_NETNS=1 exec unshare -n bash "$0" "$@"
fi
ip link set lo up 2>/dev/null || { echo "SKIP: no loopback in a new network namespace"; exit 77; }
sysctl -qw net.ipv4.tcp_rmem="4096 16384 65536" net.ipv4.tcp_wmem="4096 16384 65536" ||
    { echo "SKIP: cannot size TCP buffers"; exit 77; }
remora=$1
flooder=$2
provider=$3
# shellcheck source=tests/cli/serve_lib.sh
. "$(dirname "$0")/serve_lib.sh"
"$remora" keygen "$dir/ro" 2>/dev/null || fail keygen
"$remora" keygen "$dir/rw" 2>/dev/null || fail keygen

fds() { find "/proc/$serve_pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
ticks() { awk '{print $14 + $15}' "/proc/$serve_pid/stat"; }
# legit_put WORD: a put of "legit WORD" (exit 2: stored in a volatile region), read back.
legit_put() {
    printf 'legit %s' "$1" > "$dir/data"
    expect_run --exit 2 --stdin "$dir/data" -- r put -t "127.0.0.1:$port" --offset 0 \
        --key-file "$dir/rw" || fail "a legitimate put after $1"
    expect_run --stdout "^legit $1\$" -- r get -t "127.0.0.1:$port" --offset 0 -l $((6 + ${#1})) \
        --key-file "$dir/ro" || fail "a legitimate get after $1"
}
# flood MODE: three flooders, each until the target has backed up; waited for (exit: each floods
# for 3 s and exits), or left stopped (stop: each stops once the target has backed up, within 10 s).
flood() {
    local i fl=() secs=3
    [ "$1" = stop ] && secs=10
    for i in 1 2 3; do
        "$flooder" "$provider" "127.0.0.1:$port" "$dir/ro" "$secs" "$1" 2> "$dir/flood$i.log" &
        fl+=($!)
        pids+=($!)
    done
    if [ "$1" = exit ]; then
        wait "${fl[@]}"
    else
        for _ in $(seq 200); do
            [ "$(cat "$dir"/flood*.log | grep -c '^sent ')" -eq 3 ] && break
            sleep 0.1
        done
    fi
    [ "$(cat "$dir"/flood*.log | grep -c 'the target backed up')" -eq 3 ] ||
        fail "the target did not back up for every flooder: $(cat "$dir"/flood*.log)"
}

# ---- flooders that exit
start_serve --region mem:1M --key-file "ro=$dir/ro" --key-file "rw=$dir/rw" --max-clients 3
legit_put before  # the first client sets up what every later one shares
start_fds=$(fds)
flood exit
back=
for _ in $(seq 100); do
    [ "$(fds)" -le "$start_fds" ] && { back=1; break; }
    sleep 0.1
done
[ -n "$back" ] || fail "serve holds $(fds) fds 10 s after the flooders exited (started with $start_fds)"
t0=$(ticks)
sleep 3
used=$(( $(ticks) - t0 ))
hz=$(getconf CLK_TCK)
# < 5 % of a core over 3 s
[ $((used * 100 * 20)) -lt $((3 * hz * 100)) ] ||
    fail "serve used $used ticks ($hz a second) in the 3 s after the flooders exited"
echo "exited flooders: fds $start_fds -> back to $(fds); $used ticks of CPU in 3 s"
legit_put exit
[ "$(grep -c ' lost$\| closed$\| closed: ' "$dir/serve.log")" -ge 3 ] || fail "the flooders' ends are not logged"
stop_serve

echo "PASS"
