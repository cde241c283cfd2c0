#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `remora bench ... --json` must exit 0 and print at least one result whose ops_per_s is > 0.
#   bench_json.sh REMORA PROVIDER BENCH-ARGS...
set -u
# shellcheck source=tests/cli/lib.sh
. "$(dirname "$0")/lib.sh"
remora=$1
provider=$2
shift 2
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
expect_run --out "$tmp" -- "$remora" bench -p "$provider" "$@" --json || exit 1
out=$(cat "$tmp")
echo "$out"
rates=$(echo "$out" | sed -n 's/.*"ops_per_s":\([0-9.eE+-]*\).*/\1/p')
[ -n "$rates" ] || { echo "FAIL: no result with ops_per_s"; exit 1; }
echo "$rates" | awk '$1 <= 0 { bad = 1 } END { exit bad }' ||
    { echo "FAIL: a result with ops_per_s <= 0"; exit 1; }
echo "ok: ops_per_s $(echo "$rates" | tr '\n' ' ')"
