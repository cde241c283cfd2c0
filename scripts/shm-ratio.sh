#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# remora vs plain libfabric on shm, 8-byte write/read/send: N runs of `remora bench -e rdm -p shm
# --pin --baseline --json`, then per operation the median (min-max) of the per-run p50 ratios.
# Paired in one process per run, so a busy machine moves both sides; still, measure quiet.
#   scripts/shm-ratio.sh REMORA [RUNS] [extra bench options...]
bin=${1:?usage: scripts/shm-ratio.sh REMORA [RUNS] [bench options]}; n=${2:-7}; shift; [ $# -gt 0 ] && shift
for r in $(seq $n); do
  $bin bench -e rdm -p shm --op write --op read --op send --size 8 -d 0.5 --pin --baseline --json "$@" 2>/dev/null
done | python3 -c '
import sys,json,statistics as st
rows=[json.loads(l) for l in sys.stdin if l.startswith("{")]
for op in ("write","read","send"):
    v=[r for r in rows if r["op"]==op]
    if not v: continue
    rp=[r["ratio_p50"] for r in v]; a=[r["p50_us"] for r in v]; b=[r["baseline"]["p50_us"] for r in v]
    print(f"{op:6} n={len(v)} p50 remora {st.median(a):.3f} plain {st.median(b):.3f} ratio median {st.median(rp):.3f} ({min(rp):.3f}-{max(rp):.3f})")
'
