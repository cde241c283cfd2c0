#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The command's arguments as a user meets them: every size, length and offset takes K/M/G/T
# (powers of 1024); negative, zero and oversized values, bad region specs and addresses without
# a port or with one out of range exit 64 with one line naming the option, before anything is
# opened; an unknown provider lists the ones there are, and a connected provider asked for RDM
# names its RDM form; a failed listen or connect names HOST:PORT and no library internals;
# --version; perftest's and fabtests' habits (-D, -a, -S, -I, --report_gbits) and where
# they went (-q, -d DEVICE, get -n); one meaning per short option across subcommands (-o, -a,
# -l); bench's Gb/s column and --size all.
#   arguments.sh REMORA PROVIDER VERSION
set -u
remora=$1
provider=$2
version=$3
# shellcheck source=tests/cli/serve_lib.sh
. "$(dirname "$0")/serve_lib.sh"

bad() {  # bad ERE ARGS...: exit 64, one line on stderr matching ERE, no internals
    local re=$1
    shift
    expect_run --exit 64 --stderr-lines 1 --stderr "$re" --stderr-not "(^|[^a-z])fi_[a-z]|error::data" \
        -- "$remora" "$@" || fail "remora $* not refused as a bad argument"
}

# ---- --version: the library's version
expect_run --stdout "^remora $version\$" --stderr-lines 0 -- "$remora" --version ||
    fail "--version"

# ---- sizes: one parser for every size, length and offset
bad "^remora [a-z]+: --size: '4X': unknown suffix 'X' \(K, M, G, T" bench -p "$provider" --size 4X
bad "^remora [a-z]+: --size: '-1' is negative" bench -p "$provider" --size=-1
bad "^remora [a-z]+: --size: '0': 0 bytes mean nothing" bench -p "$provider" --size 0
bad "^remora [a-z]+: --size: '128M' is too large: at most 64 MiB" bench -p "$provider" --size 128M
bad "^remora [a-z]+: --size: '1.5K': a whole number is needed" bench -p "$provider" --size 1.5K
bad "^remora [a-z]+: --size: '99999999999999999999' is too large" bench -p "$provider" --size 99999999999999999999
bad "^remora [a-z]+: --size: '20000000T' is too large" bench -p "$provider" --size 20000000T
bad "^remora [a-z]+: --offset: '-1' is negative" get -p "$provider" --offset=-1
bad "^remora [a-z]+: --offset: '-5' is negative" put -p "$provider" --offset=-5
bad "^remora [a-z]+: --length: '0': 0 bytes mean nothing" get -p "$provider" --length 0
bad "^remora serve: --region: region 'mem:64X': '64X': unknown suffix 'X'" \
    serve -p "$provider" --region mem:64X
bad "^remora [a-z]+: --region: region 'mem:1T' is too large: 1 TiB is more than this machine's memory" \
    serve -p "$provider" --region mem:1T
bad "^remora [a-z]+: --region: region 'mem:2T' is too large: at most 1 TiB" serve -p "$provider" --region mem:2T
bad "^remora [a-z]+: --region: region 'mem:0': 0 bytes hold nothing" serve -p "$provider" --region mem:0
bad "^remora [a-z]+: --region: region 'disk:1M' is neither mem:SIZE nor file:PATH" serve --region disk:1M
bad "^remora [a-z]+: --key-file: 'ro=$dir/none': cannot read" serve --key-file "ro=$dir/none"

# ---- addresses: HOST:PORT, the port 1..65535 (0 for a listener: any free port)
bad "^remora [a-z]+: --target: '127.0.0.1' is not HOST:PORT \(no port\)" get -p "$provider" -t 127.0.0.1
bad "^remora [a-z]+: --target: '127.0.0.1:99999': port '99999' is not a number from 0 to 65535" \
    get -p "$provider" -t 127.0.0.1:99999
bad "^remora [a-z]+: --target: '127.0.0.1:0': port 0 names no target" put -p "$provider" -t 127.0.0.1:0
bad "^remora [a-z]+: --target: '127.0.0.1' is not HOST:PORT" bench -p "$provider" -t 127.0.0.1
bad "^remora [a-z]+: --listen: '127.0.0.1:70000': port '70000'" serve -p "$provider" --listen 127.0.0.1:70000

# ---- providers: the ones there are; RDM names of connected providers
bad "^remora get: --provider: no provider 'verbz' on this machine; providers here: msg: .*tcp.*; rdm: " \
    get -p verbz
bad "^remora bench: --provider: 'tcp' offers connected endpoints \(msg\), not RDM: its RDM form is 'tcp;ofi_rxm'" \
    bench -e rdm -p tcp
bad "^remora serve: --provider: 'tcp;ofi_rxm' offers RDM endpoints only" serve -p "tcp;ofi_rxm"

