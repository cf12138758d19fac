#!/usr/bin/env bash
# Usage: scripts/leftovers.sh RUN_ID
# Fails (exit 1) if a process started by a test run is still alive: every process whose initial
# environment holds MCP_EXEC_TEST_RUN=RUN_ID (scripts/test.sh exports it, so every server, job,
# podman client and helper of the run inherits it, and tests/support/guard.rs passes it on even
# to servers started with a cleaned environment). Prints each one as `pid cmdline`.
# Processes that are on their way out get a few seconds to go. Run it without the variable
# itself (`env -u MCP_EXEC_TEST_RUN`), or it finds itself.
set -uo pipefail
id=${1:?usage: scripts/leftovers.sh RUN_ID}
entry="MCP_EXEC_TEST_RUN=$id"

scan() {
    local dir pid state
    for dir in /proc/[0-9]*; do
        pid=${dir#/proc/}
        [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
        # Zombies have no environment; their parent reaps them.
        state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "$dir/status" 2>/dev/null) || continue
        [[ $state == Z || -z $state ]] && continue
        # Kernel threads have no environment to read, other users' processes may be unreadable.
        if { tr '\0' '\n' <"$dir/environ"; } 2>/dev/null | grep -qxF -- "$entry"; then
            printf '%s %s\n' "$pid" "$({ tr '\0' ' ' <"$dir/cmdline"; } 2>/dev/null)"
        fi
    done
}

left=
for _ in $(seq 10); do
    left=$(scan)
    [[ -z $left ]] && exit 0
    sleep 0.5
done
echo "leftovers: processes of this test run are still alive (pid cmdline):" >&2
printf '%s\n' "$left" >&2
exit 1
