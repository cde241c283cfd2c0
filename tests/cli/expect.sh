#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A command as one test: expect.sh [--exit N] [--stderr ERE]... [--stderr-not ERE]...
#   [--stdout ERE]... [--stderr-lines N] -- COMMAND ARGS...   (see lib.sh). Exits 0 when every
#   check holds.
set -u
# shellcheck source=tests/cli/lib.sh
. "$(dirname "$0")/lib.sh"
expect_run "$@" || exit 1
echo "ok: $*"
