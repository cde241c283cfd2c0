#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A smoke run of the comparison the default suite shows (no timing asserted, never a ratio's
# value): every row of `remora bench --suite default` with its plain-libfabric baselines (a
# process of their own) and, on the busy send ping-pong, fi_pingpong's figures, all positive;
# fi_pingpong and ucx_perftest each either measured or skipped with a note saying why (not
# installed). Then the table: the one-line legend, remora's, plain libfabric's and
# fi_pingpong's rows and their ratio rows.
#   bench_compare.sh REMORA PROVIDER
set -u
# shellcheck source=tests/cli/lib.sh
. "$(dirname "$0")/lib.sh"
remora=$1
provider=$2
count=300
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
have_pingpong=0
command -v fi_pingpong > /dev/null && have_pingpong=1
have_ucx=0
command -v ucx_perftest > /dev/null && have_ucx=1

expect_run --stderr-lines 0 --out "$tmp" -- \
    "$remora" bench --suite default -p "$provider" --count "$count" --json || exit 1
cat "$tmp"
python3 - "$tmp" "$count" "$have_pingpong" "$have_ucx" <<'PY' || exit 1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
count, have_pp, have_ucx = int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1"
def positive(name, figs, latency=True):
    for k in ["ops_per_s", "cpu_us_per_op"] + (["p50_us"] if latency else []):
        v = figs.get(k)
        if not isinstance(v, (int, float)) or v <= 0:
            sys.exit(f"FAIL: {name}: {k} is {v!r}, want > 0")
want = [("write", 8, "busy"), ("read", 8, "busy"), ("send", 8, "busy"), ("send", 8, "blocking"),
        ("gpspm", 8, "blocking"), ("flush-gpspm", 8, "blocking"), ("write", 65536, "busy")]
got = [(r["op"], r["size"], r["wait"]) for r in rows]
if got != want:
    sys.exit(f"FAIL: rows {got}, want {want}")
for r in rows:
    name = f"{r['op']} {r['size']} B {r['wait']}"
    positive(name, r)
    if r["ops"] != count:
        sys.exit(f"FAIL: {name}: ops {r['ops']}, want {count}")
    if r["op"] in ("write", "read", "send"):
        for k in ("baseline", "baseline_busy_target"):
            if k not in r:
                sys.exit(f"FAIL: {name}: no {k}")
            positive(f"{name} {k}", r[k])
            if r[k]["ops"] != count:
                sys.exit(f"FAIL: {name} {k}: ops {r[k]['ops']}, want {count}")
        for k in ("ratio_ops_per_s", "ratio_p50", "ratio_busy_target_ops_per_s"):
            if not r.get(k, 0) > 0:
                sys.exit(f"FAIL: {name}: {k} is {r.get(k)!r}")
    anchored = r["op"] == "send" and r["wait"] == "busy"
    pp = r.get("fi_pingpong")
    if not anchored:
        if pp is not None and "skipped" not in pp:
            sys.exit(f"FAIL: {name}: fi_pingpong ran beside it: {pp}")
        continue
    if pp is None:
        sys.exit(f"FAIL: {name}: no fi_pingpong key")
    if have_pp:
        if "skipped" in pp:
            sys.exit(f"FAIL: {name}: fi_pingpong installed but skipped: {pp['skipped']}")
        positive(f"{name} fi_pingpong", pp, latency=False)
        if not pp.get("mean_rtt_us", 0) > 0 or not pp.get("half_rtt_us", 0) > 0:
            sys.exit(f"FAIL: {name}: fi_pingpong without its latency: {pp}")
        if (pp["ops"] != count or not r.get("ratio_fi_pingpong_ops_per_s", 0) > 0 or
                not r.get("ratio_baseline_fi_pingpong_ops_per_s", 0) > 0):
            sys.exit(f"FAIL: {name}: fi_pingpong ops {pp['ops']} or no ratio")
    elif "not installed" not in pp.get("skipped", ""):
        sys.exit(f"FAIL: {name}: fi_pingpong missing but no note: {pp}")
    ucx = r.get("ucx_perftest")
    if have_ucx and ucx is None:
        sys.exit(f"FAIL: {name}: ucx_perftest installed but not run")
    if ucx is not None and "skipped" not in ucx:
        positive(f"{name} ucx_perftest", ucx)
print(f"ok: {len(rows)} rows, baselines and anchors positive")
PY

# The table: the legend, each kind of row once, and an anchor that is not installed noted.
pp_rows=(--stdout "^note +ucx_perftest: not installed")
[ "$have_ucx" = 1 ] && pp_rows=(--stdout "^(ucx_perftest +send +8 |note +ucx_perftest: )")
if [ "$have_pingpong" = 1 ]; then
    pp_rows+=(--stdout "^fi_pingpong +send +8 +1 +1 busy .* ~[0-9.]+ +- +- +[0-9.]+$"
              --stdout "^ratio +remora/fi_pingpong: ops/s x[0-9.]+, half round trip [0-9.]+ us"
              --stdout "^ratio +baseline/fi_pingpong \\(plain libfabric's fastest target\\): ops/s x[0-9]")
else
    pp_rows+=(--stdout "^note +fi_pingpong: not installed")
fi
expect_run --stderr-lines 0 \
    --stdout "^columns: ops/s .*fi:PROVIDER/busy plain libfabric, target busy-polls \\(a process of its own\\)" \
    --stdout "^$provider +send +8 +1 +1 busy " \
    --stdout "^fi:$provider +send/same +8 " --stdout "^fi:$provider +send/busy +8 " \
    --stdout "^ratio +remora/baseline \\(/busy: target busy-polls\\): ops/s x[0-9]" \
    "${pp_rows[@]}" \
    -- "$remora" bench -p "$provider" --op send --count "$count" --baseline \
    --anchor fi_pingpong --anchor ucx_perftest || exit 1
echo "ok: table with legend, baselines and anchors (took ${expect_took} s)"
