#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# SPDX licence tags: every source, header, script and CMake file of the repository starts with
#   // SPDX-License-Identifier: BSD-3-Clause     (C and C++: .c .h .cpp .hpp)
#   # SPDX-License-Identifier: BSD-3-Clause      (scripts, CMakeLists.txt, *.cmake, *.cmake.in, Doxyfile.in)
# as its first line, or its second after a shebang (#!). One exception: the fio engine
# (fio/remora.c) is GPL-2.0-only, as it is built against fio's GPL-2.0 headers (the library it
# links, remora, is BSD-3-Clause, which GPL-2.0 code may link). Scripts are *.sh, *.py and any file whose
# first line is a shebang (.ci/run). Files are those git knows plus untracked ones not ignored.
#   scripts/spdx.sh --check   list the files without the tag (or with another licence); exit 1 if any
#   scripts/spdx.sh --fix     insert the tag where it is missing (a wrong one is reported, not changed)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
if [ "$mode" != "--check" ] && [ "$mode" != "--fix" ]; then
    echo "usage: scripts/spdx.sh --check|--fix" >&2
    exit 64
fi
id="SPDX-License-Identifier: BSD-3-Clause"

# Prints the comment marker for a file ("//" or "#"), or nothing when the file is not covered.
marker() {
    local f=$1
    case "$f" in
        *.c | *.h | *.cpp | *.hpp) echo "//" ;;
        *.sh | *.py | */CMakeLists.txt | CMakeLists.txt | *.cmake | *.cmake.in | */Doxyfile.in) echo "#" ;;
        *)
            if [ -f "$f" ] && head -c 2 "$f" | grep -q '^#!'; then echo "#"; fi
            ;;
    esac
}

missing=0
wrong=0
fixed=0
while IFS= read -r -d '' f; do
    [ -f "$f" ] || continue  # deleted in the work tree
    m=$(marker "$f")
    [ -n "$m" ] || continue
    want="$m $id"
    [ "$f" = fio/remora.c ] && want="$m SPDX-License-Identifier: GPL-2.0-only"
    line=1
    head -c 2 "$f" | grep -q '^#!' && line=2
    got=$(sed -n "${line}p" "$f")
    [ "$got" = "$want" ] && continue
    if head -n 3 "$f" | grep -Eq '^(//|#) *SPDX-License-Identifier:'; then
        echo "spdx: $f: has an SPDX tag other than '$want' on line $line" >&2
        wrong=$((wrong + 1))
        continue
    fi
    if [ "$mode" = "--check" ]; then
        echo "spdx: $f: line $line is not '$want'" >&2
        missing=$((missing + 1))
        continue
    fi
    tmp=$(mktemp "$f.spdx.XXXXXX")
    if [ "$line" = 2 ]; then
        { head -n 1 "$f"; echo "$want"; tail -n +2 "$f"; } >"$tmp"
    else
        { echo "$want"; cat "$f"; } >"$tmp"
    fi
    chmod --reference="$f" "$tmp"
    mv "$tmp" "$f"
    fixed=$((fixed + 1))
done < <(git ls-files -z --cached --others --exclude-standard)

if [ "$mode" = "--fix" ]; then
    echo "spdx: tagged $fixed file(s)"
fi
if [ "$missing" -gt 0 ] || [ "$wrong" -gt 0 ]; then
    echo "spdx: $missing file(s) without the tag, $wrong with another one; scripts/spdx.sh --fix adds it" >&2
    exit 1
fi
[ "$mode" = "--check" ] && echo "spdx: every source, header, script and CMake file is tagged $id"
exit 0
