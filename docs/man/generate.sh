#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Writes the man pages of the remora command with help2man from its own --help: remora(1) and
# one page per subcommand (remora-info(1), remora-serve(1), ...), so the pages say what the
# command says. docs/man/remora.h2m adds the sections --help has no room for.
#   generate.sh REMORA_BINARY VERSION OUTPUT_DIR
set -euo pipefail
bin=$(realpath "$1")
version=$2
out=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$bin" "$work/remora"
export PATH="$work:$PATH"
# Reproducible pages: the date is the source's, not the build's.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$here" log -1 --format=%ct 2>/dev/null || echo 0)}
h2m=(help2man --no-info --version-string="$version" --include="$here/remora.h2m")

# help2man fills indented blocks into one paragraph and leaves "Examples:" and "Exit status:"
# inside the options when no blank line comes before them: give them their own sections and keep
# an example a line.
tidy() {
    awk '
        /^Examples:$/ { print ".SH EXAMPLES"; next }
        /^Exit status: / { print ".SH \"EXIT STATUS\""; sub(/^Exit status: /, ""); print; next }
        /^\.IP$/ { lines = 1; print; next }
        /^\./ { lines = 0; print; next }
        lines { print; print ".br"; next }
        { print }
    ' "$1" >"$1.tmp"
    mv "$1.tmp" "$1"
}

"${h2m[@]}" --name="remote memory access over fabrics (libfabric)" --output="$out/remora.1" remora
tidy "$out/remora.1"

# subcommand:summary (the page's NAME line)
subs=(
    "info:providers and NICs usable here, and what remora does on each"
    "serve:expose a memory or file region to remora clients"
    "put:copy stdin into a served region and flush it to durability"
    "get:print a range of a served region"
    "keygen:write a random admission key"
    "bench:measure remora's operations against a loopback or remote target"
)
for entry in "${subs[@]}"; do
    sub=${entry%%:*}
    summary=${entry#*:}
    printf '#!/bin/sh\nexec remora %s "$@"\n' "$sub" >"$work/remora-$sub"
    chmod +x "$work/remora-$sub"
    "${h2m[@]}" --name="$summary" --output="$out/remora-$sub.1" "remora-$sub"
    tidy "$out/remora-$sub.1"
done
