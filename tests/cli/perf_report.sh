#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# scripts/perf-report.py end to end, as a smoke run (no timing asserted): one round of one row
# measured with the remora binary given, rendered into a copy of docs/performance.md; the
# generated part must hold that row with figures for remora, plain libfabric and their ratio,
# and the date and commit line; the rest of the document must be untouched.
#   perf_report.sh REMORA
set -euo pipefail
remora=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
REMORA=$remora python3 "$here/scripts/perf-report.py" run --rounds 1 --duration 0.2 \
    --rows tcp-write-8 --out "$tmp/r.jsonl"
[ "$(wc -l < "$tmp/r.jsonl")" -eq 1 ] || { echo "FAIL: expected one measurement"; exit 1; }
cp "$here/docs/performance.md" "$tmp/perf.md"
python3 "$here/scripts/perf-report.py" render "$tmp/r.jsonl" --doc "$tmp/perf.md"
row=$(grep -E '^\| tcp 8 B write p50 \|' "$tmp/perf.md") || { echo "FAIL: no tcp write row"; exit 1; }
echo "$row"
# remora, plain and the ratio: numbers with their [min-max]; fi_pingpong is not run for writes.
echo "$row" | grep -Eq '^\| tcp 8 B write p50 \| [0-9.]+ \[[0-9.]+-[0-9.]+\] \| [0-9.]+ \[[0-9.]+-[0-9.]+\] \| - \| [0-9.]+ \[' ||
    { echo "FAIL: the row lacks figures"; exit 1; }
grep -q "at commit \`" "$tmp/perf.md" || { echo "FAIL: no date and commit line"; exit 1; }
# Outside the markers nothing changed.
strip() { sed '/perf-report:begin/,/perf-report:end/d' "$1"; }
diff <(strip "$here/docs/performance.md") <(strip "$tmp/perf.md") ||
    { echo "FAIL: text outside the generated part changed"; exit 1; }
echo "PASS"
