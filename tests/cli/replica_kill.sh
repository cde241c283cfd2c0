#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A replicated log that loses a target: `remora put --replicas A,B,C --quorum 2 --record-size 4K`
# appends a stream of records to three `remora serve` targets (file regions, so durable through
# their service), and one target is killed with SIGKILL at a random point of the stream. Each
# round checks that put goes on and exits 0, says once which target it dropped, acknowledges
# every record once, and that both survivors hold every acknowledged record, byte for byte, in
# their files after they stop. A last round kills two targets: put stops with status 1 (fewer
# than the quorum), and the survivor holds every record put acknowledged.
#   replica_kill.sh REMORA PROVIDER [ROUNDS [RECORDS]]   (defaults: 5 rounds of 300 records)
# Run under tests/twohost/run.sh (`run.sh bash replica_kill.sh ...`), the targets run in the
# target network namespace and put in the client's, across the veth pair.
# Prints one line per round: the record after which the target died, and how many were acked.
set -u
remora=$1
provider=$2
rounds=${3:-5}
records=${4:-300}
# shellcheck source=tests/cli/lib.sh
. "$(dirname "$0")/lib.sh"

dir=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$dir"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    for f in "$dir"/*.log; do echo "== $f"; tail -20 "$f"; done
    exit 1
}

record=4096
host=127.0.0.1
netns=()
if [ -n "${REMORA_TWOHOST_NS_TARGET:-}" ]; then
    host=$REMORA_TWOHOST_TARGET_ADDR
    netns=(ip netns exec "$REMORA_TWOHOST_NS_TARGET")  # execs serve: the pid stays serve's
fi
host_re=${host//./\\.}
head -c $((records * record)) /dev/urandom > "$dir/records.bin"

# start_target I: serve on a file region in the background; sets port[I] and spid[I].
declare -a port spid
start_target() {
    local i=$1 log=$dir/serve$1.log p
    rm -f "$dir/r$i.bin"
    "${netns[@]}" "$remora" serve -p "$provider" --listen "$host:0" \
        --region "file:$dir/r$i.bin:4M" --create > "$log" 2>&1 &
    spid[$i]=$!
    pids+=($!)
    for _ in $(seq 200); do
        p=$(sed -n "s/.*listening on $host_re:\\([0-9]*\\).*/\\1/p" "$log")
        if [ -n "$p" ]; then
            port[$i]=$p
            return 0
        fi
        kill -0 "${spid[$i]}" 2>/dev/null || fail "serve $i exited"
        sleep 0.05
    done
    fail "serve $i did not start"
}
stop_target() {
    kill -TERM "${spid[$1]}"
    local rc=0
    wait "${spid[$1]}" || rc=$?
    [ $rc -eq 0 ] || fail "serve $1: exit status $rc after SIGTERM"
    no_sanitizer_report "$dir/serve$1.log" || fail "serve $1"
}
# The records one at a time, so that the stream takes a while and a kill lands inside it.
feed() {
    local i
    for ((i = 0; i < records; i++)); do
        dd if="$dir/records.bin" bs=$record skip=$i count=1 status=none
    done
}
# holds I ACKS: target I's file holds every record acknowledged in file ACKS.
holds() {
    local i=$1 acks=$2 idx off
    while read -r _ idx off; do
        cmp -s <(tail -c +$((off + 1)) "$dir/r$i.bin" | head -c $record) \
            <(tail -c +$((idx * record + 1)) "$dir/records.bin" | head -c $record) ||
            return 1
    done < "$acks"
}

# round KILLS: three targets, a stream, KILLS of them killed at random points.
round() {
    local kills=$1 i k victims=() rc=0 after acked
    for i in 0 1 2; do start_target $i; done
    feed | "$remora" put -p "$provider" --quorum 2 --record-size $record --depth 8 \
        --replicas "$host:${port[0]},$host:${port[1]},$host:${port[2]}" \
        > "$dir/acks.txt" 2> "$dir/put.log" &
    local put_pid=$!
    pids+=($put_pid)
    after=$((RANDOM % (records - 20) + 1))
    for _ in $(seq 2000); do
        [ "$(wc -l < "$dir/acks.txt")" -ge "$after" ] && break
        kill -0 $put_pid 2>/dev/null || break
        sleep 0.005
    done
    k=$((RANDOM % 3))
    for ((n = 0; n < kills; n++)); do
        victims+=($(((k + n) % 3)))
        disown "${spid[$(((k + n) % 3))]}"  # no "Killed" line from the shell
        kill -9 "${spid[$(((k + n) % 3))]}"
        # A process killed so cannot remove its shared-memory regions (docs/rdm-peers.md).
        rm -f /dev/shm/remora_"${spid[$(((k + n) % 3))]}"_*
    done
    wait $put_pid || rc=$?
    no_sanitizer_report "$dir/put.log" || fail "put"
    acked=$(wc -l < "$dir/acks.txt")
    [ -z "$(cut -d' ' -f2 "$dir/acks.txt" | sort | uniq -d)" ] || fail "a record acknowledged twice"
    for v in "${victims[@]}"; do
        [ "$(grep -c "replica $host_re:${port[$v]}[ :]" "$dir/put.log")" -le 1 ] ||
            fail "target $v's drop reported more than once"
    done
    for i in 0 1 2; do
        [[ " ${victims[*]} " == *" $i "* ]] && continue
        stop_target $i
        holds $i "$dir/acks.txt" || fail "target $i lacks a record put acknowledged"
    done
    if [ "$kills" -eq 1 ]; then
        [ $rc -eq 0 ] || fail "put exit status $rc with two targets left"
        [ "$acked" -eq "$records" ] || fail "$acked of $records records acknowledged"
        # Unless the target died after the stream's last write (put ended with 3 live), put said
        # so: dropped it, or (killed before put reached it) could not connect to it.
        grep -q "(3 live)" "$dir/put.log" ||
            grep -q "replica $host_re:${port[${victims[0]}]}[ :]" "$dir/put.log" ||
            fail "the dropped target was not reported"
    else
        [ $rc -eq 1 ] || [ "$acked" -eq "$records" ] || fail "put exit status $rc below the quorum"
    fi
    echo "round: killed ${victims[*]} after record $after: $acked of $records acknowledged, exit $rc"
}

for ((r = 0; r < rounds; r++)); do round 1; done
round 2
echo "replica_kill: ok"
