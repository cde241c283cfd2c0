#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs the Debian packages remora needs to build, test and run. Idempotent:
# does nothing when everything is already there.
set -euo pipefail
pkgs=(cmake g++ make pkg-config libfabric-dev libfabric-bin libexpected-dev libsodium-dev libgtest-dev
      libgmock-dev libbenchmark-dev libcli11-dev libfmt-dev nlohmann-json3-dev iproute2
      clang-format gnuplot-nox clang-14 libclang-rt-14-dev doxygen help2man man-db lintian
      gcc dpkg-dev xz-utils debian-archive-keyring python3)  # gcc..python3: fio (fio-build.sh)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
