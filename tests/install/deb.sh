#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs the Debian packages of scripts/package.sh (dpkg -i), builds and runs consumers of
# libremora-dev through CMake's find_package(remora) (remora::remora and remora::shared, each
# from C++ and from C) and through pkg-config (remora, and remora-c for a C program), runs the
# installed `remora` command and reads its man page, then purges the packages again, also when
# a step fails.
#   tests/install/deb.sh PACKAGES_DIR
# Needs root (dpkg); without it, or when a remora package is already installed (this test would
# remove it), it skips with a message and exit 0... unless REMORA_DEB_REQUIRED=1 (CI), which
# turns a skip into a failure.
set -euo pipefail
dir=$1
src=$(cd "$(dirname "$0")" && pwd)/consumer
pkgs=(remora libremora-dev libremora0)
skip() {
    echo "deb: SKIPPED: $*" >&2
    [ "${REMORA_DEB_REQUIRED:-0}" = 1 ] && exit 1
    exit 0
}
[ "$(id -u)" -eq 0 ] || skip "needs root to install packages (run as root, as CI does)"
for p in "${pkgs[@]}"; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        skip "$p is already installed here; not touching it"
    fi
done
mapfile -t debs < <(find "$dir" -maxdepth 1 -name '*.deb' | sort)
[ "${#debs[@]}" -eq 3 ] || { echo "deb: expected 3 packages in $dir, found ${#debs[@]}" >&2; exit 1; }

work=$(mktemp -d)
cleanup() {
    dpkg --purge "${pkgs[@]}" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
dpkg -i "${debs[@]}" >/dev/null
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" | grep -q "install ok installed" ||
        { echo "deb: $p did not install" >&2; exit 1; }
done
[ -n "$(find /usr/lib -name libremora.so.0 -print -quit)" ] ||
    { echo "deb: no libremora.so.0 under /usr/lib" >&2; exit 1; }

# CMake: remora::remora and remora::shared, each from C++ and from C, and a C-only project
# (tests/install/consumers.sh), with nothing but the installed packages (no prefix path).
bash "$(dirname "$0")/consumers.sh" deb "$work" '(/usr)?/lib/'
# pkg-config: C++ (remora) and C (remora-c: the C API header and the shared library).
# shellcheck disable=SC2046  # the flags are words
g++ "$src/main.cpp" $(pkg-config --cflags --libs remora) -o "$work/pc-consumer"
"$work/pc-consumer"
cat >"$work/c-consumer.c" <<'C'
#include <remora/remora.h>
#include <stdio.h>
int main(void) {
    const char* s = remora_strerror(0);
    return s != NULL && puts(s) >= 0 ? 0 : 1;
}
C
# shellcheck disable=SC2046
gcc -std=c11 -pedantic -Wall -Werror "$work/c-consumer.c" $(pkg-config --cflags --libs remora-c) \
    -o "$work/c-consumer"
"$work/c-consumer" >/dev/null
# The command and its man page (a container may exclude /usr/share/man from dpkg; then say so).
remora --help >/dev/null
if [ -e /usr/share/man/man1/remora.1.gz ]; then
    LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings remora 2>&1 >/dev/null | { ! grep .; } ||
        { echo "deb: man remora warns" >&2; exit 1; }
else
    echo "deb: /usr/share/man is excluded from dpkg here; man page not checked" >&2
fi
dpkg --purge "${pkgs[@]}" >/dev/null
for p in "${pkgs[@]}"; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        echo "deb: $p still installed after purge" >&2
        exit 1
    fi
done
[ ! -e /usr/include/remora ] || { echo "deb: /usr/include/remora left behind" >&2; exit 1; }
echo "deb: ${#debs[@]} packages installed, CMake and pkg-config (C++ and C) consumers built and ran, purged"
