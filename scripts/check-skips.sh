#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fails when a test is skipped on every provider it runs on: ctest counts a skip as a pass, so
# a check that no provider here can run would otherwise look green for ever.
#   check-skips.sh CTEST-LOG     (the output of `ctest`, one "Test #N: NAME ... STATUS" a line)
# A parameterised test NAME/PROVIDER is grouped by NAME; a test that is not parameterised is its
# own group. Prints each group whose every run was skipped, and exits 1 if there is one.
set -euo pipefail
log=$1
awk '
    match($0, /Test +#[0-9]+: [^ ]+ /) {
        name = substr($0, RSTART, RLENGTH)
        sub(/^Test +#[0-9]+: /, "", name); sub(/ $/, "", name)
        group = name
        sub(/\/[A-Za-z0-9_;]+$/, "", group)
        runs[group]++
        if ($0 ~ /\*\*\*Skipped|  Skipped /) skipped[group]++
    }
    END {
        bad = 0
        for (g in runs) {
            if (skipped[g] == runs[g]) {
                printf "check-skips: %s is skipped on every provider it runs on (%d run%s)\n", g, runs[g], (runs[g] > 1 ? "s" : "")
                bad = 1
            } else if (skipped[g] > 0) {
                printf "check-skips: %s skipped on %d of %d providers (runs on the others)\n", g, skipped[g], runs[g]
            }
        }
        n = 0; for (g in runs) n++
        if (n == 0) { print "check-skips: no test results in the log"; exit 1 }
        exit bad
    }' "$log"
