#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The fio engine against `remora bench` on the same workloads, interleaved, over loopback.

    scripts/fio-vs-bench.py [--provider tcp] [--rounds 3] [--seconds 3] [--build build]
                            [--only "write "]   (workloads whose name starts so; repeatable)
                            [--engine PATH]     (another build of the engine module)

Per round and workload: a fio server/client pair (fio/remora.c), then `remora bench` with the
same operation, size and queue depth. Both sides alike: the client busy-polls, the target's
progress thread is adaptive (fio: busy_wait_polling=0 on the server; bench: its default).
Both run on the provider asked for (REMORA_SAME_HOST=off: no same-host path between fio's two
processes).
fio reaps every ready completion at once (iodepth_batch_complete_max = the depth), as bench
does; with fio's default of one a call, completions wait in the engine for fio's next call.
Workloads: write+flush (read-after-write) at QD1 (fio sync=1 flush=raw; bench flush-raw),
plain writes at QD1 and QD16 (fio flush=none; bench write). Prints per workload the medians
of p50 latency (fio: completion latency) and operations/s, fio/bench ratios, and the spread
(min..max) over the rounds.

fio's own cost is measured in the same rounds: the same client job with fio's null engine
(which completes every I/O at once) gives fio's completion latency p50 and its time per I/O
(1 / ops/s) with no I/O at all. The table then adds the ratios with that overhead taken out of
fio's side: latency (fio p50 - null p50) / bench p50, and operations/s
1 / (1 / fio ops/s - 1 / null ops/s) / bench ops/s.
"""
import argparse, json, os, socket, statistics, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("--provider", default="tcp")
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--seconds", type=int, default=3)
ap.add_argument("--build", default="build")
ap.add_argument("--fio", default="build-fio/fio/fio")
ap.add_argument("--only", action="append", default=[],
                help="run only the workloads whose name starts with this (repeatable)")
ap.add_argument("--engine", default="", help="the fio engine module (default: BUILD/fio/libremora_fio.so)")
a = ap.parse_args()
# fio's server and client are two processes of this host and user, which the library moves to the
# same-host path (shared memory) by default; bench stays on the provider (its loopback target is
# in its own process, and it keeps off the path without --same-host on). Both on the provider:
os.environ["REMORA_SAME_HOST"] = "off"
engine = os.path.abspath(a.engine or os.path.join(a.build, "fio", "libremora_fio.so"))
remora = os.path.join(a.build, "tools", "remora", "remora")

WORKLOADS = [  # name, bench op, size, qd, fio client options
    ("write+flush 8 B QD1", "flush-raw", 8, 1, "sync=1\nflush=raw"),
    ("write+flush 4 KiB QD1", "flush-raw", 4096, 1, "sync=1\nflush=raw"),
    ("write 8 B QD1", "write", 8, 1, "sync=0\nflush=none"),
    ("write 4 KiB QD1", "write", 4096, 1, "sync=0\nflush=none"),
    ("write 8 B QD16", "write", 8, 16, "sync=0\nflush=none"),
    ("write 4 KiB QD16", "write", 4096, 16, "sync=0\nflush=none"),
]

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p

def listening(port):
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
    return bool(out.strip())

def run_fio(tmp, size, qd, extra):
    port = free_port()
    common = (f"[global]\nioengine=external:{engine}\ncreate_serialize=0\nthread\n"
              f"serverip=127.0.0.1\nport={port}\nprovider={a.provider}\n")
    server = common + ("role=server\n[server]\nbusy_wait_polling=0\nsize=1MiB\nfilename=malloc\n"
                       "time_based\nruntime=365d\n")
    client = common + (f"role=client\n[client]\n{extra}\nbusy_wait_polling=1\niodepth={qd}\n"
                       f"iodepth_batch_submit=1\niodepth_batch_complete_max={qd}\nrw=write\nblocksize={size}\nramp_time=0\n"
                       f"time_based\nruntime={a.seconds}s\n")
    for name, text in (("s.fio", server), ("c.fio", client)):
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
    srv = subprocess.Popen(["timeout", "120", a.fio, os.path.join(tmp, "s.fio"), "--output-format=json"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(200):
        if listening(port) or srv.poll() is not None:
            break
        time.sleep(0.05)
    cl = subprocess.run(["timeout", "120", a.fio, os.path.join(tmp, "c.fio"), "--output-format=json"],
                        capture_output=True, text=True)
    srv.wait()
    if cl.returncode != 0:
        sys.exit(f"fio client failed: {cl.stderr}")
    w = json.loads(cl.stdout)["jobs"][0]["write"]
    return w["clat_ns"]["percentile"]["50.000000"] / 1000.0, w["iops"]

def run_null(tmp, size, qd):
    job = (f"[null]\nioengine=null\nthread\niodepth={qd}\niodepth_batch_submit=1\n"
           f"iodepth_batch_complete_max={qd}\nrw=write\nblocksize={size}\nsize=1MiB\n"
           f"time_based\nruntime={a.seconds}s\n")
    with open(os.path.join(tmp, "n.fio"), "w") as f:
        f.write(job)
    out = subprocess.run(["timeout", "120", a.fio, os.path.join(tmp, "n.fio"), "--output-format=json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"fio null failed: {out.stderr}")
    w = json.loads(out.stdout)["jobs"][0]["write"]
    return w["clat_ns"]["percentile"]["50.000000"] / 1000.0, w["iops"]

def run_bench(op, size, qd):
    out = subprocess.run([remora, "bench", "-p", a.provider, "--op", op, "--size", str(size), "--qd",
                          str(qd), "-d", str(a.seconds), "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"remora bench failed: {out.stderr}")
    j = json.loads(out.stdout.strip().splitlines()[-1])
    return j["p50_us"], j["ops_per_s"]

# an --only that names a workload exactly selects just it ("write 8 B QD1", not QD16 too)
names = {w[0] for w in WORKLOADS}
WORKLOADS = [w for w in WORKLOADS if not a.only or
             any(w[0] == o if o in names else w[0].startswith(o) for o in a.only)]
res = {w[0]: {"fio": [], "bench": [], "null": []} for w in WORKLOADS}
with tempfile.TemporaryDirectory() as tmp:
    for r in range(a.rounds):
        for name, op, size, qd, extra in WORKLOADS:
            # alternate which goes first, so drift in the machine's load hits both alike
            order = ["fio", "null", "bench"] if r % 2 == 0 else ["bench", "null", "fio"]
            for who in order:
                v = (run_fio(tmp, size, qd, extra) if who == "fio" else
                     run_null(tmp, size, qd) if who == "null" else run_bench(op, size, qd))
                res[name][who].append(v)
            print(f"round {r + 1} {name}: fio p50 {res[name]['fio'][-1][0]:.1f} us "
                  f"{res[name]['fio'][-1][1]:.0f}/s, bench p50 {res[name]['bench'][-1][0]:.1f} us "
                  f"{res[name]['bench'][-1][1]:.0f}/s, null p50 {res[name]['null'][-1][0]:.2f} us "
                  f"{res[name]['null'][-1][1]:.0f}/s", file=sys.stderr, flush=True)

def fmt(vals, i, f):
    xs = [v[i] for v in vals]
    return f"{f(statistics.median(xs))} ({f(min(xs))}..{f(max(xs))})"

print(f"provider {a.provider}, {a.rounds} rounds of {a.seconds} s, medians (min..max)")
print(f"| workload | fio p50 us | bench p50 us | p50 fio/bench | fio ops/s | bench ops/s | "
      f"ops/s fio/bench | null p50 us | null us/IO | p50 ratio, null out | ops/s ratio, null out |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for name, *_ in WORKLOADS:
    f, b, n = res[name]["fio"], res[name]["bench"], res[name]["null"]
    med = lambda xs, i: statistics.median(x[i] for x in xs)
    lat = med(f, 0) / med(b, 0)
    ops = med(f, 1) / med(b, 1)
    lat_adj = (med(f, 0) - med(n, 0)) / med(b, 0)
    ops_adj = 1.0 / (1.0 / med(f, 1) - 1.0 / med(n, 1)) / med(b, 1)
    us = lambda v: f"{v:.1f}"
    ks = lambda v: f"{v / 1000:.1f}k"
    print(f"| {name} | {fmt(f, 0, us)} | {fmt(b, 0, us)} | {lat:.3f} | {fmt(f, 1, ks)} | "
          f"{fmt(b, 1, ks)} | {ops:.3f} | {fmt(n, 0, lambda v: f'{v:.2f}')} | "
          f"{1e6 / med(n, 1):.2f} | {lat_adj:.3f} | {ops_adj:.3f} |")
