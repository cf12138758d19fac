#!/usr/bin/env bash
# cargo's runner for the test binaries of scripts/test.sh (set through
# CARGO_TARGET_<triple>_RUNNER there): runs a libtest binary with each test's
# time on its result line (`test NAME ... ok <1.234s>`) and appends those lines
# to $MCP_EXEC_TEST_TIMES, which scripts/slowest-tests.sh reads.
#
# `--report-time` is an unstable libtest flag; stable libtest accepts it when
# RUSTC_BOOTSTRAP is set in the test binary's own environment. Only the test
# binary sees it: nothing is compiled with it, so no build is invalidated.
set -uo pipefail
bin=$1
shift
if [[ -z ${MCP_EXEC_TEST_TIMES:-} ]] || [[ " $* " == *" --list "* ]]; then
    exec "$bin" "$@"
fi
RUSTC_BOOTSTRAP=1 "$bin" "$@" -Z unstable-options --report-time \
    > >(tee >(grep -E '^test .* <[0-9.]+s>$' >>"$MCP_EXEC_TEST_TIMES"))
