#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A region file cannot kill `remora serve`:
#  - a second serve on the same file is refused with one line naming the first one's pid, and the
#    first keeps serving;
#  - another process truncating the file (coreutils truncate, then truncate(2) that waits) makes
#    serve stop first: it closes its clients, persists, unmaps and exits 1 saying why, never by
#    SIGBUS; the truncation lands after it;
#  - a sparse file larger than the free space (64 MiB on an 8 MiB tmpfs) is refused at start
#    with "No space left on device", and a --create that does not fit leaves no file behind.
# Root only (a tmpfs mounted in a mount namespace of its own, unshare -m): exit 77 otherwise.
#   serve_region_file.sh REMORA PROVIDER
set -u
if [ -z "${REMORA_REGION_MNTNS:-}" ]; then
    unshare -m true 2>/dev/null || { echo "SKIP: unshare -m needs root"; exit 77; }
    REMORA_REGION_MNTNS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
remora=$1
provider=$2
# shellcheck source=tests/cli/serve_lib.sh
. "$(dirname "$0")/serve_lib.sh"

# wait_exit PID SECONDS: waits for PID (a child) to end; sets $exit_rc.
wait_exit() {
    for _ in $(seq $(($2 * 20))); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.05
    done
    kill -0 "$1" 2>/dev/null && fail "pid $1 still running after $2 s"
    exit_rc=0
    wait "$1" || exit_rc=$?
}

# ---- two targets on one file
start_serve --region "file:$dir/r.bin:1M" --create
first=$serve_pid
[ "$(stat -c %a "$dir/r.bin")" = 600 ] || fail "a created region file is not mode 0600"
expect_run --exit 1 --stderr-lines 1 --stderr "already served by another region \(pid $first\)" \
    -- r serve --listen 127.0.0.1:0 --region "file:$dir/r.bin" || fail "a second serve on the file"
kill -0 "$first" 2>/dev/null || fail "the first serve died"
echo "still here" > "$dir/data"
expect_run --stdin "$dir/data" -- r put -t "127.0.0.1:$port" --offset 4096 || fail "put after the refusal"

# ---- another process truncates the file under serve
expect_run --exit 1 --stderr "Resource temporarily unavailable" -- truncate -s 0 "$dir/r.bin" ||
    fail "truncate did not wait for serve"
wait_exit "$first" 10
# Exit 1 alone does not tell: a SIGBUS handler that libfabric loads (libpsm2's) exits 1 too.
[ "$exit_rc" -eq 1 ] || fail "serve exit status $exit_rc after the truncation attempt"
grep -q "signal 7" "$dir/serve.log" && fail "serve died of SIGBUS"
grep -q "another process opened $dir/r.bin" "$dir/serve.log" || fail "serve did not say why"
grep -q "region persisted" "$dir/serve.log" || fail "serve did not persist before stopping"
no_sanitizer_report "$dir/serve.log" || fail "serve"
[ "$(stat -c %s "$dir/r.bin")" -eq 1048576 ] || fail "the file changed while serve held it"
cmp <(tail -c +4097 "$dir/r.bin" | head -c 11) "$dir/data" || fail "the put is not in the file"
# The same with a truncation that waits (truncate(2) by path): serve stops, then it lands.
start_serve --region "file:$dir/r.bin"
python3 -c 'import os, sys; os.truncate(sys.argv[1], 4096)' "$dir/r.bin" &
trunc=$!
wait_exit "$serve_pid" 10
[ "$exit_rc" -eq 1 ] || fail "serve exit status $exit_rc under a waiting truncation"
grep -q "another process opened" "$dir/serve.log" || fail "serve did not stop for the truncation"
wait_exit "$trunc" 10
[ "$exit_rc" -eq 0 ] || fail "the waiting truncation failed"
[ "$(stat -c %s "$dir/r.bin")" -eq 4096 ] || fail "the truncation did not land after serve"

# ---- a file system with less free space than the region
mkdir "$dir/small"
mount -t tmpfs -o size=8M tmpfs "$dir/small" || fail "mount tmpfs"
truncate -s 64M "$dir/small/sparse.bin"
expect_run --exit 1 --stderr-lines 1 --stderr "No space left on device" \
    -- r serve --listen 127.0.0.1:0 --region "file:$dir/small/sparse.bin" ||
    fail "serve on a sparse file larger than the free space"
[ "$(stat -c %b "$dir/small/sparse.bin")" -eq 0 ] || fail "the refused open kept blocks"
expect_run --exit 1 --stderr-lines 1 --stderr "No space left on device" \
    -- r serve --listen 127.0.0.1:0 --region "file:$dir/small/new.bin:64M" --create ||
    fail "--create larger than the free space"
[ ! -e "$dir/small/new.bin" ] || fail "a failed --create left its file behind"
umount "$dir/small"
echo "region files on $provider: ok"
