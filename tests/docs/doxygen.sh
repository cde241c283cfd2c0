#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The API reference builds clean: doxygen over include/remora (docs/Doxyfile.in sets
# WARN_AS_ERROR) exits 0, prints nothing (doxygen reports some problems as "error:" lines and
# still exits 0, so any output fails too), and writes the index page.
#   doxygen.sh DOXYGEN DOXYFILE OUTPUT_DIR
set -euo pipefail
doxygen=$1
doxyfile=$2
out=$3
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
"$doxygen" "$doxyfile" >"$log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ] || [ -s "$log" ]; then
    cat "$log" >&2
    echo "doxygen: exit $rc, $(wc -l <"$log") line(s) of warnings or errors (must be 0 and none)" >&2
    exit 1
fi
[ -s "$out/html/index.html" ] || { echo "doxygen: no $out/html/index.html" >&2; exit 1; }
echo "doxygen: API reference in $out/html/index.html, no warning"
