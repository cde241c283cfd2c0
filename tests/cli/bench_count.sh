#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `remora bench --count N ... --json` runs each result by a count: every result (and its
# baseline, when there is one) must report exactly N operations, and exit 0.
#   bench_count.sh REMORA PROVIDER N BENCH-ARGS...
set -u
# shellcheck source=tests/cli/lib.sh
. "$(dirname "$0")/lib.sh"
remora=$1
provider=$2
count=$3
shift 3
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
expect_run --stderr-lines 0 --out "$tmp" -- "$remora" bench -p "$provider" --count "$count" "$@" --json ||
    exit 1
cat "$tmp"
python3 - "$tmp" "$count" <<'PY' || exit 1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
want = int(sys.argv[2])
if not rows:
    sys.exit("FAIL: no result")
for r in rows:
    for name, figs in [("result", r)] + [(k, r[k]) for k in ("baseline", "baseline_busy_target") if k in r]:
        if figs["ops"] != want:
            sys.exit(f"FAIL: {r['op']} {r['size']} B {name}: ops {figs['ops']}, want {want}")
        if figs["ops_per_s"] <= 0:
            sys.exit(f"FAIL: {r['op']} {r['size']} B {name}: ops_per_s {figs['ops_per_s']}")
print(f"ok: {len(rows)} results of exactly {want} operations")
PY
