#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Each man page renders cleanly: `groff -ww -man` (all warnings) and `man --warnings -l` print
# nothing on stderr, and the page has its NAME, SYNOPSIS and OPTIONS sections.
#   man.sh PAGE.1...
set -euo pipefail
[ $# -gt 0 ] || { echo "man: no page given" >&2; exit 1; }
failed=0
for page in "$@"; do
    [ -s "$page" ] || { echo "man: $page: missing or empty" >&2; failed=1; continue; }
    warnings=$( {
        groff -ww -man -Tutf8 "$page" >/dev/null
        LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" >/dev/null
    } 2>&1)
    if [ -n "$warnings" ]; then
        echo "man: $page: $warnings" >&2
        failed=1
    fi
    text=$(LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$page" 2>/dev/null)
    for section in NAME SYNOPSIS OPTIONS; do
        grep -q "^$section\$" <<<"$text" || { echo "man: $page: no $section section" >&2; failed=1; }
    done
done
[ "$failed" -eq 0 ] && echo "man: $# page(s) render without warnings"
exit "$failed"
