#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The fio engine as a user runs it: a server job and a client job (the job files in fio/, made
# short) over loopback, each a fio process. Passes when both exit 0, print nothing on stderr
# (the engine reports errors only), fio's banner says the client's I/Os are 4096 bytes, and fio's
# JSON says error 0, iops > 0 and the latency percentiles of the job files' percentile_list.
#   fio_engine.sh FIO ENGINE_SO PROVIDER JOB
#   JOB: write (sync=1: a flush per write, qd 2), write-batch (sync=0: a flush per batch, qd 16,
#        both sides sleeping while they wait: busy_wait_polling=0),
#        write-fsync (fsync=4: a flush every 4 writes, qd 8), write-noflush (flush=none, qd 16),
#        write-file (the server maps a file: each flush persists through the service, GPSPM;
#        the file must then hold the written bytes), read (qd 2), write-replicated (replicas=3
#        quorum=2: the client writes to three server jobs through a replica set, qd 8)
#   librpma-NAME: librpma's job pair NAME-server.fio and NAME-client.fio in librpma's style
#        (tests/fio/librpma: apm, gpspm, aof_hw, aof_sw), converted by fio/librpma-to-remora.sed
#        alone; the test then only names the address and a free port, shortens the run and, for
#        the benchmarking-style jobs, sets their environment variables
#   Refusals (a client alone, no server): refused (nobody listens: fio fails, one line of the
#   engine says "connection refused"), bad-flush (flush=fast), bad-role (role=peer), no-role (no
#   role line), noflush-sync (flush=none with sync=1): each names the value it refuses.
set -u
fio=$1
engine=$2
provider=$3
job=$4
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    for f in server.err client.err server.json client.json; do
        [ -s "$tmp/$f" ] && { echo "--- $f"; head -c 4000 "$tmp/$f"; echo; }
    done
    echo "FAIL: $*"  # again after the files, where a truncated log still shows it
    exit 1
}

export REMORA_FIO_ENGINE=$engine SERVERIP=127.0.0.1 PROVIDER=$provider  # PORT: below
# A refusal: the client job alone must fail (fio exits non-zero, its JSON error is not 0) and
# the engine must say why in one line naming the cause.
refusal() {  # ERE of the engine's line, then sed edits of the client job
    local want=$1
    shift
    sed -e 's/^runtime=60s/runtime=1s/' -e 's/^ramp_time=15s.*/ramp_time=0/' "$@" \
        "$here/fio/remora-client-write.fio" >"$tmp/client.fio"
    export PORT=$((10000 + RANDOM % 22000))
    while ss -tanH "( sport = :$PORT or dport = :$PORT )" | grep -q .; do
        PORT=$((10000 + RANDOM % 22000))
    done
    timeout -k 5 60 "$fio" "$tmp/client.fio" --output-format=json >"$tmp/client.json" 2>"$tmp/client.err"
    local rc=$?
    [ "$rc" -ne 0 ] && [ "$rc" -lt 124 ] || fail "client fio exited $rc, want a failure (1..123)"
    [ "$(grep -c '^remora: ' "$tmp/client.err")" -eq 1 ] ||
        fail "want exactly one line of the engine on stderr"
    grep -Eq "$want" "$tmp/client.err" || fail "stderr does not match: $want"
    echo "ok: refused: $(grep '^remora: ' "$tmp/client.err")"
    exit 0
}
case $job in
    refused) refusal '^remora: connecting to the server: connection refused: ' ;;
    bad-flush) refusal '^remora: flush=fast is not auto, raw, gpspm or none$' -e 's/^flush=auto/flush=fast/' ;;
    bad-role) refusal '^remora: role=peer is not client or server$' -e 's/^role=client/role=peer/' ;;
    no-role) refusal '^remora: role is missing: role=server .* or role=client ' -e '/^role=client/d' ;;
    noflush-sync) refusal '^remora: flush=none cannot honour sync=1, fsync or fdatasync$' \
        -e 's/^flush=auto/flush=none/' ;;
esac

