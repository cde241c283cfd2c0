#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Two hosts on one machine: runs a test binary in a "client" network namespace joined to a
# "target" namespace by a veth pair, and removes both afterwards, whatever happens.
#   run.sh TEST-BINARY [ARGS...]
# Layout (names unique per run: the script's pid):
#   remora-tw-PID-c  [rtwPIDc 10.77.0.2/24] <--veth--> [rtwPIDt 10.77.0.1/24]  remora-tw-PID-t
# The binary runs inside the client namespace and learns the rest from the environment:
#   REMORA_TWOHOST_NS_TARGET, REMORA_TWOHOST_NS_CLIENT   the namespaces (for `ip netns exec`)
#   REMORA_TWOHOST_LINK_TARGET, REMORA_TWOHOST_LINK_CLIENT   the veth ends
#   REMORA_TWOHOST_TARGET_ADDR, REMORA_TWOHOST_CLIENT_ADDR   their IPv4 addresses
# It starts targets with `ip netns exec TARGET-NS ...`, takes the link down with `ip -n ... link`
# and resets connections with `ss -K` (iproute2: the kernel's SOCK_DESTROY sends a RST).
# Exit 77 (ctest SKIP_RETURN_CODE) when this machine cannot do it: not root, no `ip`/`ss`, or
# the kernel refuses network namespaces or veth. The binary gets at most REMORA_TWOHOST_TIMEOUT
# seconds (default 170; `timeout` kills it) so the cleanup below still runs before ctest's own
# timeout. Namespaces left by a run that was killed outright (SIGKILL) are removed by the next.
set -u
if [ $# -lt 1 ]; then
    echo "usage: run.sh TEST-BINARY [ARGS...]" >&2
    exit 64
fi
skip() {
    echo "twohost: SKIPPED: $*"
    exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root (creates network namespaces and a veth pair)"
for tool in ip ss timeout; do
    command -v "$tool" >/dev/null || skip "no '$tool' command (install iproute2 / coreutils)"
done

prefix=remora-tw
id=$$
ns_t=$prefix-$id-t
ns_c=$prefix-$id-c
link_t=rtw${id}t
link_c=rtw${id}c

# Kills what runs in a namespace of ours (the targets this run started) and deletes it.
remove_ns() {
    local ns=$1 pids
    pids=$(ip netns pids "$ns" 2>/dev/null)
    if [ -n "$pids" ]; then
        kill -CONT $pids 2>/dev/null
        kill -KILL $pids 2>/dev/null
    fi
    ip netns del "$ns" 2>/dev/null
}
cleanup() {
    remove_ns "$ns_c"
    remove_ns "$ns_t"  # deleting a namespace deletes the veth pair with it
}
# Namespaces of earlier runs whose script is gone (killed with SIGKILL: no trap ran).
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$prefix-[0-9]*-[tc]$"); do
    pid=${ns#"$prefix"-}
    pid=${pid%-?}
    # A killed script may linger as a zombie (empty cmdline) until its parent reaps it.
    grep -qs run.sh "/proc/$pid/cmdline" || remove_ns "$ns"
done

trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

ip netns add "$ns_t" 2>/dev/null || skip "the kernel refuses network namespaces (ip netns add)"
ip netns add "$ns_c" || exit 1
ip link add "$link_c" netns "$ns_c" type veth peer name "$link_t" netns "$ns_t" 2>/dev/null ||
    skip "the kernel refuses a veth pair (ip link add ... type veth)"
set -e
ip -n "$ns_t" addr add 10.77.0.1/24 dev "$link_t"
ip -n "$ns_c" addr add 10.77.0.2/24 dev "$link_c"
for ns in "$ns_t" "$ns_c"; do
    ip -n "$ns" link set lo up
done
ip -n "$ns_t" link set "$link_t" up
ip -n "$ns_c" link set "$link_c" up
set +e

export REMORA_TWOHOST_NS_TARGET=$ns_t REMORA_TWOHOST_NS_CLIENT=$ns_c
export REMORA_TWOHOST_LINK_TARGET=$link_t REMORA_TWOHOST_LINK_CLIENT=$link_c
export REMORA_TWOHOST_TARGET_ADDR=10.77.0.1 REMORA_TWOHOST_CLIENT_ADDR=10.77.0.2
# In the background, so a signal to this script runs its trap at once (bash runs traps only
# between commands, and `wait` is one); the cleanup then kills the binary in its namespace.
timeout -k 5 "${REMORA_TWOHOST_TIMEOUT:-170}" ip netns exec "$ns_c" "$@" &
child=$!
trap 'kill -TERM $child 2>/dev/null; exit 130' INT
trap 'kill -TERM $child 2>/dev/null; exit 143' TERM
trap 'kill -TERM $child 2>/dev/null; exit 129' HUP
wait $child
rc=$?
[ $rc -eq 124 ] && echo "twohost: the test binary ran out of time (${REMORA_TWOHOST_TIMEOUT:-170} s)"
exit $rc
