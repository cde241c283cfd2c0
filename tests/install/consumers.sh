#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds and runs the find_package(remora) consumers (tests/install/consumer): remora::remora and
# remora::shared, each from C++ and from C, then a C-only project against remora::shared. The
# programs are compiled with the consumer's own default flags (no -std=): C++20 must come from
# the targets. consumer_shared must load libremora.so.0 from the directory WANT_LIB names (an
# extended regular expression).
#   consumers.sh WHAT WORK WANT_LIB [CMAKE_ARGS...]
#   WHAT: the name printed for this package (build tree, install, deb); WORK: a scratch folder
set -euo pipefail
what=$1 work=$2 want_lib=$3
shift 3
src=$(cd "$(dirname "$0")" && pwd)/consumer
cmake -S "$src" -B "$work/consumer" "$@" >"$work/consumer.log" 2>&1 ||
    { cat "$work/consumer.log" >&2; echo "consumers: $what: configure failed" >&2; exit 1; }
cmake --build "$work/consumer" >>"$work/consumer.log" 2>&1 ||
    { cat "$work/consumer.log" >&2; echo "consumers: $what: build failed" >&2; exit 1; }
for p in consumer:"remora::remora, C++" consumer_shared:"remora::shared, C++" \
         consumer_c:"remora::shared, C" consumer_c_static:"remora::remora, C"; do
    "$work/consumer/${p%%:*}" >/dev/null || { echo "consumers: $what: ${p#*:}: ${p%%:*} failed" >&2; exit 1; }
    echo "consumers: $what: ${p#*:}: built and ran"
done
# ldd's output first: `ldd | grep -q` fails at random under pipefail (grep -q stops reading, ldd
# gets SIGPIPE).
linked=$(ldd "$work/consumer/consumer_shared")
grep -Eq "libremora\.so\.0 => $want_lib" <<<"$linked" ||
    { echo "consumers: $what: consumer_shared does not load libremora.so.0 from $want_lib:" >&2
      echo "$linked" >&2; exit 1; }
cmake -S "$src" -B "$work/consumer-c" -DCONSUMER_C_ONLY=ON "$@" >"$work/consumer-c.log" 2>&1 &&
    cmake --build "$work/consumer-c" >>"$work/consumer-c.log" 2>&1 ||
    { cat "$work/consumer-c.log" >&2; echo "consumers: $what: the C-only project failed" >&2; exit 1; }
"$work/consumer-c/consumer_c" || { echo "consumers: $what: C-only consumer_c failed" >&2; exit 1; }
echo "consumers: $what: remora::shared from a C-only project: built and ran"