server_edits=(-e 's/^size=100MiB.*/size=1MiB/')
[ "$job" = write-batch ] && server_edits+=(-e 's/^busy_wait_polling=1/busy_wait_polling=0/')
[ "$job" = write-file ] && server_edits+=(-e "s|^filename=malloc.*|filename=$tmp/region.bin|")
servers=1
[ "$job" = write-replicated ] && servers=3 && server_edits+=(-e 's/^numjobs=1.*/numjobs=3/')
server_src=$here/fio/remora-server.fio
case $job in
    write | write-batch | write-fsync | write-noflush | write-file | write-replicated) src=$here/fio/remora-client-write.fio; dir=write ;;
    read) src=$here/fio/remora-client-read.fio; dir=read ;;
    librpma-*)
        # The conversion, then what a user fills in anyway: the address (librpma's examples say
        # [serverip]) and, here, a free port, a short run, and the benchmarking jobs' variables.
        name=${job#librpma-}
        [ -f "$here/tests/fio/librpma/$name-client.fio" ] || fail "no librpma job pair $name"
        sed -f "$here/fio/librpma-to-remora.sed" "$here/tests/fio/librpma/$name-server.fio" \
            >"$tmp/converted-server.fio"
        sed -f "$here/fio/librpma-to-remora.sed" "$here/tests/fio/librpma/$name-client.fio" \
            >"$tmp/converted-client.fio"
        server_src=$tmp/converted-server.fio src=$tmp/converted-client.fio
        server_edits=(-e 's/^serverip=.*/serverip=${SERVERIP}/' -e 's/^port=7204.*/port=${PORT}/')
        export serverip=127.0.0.1 sync=1 numjobs=1 iodepth=2 readwrite=write blocksize=4KiB \
            ramp_time=0 runtime=2s direct_write_to_pmem=0 busy_wait_polling=1 cpuload=10
        dir=write
        [ "$name" = apm ] && dir=read,write  # rw=randrw
        ;;
    *) fail "unknown job $job" ;;
esac
sed "${server_edits[@]}" "$server_src" >"$tmp/server.fio"
edits=(-e 's/^runtime=60s/runtime=2s/' -e 's/^ramp_time=15s.*/ramp_time=0/' -e 's/^size=.*//')
[[ $job == librpma-* ]] && edits+=(-e 's/^serverip=.*/serverip=${SERVERIP}/' -e 's/^port=7204.*/port=${PORT}/')
case $job in
    write-batch) edits+=(-e 's/^sync=1/sync=0/' -e 's/^iodepth=2/iodepth=16/'
                         -e 's/^busy_wait_polling=1.*/busy_wait_polling=0/'
                         -e 's/^iodepth_batch_submit=1/iodepth_batch_submit=4/') ;;
    write-fsync) edits+=(-e 's/^sync=1/sync=0\nfsync=4/' -e 's/^iodepth=2/iodepth=8/') ;;
    write-noflush) edits+=(-e 's/^sync=1/sync=0/' -e 's/^flush=auto/flush=none/'
                           -e 's/^iodepth=2/iodepth=16/') ;;
    write-replicated) edits+=(-e 's/^sync=1/sync=1\nreplicas=3\nquorum=2/' -e 's/^iodepth=2/iodepth=8/') ;;
esac
sed "${edits[@]}" "$src" >"$tmp/client.fio"
[ "$job" = write-fsync ] && ! grep -q '^fsync=4' "$tmp/client.fio" && fail "job file edit failed"
[ "$job" = write-replicated ] && ! grep -q '^replicas=3' "$tmp/client.fio" && fail "job file edit failed"

# A port no socket uses, below the ephemeral range; another one when a process took it between
# the look and the listen (the server then fails with "Address already in use").
free_port() {
    local p
    for _ in $(seq 100); do
        p=$((10000 + RANDOM % 22000))
        ss -tanH "( sport = :$p or dport = :$p )" | grep -q . || { echo "$p"; return 0; }
    done
    return 1
}
listening=
for attempt in 1 2 3; do
    port=$(free_port) || fail "no free port found"
    export PORT=$port
    timeout -k 5 60 "$fio" "$tmp/server.fio" --output-format=json >"$tmp/server.json" 2>"$tmp/server.err" &
    server_pid=$!
    for _ in $(seq 200); do
        if [ "$(ss -ltnH "( sport >= :$port and sport < :$((port + servers)) )" | wc -l)" -ge "$servers" ]; then
            listening=1
            break
        fi
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$listening" ] && break
    wait "$server_pid"
    server_pid=
    grep -q "Address already in use" "$tmp/server.err" || break
    echo "port $port taken meanwhile (attempt $attempt)"