# ---- perftest and fabtests habits, and where ours went
bad "^remora [a-z]+: -q: remora has no -q: perftest's -q QPS is -c/--connections" bench -q 4
bad "^remora [a-z]+: --duration: 'mlx5_0' is not a number of seconds" bench -d mlx5_0
bad "^remora [a-z]+: -n: get's length is -l/--length" get -n 5
# A short option means one thing across subcommands: -o is bench's --op (fabtests' -o), -a its
# all sizes (perftest's -a), -l get's --length; the others say where theirs went.
bad "^remora get: -o: the offset is --offset \(-o is bench's --op" get -p "$provider" -o 0
bad "^remora put: -o: the offset is --offset \(-o is bench's --op" put -p "$provider" -o 0
bad "^remora serve: -l: serve listens at --listen HOST:PORT \(-l is get's --length\)" serve -l 127.0.0.1:0
bad "^remora info: -a: the local address is --address \(-a is bench's all sizes" info -a 127.0.0.1
bad "^remora [a-z]+: --op: fly not in" bench --op fly
# -S (fabtests), -I (fabtests' iterations), -D (perftest's duration) and --report_gbits run;
# the table has a Gb/s column.
expect_run --stderr-lines 0 --stdout "^provider +op +size .* MiB/s +Gb/s " \
    --stdout "^$provider +write +4096 +1 " -- "$remora" bench -p "$provider" --op write -S 4K -I 200 \
    --report_gbits || fail "-S 4K -I 200 --report_gbits"
expect_run --stderr-lines 0 --stdout "^$provider +read +65536 " \
    -- "$remora" bench -p "$provider" --op read --size 64KiB -D 0.1 || fail "--size 64KiB -D 0.1"
# JSON keeps its keys and adds gbit_per_s.
expect_run --stderr-lines 0 --stdout "\"mib_per_s\": *[0-9.]+" --stdout "\"gbit_per_s\": *[0-9.]+" \
    -- "$remora" bench -p "$provider" --op write --size 1M --count 50 --json || fail "gbit_per_s"
# --size all (perftest's -a): powers of two from 2 B to 8 MiB; all:MAX to MAX.
expect_run --stderr-lines 0 --stdout "^$provider +write +2 " --stdout "^$provider +write +1024 " \
    --stdout "^$provider +write +8388608 " -- "$remora" bench -p "$provider" --op write -a --count 20 ||
    fail "-a"
expect_run --out "$dir/all" --stderr-lines 0 \
    -- "$remora" bench -p "$provider" --op write --size all:64 --count 20 || fail "--size all:64"
[ "$(grep -cE "^$provider +write " "$dir/all")" -eq 6 ] || fail "--size all:64: not 2, 4 .. 64"

# ---- against a serve: lengths with suffixes, failures that name HOST:PORT
start_serve --region mem:2M
t=127.0.0.1:$port
head -c 1024 /dev/urandom > "$dir/in.bin"
expect_run --stdin "$dir/in.bin" --exit 2 -- r put -t "$t" --offset 1K || fail "put --offset 1K"
expect_run --out "$dir/out.bin" --stderr-lines 0 -- r get -t "$t" --offset 1KiB -l 1K || fail "get -l 1K"
cmp "$dir/in.bin" "$dir/out.bin" || fail "get --offset 1KiB -l 1K returned other bytes"
expect_run --out "$dir/mib.bin" --stderr-lines 0 -- r get -t "$t" --offset 0 -l 1M || fail "get -l 1M"
[ "$(stat -c %s "$dir/mib.bin")" -eq 1048576 ] || fail "get -l 1M printed other than 1 MiB"
# A second serve on the same port: the address it could not take, and why.
expect_run --exit 1 --stderr-lines 1 --stderr-not "(^|[^a-z])fi_[a-z]" \
    --stderr "^remora serve: cannot listen on $t: the address is in use" \
    -- "$remora" serve -p "$provider" --listen "$t" || fail "a second serve on $t"
stop_serve
# Nobody listens: the address, not the library's words.
expect_run --exit 1 --stderr-lines 1 --stderr-not "(^|[^a-z])fi_[a-z]|error::data" \
    --stderr "^remora get: nobody listens at $t \(is \`remora serve\` running there\?\)$" \
    -- r get -t "$t" -l 8 || fail "get with nobody listening"
# A serve that refuses the client's service depth (--depth 1; a client asks for 8): the target's
# refusal in the user's words, no "bytes of private data in error::data()".
start_serve --region mem:1M --depth 1
expect_run --exit 1 --stderr-lines 1 --stderr-not "error::data|(^|[^a-z])fi_[a-z]" \
    --stderr "^remora get: the target at 127.0.0.1:$port refused the connection \(its log says why\)$" \
    -- r get -t "127.0.0.1:$port" -l 8 || fail "a refused get"
stop_serve
echo "ok: arguments"
