#!/usr/bin/env bash
# Prints the slowest tests of a run, with their times, from the result lines
# scripts/timed-runner.sh collected: `slowest-tests.sh FILE [N]` (N = 20).
set -uo pipefail
file=$1
n=${2:-20}
[[ -s $file ]] || { echo "slowest tests: no timed results in $file"; exit 0; }
echo "== the $n slowest tests"
# awk takes the first N itself: `head` would close the pipe early, and sort's
# SIGPIPE would fail the pipeline (pipefail) and with it the caller's EXIT trap.
sed -E 's/^test (.*) \.\.\. ([a-zA-Z]+) <([0-9.]+)s>$/\3 \2 \1/' "$file" |
    sort -rn | awk -v n="$n" 'NR <= n { printf "%9.2f s  %-7s %s\n", $1, $2, $3 }'
exit 0
