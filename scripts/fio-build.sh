#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds fio 3.33 from Debian's source package, for remora's fio engine (fio/) and its test.
# Debian ships no fio headers package; an external engine builds against fio's own tree.
#
#   scripts/fio-build.sh            fetch, verify, unpack, configure and build into build-fio/
#   FIO_BUILD_DIR=DIR scripts/fio-build.sh   the same into DIR
#
# Prints the fio source tree's path (DIR/fio) on its last line. A second run finds
# DIR/fio/fio built from the same source and does nothing else.
#
# The source comes from Debian's archive through apt, with a deb-src list and apt state kept
# inside DIR (the system's apt configuration is not touched): apt checks the Sources index
# against Debian's archive keyring (InRelease) and each downloaded file against that index's
# checksums, and dpkg-source checks them again against the .dsc when it unpacks.
# Build needs: a C compiler, make, dpkg-source (dpkg-dev), xz; `scripts/install-deps.sh --fio`
# installs them (and so does the full set).
set -euo pipefail
cd "$(dirname "$0")/.."
version=3.33-3
dir=${FIO_BUILD_DIR:-build-fio}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
stamp=$dir/fio/.remora-built-$version
if [ -f "$stamp" ] && [ -x "$dir/fio/fio" ]; then
    echo "$dir/fio"
    exit 0
fi
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -r "$keyring" ] || { echo "fio-build: $keyring missing (package debian-archive-keyring)" >&2; exit 1; }
apt=$dir/apt
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$dir/src"
echo "deb-src [signed-by=$keyring] http://deb.debian.org/debian bookworm main" >"$apt/sources.list"
aptopts=(-q -o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
         -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
         -o APT::Sandbox::User=root -o Debug::NoLocking=1)
if ! ls "$dir"/src/fio_"$version".dsc >/dev/null 2>&1; then
    apt-get "${aptopts[@]}" update >"$apt/update.log" 2>&1 ||
        { cat "$apt/update.log" >&2; echo "fio-build: apt update of the deb-src list failed" >&2; exit 1; }
    (cd "$dir/src" && apt-get "${aptopts[@]}" source --download-only "fio=$version") >"$apt/source.log" 2>&1 ||
        { cat "$apt/source.log" >&2; echo "fio-build: fetching fio $version's source failed" >&2; exit 1; }
fi
rm -rf "$dir/fio"
# dpkg-source verifies the .dsc's checksums of every file (the maintainer's signature needs
# debian-keyring, which is not installed: apt's signed index already vouched for the files).
dpkg-source -x "$dir/src/fio_$version.dsc" "$dir/fio" >"$dir/unpack.log" 2>&1 ||
    { cat "$dir/unpack.log" >&2; echo "fio-build: unpacking fio failed" >&2; exit 1; }
cd "$dir/fio"
# Only the core and its built-in engines: the engine under test is loaded as external:...
./configure --disable-native --disable-numa --disable-rdma --disable-rados --disable-rbd \
    --disable-http --disable-gfapi --disable-pmem --disable-xnvme --disable-libzbc \
    --disable-tcmalloc --disable-dfs --disable-libnfs --disable-lex >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log" >&2; echo "fio-build: configure failed" >&2; exit 1; }
make -j2 fio >"$dir/make.log" 2>&1 ||
    { tail -50 "$dir/make.log" >&2; echo "fio-build: make failed" >&2; exit 1; }
touch "$stamp"
echo "$dir/fio"
