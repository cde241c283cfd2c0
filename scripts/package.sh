#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds remora's Debian packages (cmake/package.cmake: libremora0, libremora-dev, remora) from a
# build tree with CPack, then checks them with lintian: any error fails; warnings are printed
# (the ones expected of a CPack-built package are listed in cmake/package.cmake's lintian note).
#   scripts/package.sh [BUILD_DIR]    default build; configured here when it is not yet
# The packages land in BUILD_DIR/packages. A sanitizer build is refused (its binaries need the
# sanitizer runtime). tests/install/deb.sh installs and uses them.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bash scripts/install-deps.sh
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -DREMORA_WERROR=ON >/dev/null
fi
if grep -Eq '^REMORA_(SANITIZE|TSAN|FUZZ):BOOL=ON' "$build/CMakeCache.txt"; then
    echo "package: $build is a sanitizer or fuzzing build; package a plain one" >&2
    exit 64
fi
# picks up cmake/package.cmake changes; REMORA_PACKAGE_CONTACT from the environment, when set, is
# the packages' maintainer (cmake/package.cmake)
cmake -S . -B "$build" ${REMORA_PACKAGE_CONTACT:+"-DREMORA_PACKAGE_CONTACT=$REMORA_PACKAGE_CONTACT"} \
    >/dev/null
# cpack builds the whole tree first (its preinstall step), as `make package` would: after
# scripts/test.sh that is already done.
cmake --build "$build" -j "$(nproc)"
out=$(realpath -m "$build/packages")
rm -rf "$out"
(cd "$build" && cpack -G DEB -B "$out" >/dev/null)
rm -rf "$out/_CPack_Packages"
mapfile -t debs < <(find "$out" -maxdepth 1 -name '*.deb' | sort)
[ "${#debs[@]}" -eq 3 ] || { echo "package: expected 3 packages in $out, found ${#debs[@]}" >&2; exit 1; }
for deb in "${debs[@]}"; do
    echo "package: $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)," \
        "$(stat -c %s "$deb") bytes, installed $(dpkg-deb -f "$deb" Installed-Size) KiB: $deb"
done
# lintian: errors fail; warnings are shown.
log=$out/lintian.txt
status=0
lintian --fail-on error --display-info "${debs[@]}" >"$log" 2>&1 || status=$?
cat "$log"
if [ "$status" -ne 0 ]; then
    echo "package: lintian found errors (exit $status)" >&2
    exit 1
fi
echo "package: lintian: no errors, $(grep -c '^W: ' "$log" || true) warning(s), $(grep -c '^I: ' "$log" || true) info tag(s)"
