#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The shared library: versioned SONAME, exports only the C API (remora_*) and namespace remora,
# all under version node REMORA_0, and nothing it needs is left undefined.
#   tests/install/shared.sh LIBREMORA_SO
set -euo pipefail
lib=$1
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == libremora.so.0 ]] || { echo "shared: SONAME is '$soname', not libremora.so.0" >&2; exit 1; }
# Defined dynamic symbols with their version: "name@@REMORA_0" (nm -D shows the version).
mapfile -t syms < <(nm -D --defined-only --with-symbol-versions "$lib" | awk '{print $3}')
bad=0
for s in "${syms[@]}"; do
    name=${s%%@*} ver=${s##*@}
    [[ $name == REMORA_0 ]] && continue
    if [[ $ver != REMORA_0 ]]; then echo "shared: $name has version '$ver'" >&2; bad=1; fi
    if [[ $name == remora_* ]]; then continue; fi
    demangled=$(c++filt "$name")
    if [[ $demangled != *remora::* ]]; then echo "shared: exports $demangled" >&2; bad=1; fi
done
[[ $bad -eq 0 ]] || exit 1
c=$(printf '%s\n' "${syms[@]}" | grep -c '^remora_' || true)
echo "shared: $soname exports ${#syms[@]} symbols under REMORA_0 ($c of the C API), none outside remora"
