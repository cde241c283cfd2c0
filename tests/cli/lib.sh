#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# tests/cli/lib.sh — one way to check a command as a user sees it: its exact exit code, what
# it prints, and no sanitizer report. Sourced by the CLI test scripts and by expect.sh.
#
#   expect_run [options] -- COMMAND ARGS...
#     --exit N             the exact exit code (default 0); a crash (128+signal) never matches
#     --stderr ERE         stderr must match ERE (grep -E); may be given more than once
#     --stdout ERE         stdout must match ERE; may be given more than once
#     --stderr-not ERE     stderr must not match ERE; may be given more than once
#     --stderr-lines N     stderr must have exactly N lines
#     --stdin FILE         feed FILE on standard input (default /dev/null)
#     --out FILE           keep stdout in FILE (to compare it afterwards)
#   Returns 0 when every check holds; otherwise prints what differed, stderr and stdout, and
#   returns 1. Sets $expect_took to the command's wall time in whole seconds.
#
#   no_sanitizer_report FILE...   fails (returns 1) when a file holds an ASan/LSan/UBSan/TSan report

sanitizer_pattern='ERROR: (Address|Leak|Thread|Memory)Sanitizer|WARNING: ThreadSanitizer|runtime error:|UndefinedBehaviorSanitizer'

no_sanitizer_report() {
    local f
    for f in "$@"; do
        if [ -f "$f" ] && grep -Eq "$sanitizer_pattern" "$f"; then
            echo "FAIL: sanitizer report in $f:"
            grep -E -A20 "$sanitizer_pattern" "$f" | head -40
            return 1
        fi
    done
    return 0
}

expect_run() {
    local want_exit=0 stderr_lines= stdin=/dev/null out=
    local -a err_res=() out_res=() not_res=()
    while [ $# -gt 0 ]; do
        case $1 in
            --exit) want_exit=$2; shift 2 ;;
            --stderr) err_res+=("$2"); shift 2 ;;
            --stdout) out_res+=("$2"); shift 2 ;;
            --stderr-not) not_res+=("$2"); shift 2 ;;
            --stderr-lines) stderr_lines=$2; shift 2 ;;
            --stdin) stdin=$2; shift 2 ;;
            --out) out=$2; shift 2 ;;
            --) shift; break ;;
            *) echo "expect_run: unknown option $1"; return 2 ;;
        esac
    done
    [ $# -gt 0 ] || { echo "expect_run: no command"; return 2; }
    local tmp
    tmp=$(mktemp -d)
    local start rc=0
    start=$(date +%s)
    "$@" < "$stdin" > "$tmp/out" 2> "$tmp/err" || rc=$?
    expect_took=$(( $(date +%s) - start ))
    [ -n "$out" ] && cp "$tmp/out" "$out"
    local bad=()
    [ "$rc" -eq "$want_exit" ] || bad+=("exit code $rc, expected $want_exit")
    local re
    for re in "${err_res[@]}"; do
        grep -Eq -- "$re" "$tmp/err" || bad+=("stderr does not match /$re/")
    done
    for re in "${not_res[@]}"; do
        grep -Eq -- "$re" "$tmp/err" && bad+=("stderr matches /$re/")
    done
    for re in "${out_res[@]}"; do
        grep -Eq -- "$re" "$tmp/out" || bad+=("stdout does not match /$re/")
    done
    if [ -n "$stderr_lines" ]; then
        local n
        n=$(wc -l < "$tmp/err")
        [ "$n" -eq "$stderr_lines" ] || bad+=("stderr has $n lines, expected $stderr_lines")
    fi
    grep -Eq "$sanitizer_pattern" "$tmp/err" "$tmp/out" && bad+=("a sanitizer report")
    if [ ${#bad[@]} -gt 0 ]; then
        echo "FAIL: $*"
        printf '  - %s\n' "${bad[@]}"
        echo "  stderr:"; head -c 4000 "$tmp/err" | sed 's/^/    /'
        echo "  stdout:"; head -c 2000 "$tmp/out" | sed 's/^/    /'
        rm -rf "$tmp"
        return 1
    fi
    rm -rf "$tmp"
    return 0
}