done
[ -n "$listening" ] || fail "the server did not listen (last port $port) within 20 s"

# fio's banner (normal output) says the block size; the JSON follows it.
timeout -k 5 60 "$fio" "$tmp/client.fio" --output-format=normal,json >"$tmp/client.json" \
    2>"$tmp/client.err"
client_rc=$?
wait "$server_pid"
server_rc=$?
server_pid=
[ "$client_rc" -eq 0 ] || fail "client fio exited $client_rc"
[ "$server_rc" -eq 0 ] || fail "server fio exited $server_rc"
[ -s "$tmp/client.err" ] && fail "the client printed on stderr"
[ -s "$tmp/server.err" ] && fail "the server printed on stderr"
region=()
[ "$job" = write-file ] && region=("$tmp/region.bin")
strict=1  # remora's job files: their percentile_list
[[ $job == librpma-* ]] && strict=0
python3 - "$tmp/client.json" "$tmp/server.json" "$dir" "$strict" "${region[@]}" <<'PY' || fail "fio's JSON"
import json, re, sys
def check(ok, what):
    if not ok:
        sys.exit("FAIL: " + what)
def load(path):  # fio's JSON, after whatever fio printed before it (the banner, cpuio's line)
    text = open(path).read()
    start = 0 if text.startswith("{") else text.find("\n{\n") + 1
    check(start > 0 or text.startswith("{"), f"no JSON in {path}")
    return text[:start], json.JSONDecoder().raw_decode(text[start:])[0]
text, client = load(sys.argv[1])
# The banner: "client: (g=0): rw=write, bs=(R) 4096B-4096B, (W) 4096B-4096B, ..."
banner = re.search(r"bs=\(R\) (\S+), \(W\) (\S+),", text)
check(banner is not None, "no block sizes in fio's banner")
check(banner.groups() == ("4096B-4096B", "4096B-4096B"),
      f"I/Os of {banner.group(2)} bytes, want 4096B-4096B (4KiB with kb_base=1000)")
server, ddirs, strict = load(sys.argv[2])[1], sys.argv[3].split(","), sys.argv[4] == "1"
for s in server["jobs"]:  # write-replicated: three, each ended by its client's disconnect
    check(s["error"] == 0, f"server job error {s['error']}")
j = client["jobs"][0]
check(j["error"] == 0, f"client job error {j['error']}")
for ddir in ddirs:
    d = j[ddir]
    check(d["iops"] > 0, f"{ddir} iops {d['iops']}")
    check(d["total_ios"] > 0, f"{ddir} total_ios {d['total_ios']}")
    # Completion latency, or total latency where the job says disable_clat=1, lat_percentiles=1.
    pct = d["clat_ns"].get("percentile") or d["lat_ns"].get("percentile", {})
    check(len(pct) > 0 and min(pct.values()) > 0, f"{ddir} latency percentiles missing or 0: {pct}")
    if strict:  # remora's job files: their percentile_list
        for p in ("50.000000", "99.000000", "99.900000", "99.999000"):
            check(pct.get(p, 0) > 0, f"{ddir} latency percentile {p} missing or 0: {pct}")
if len(sys.argv) > 5:  # write-file: the mapped file holds what the client wrote
    data = open(sys.argv[5], "rb").read()
    check(len(data) == 1 << 20, f"region file of {len(data)} bytes, want 1 MiB (size=1MiB)")
    # Sequential 4 KiB writes of fio's random bytes from offset 0 (wrapping): every block written
    # holds something other than zeros.
    blocks = [data[i:i + 4096] for i in range(0, len(data), 4096)]
    written = sum(1 for b in blocks if b.count(0) != len(b))
    # io_bytes: what completed (total_ios counts I/Os issued, some cut off when the run ends).
    want = min(d["io_bytes"] // 4096, len(blocks))
    check(want > 0, "no write completed")
    check(written >= want, f"{written} blocks of the region file hold data, want {want} (writes completed)")
high = max(pct, key=float)
print(f"ok: {ddir} iops {d['iops']:.0f}, {d['total_ios']} I/Os of {banner.group(2)}, "
      f"p99 {pct.get('99.000000', 0)/1000:.1f} us, p{float(high):g} {pct[high]/1000:.1f} us")
PY
