#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs the Debian packages remora needs. Idempotent: does nothing when everything is
# already there.
#   scripts/install-deps.sh             everything: build, run, test, package, fio engine
#                                       (scripts/test.sh and .ci/run use this)
#   scripts/install-deps.sh --minimal   build and run the library, the remora command and the
#                                       examples (scripts/demo.sh)
#   scripts/install-deps.sh --fio       --minimal, plus what scripts/fio-build.sh needs to build
#                                       fio for the fio engine (and python3 for its test)
# Packages are installed without their recommendations (--no-install-recommends).
set -euo pipefail
# The library, the command and the examples: compiler, CMake, libfabric, tl::expected,
# libsodium, and the command's CLI11, fmt and nlohmann-json.
minimal=(cmake g++ make pkg-config libfabric-dev libexpected-dev libsodium-dev libcli11-dev
         libfmt-dev nlohmann-json3-dev)
# fio 3.33 from Debian's source package (scripts/fio-build.sh), and the engine tests' python3
# and ss (iproute2).
fio=(gcc dpkg-dev xz-utils debian-archive-keyring python3 iproute2)
# The tests, the checks and the packages: GoogleTest and Google Benchmark, fi_info, clang-format,
# clang 14 with its sanitizer and libFuzzer runtimes, doxygen, man pages (help2man, man-db),
# lintian for the Debian packages, gnuplot for `remora bench --plot` (about 50 packages of
# image libraries: not in --minimal).
tests=(libfabric-bin libgtest-dev libgmock-dev libbenchmark-dev clang-format clang-14
       libclang-rt-14-dev doxygen help2man man-db lintian gnuplot-nox)
case "${1:-}" in
    "") pkgs=("${minimal[@]}" "${fio[@]}" "${tests[@]}") ;;
    --minimal) pkgs=("${minimal[@]}") ;;
    --fio) pkgs=("${minimal[@]}" "${fio[@]}") ;;
    *) echo "usage: $0 [--minimal | --fio]" >&2; exit 64 ;;
esac
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
