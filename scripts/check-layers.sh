#!/usr/bin/env bash
# The dependency rule (STYLE.md "Dependencies point one way", SPEC Part III
# "One lifecycle"), checked by grep so that it cannot erode silently:
#
# 1. `jobs` imports nothing from `protocol`, `tools` or `server`: the
#    lifecycle knows no wire format, no tool and no transport.
# 2. The transports (`src/server/transport/**`) never reach into the job
#    table: they name no `JobTable`, `Pending`, `Window`, `Redact` or stdin
#    slot, and call no `.table()`. They call the verbs of `jobs::Jobs` and
#    render the answers.
# 3. `terminal` (the PTY screen and keys, SPEC §20) is a leaf: it names
#    nothing else in the crate, so jobs, tools and transports can all use it.
# 6. `files` (the file engine: path policy, commit, transfer pipeline) names
#    no tool, no server and no hyper type: every front-end calls it, it
#    knows none of them (`fetch.rs`, upload's HTTPS client, may use hyper's
#    client; it still names no tool or server).
# 4. The floor (`src/net/`, docs/ARCHITECTURE.md) names no job, tool, server
#    or protocol type: every listener stands on it, so it knows none of them.
# 5. No listener binds or accepts outside the floor: `TcpListener::bind` and
#    an accept loop live in src/net/accept.rs only (the ports proxy and the
#    HTTPS fetch connect out; they do not listen).
#
# 7. A server-sent event is framed by net::sse only, and a query (with
#    its percent-escapes) is decoded by net::query only: each listener
#    names its `+` rule, none has its own decoder.
#
# Prints every offending file:line with the rule it breaks; exits 1 if any.
# Docs and tests see docs/ARCHITECTURE.md. Run from anywhere.
set -uo pipefail
cd "$(dirname "$0")/.."

status=0

# check RULE DIR PATTERN [FILE]: report every line under DIR matching
# PATTERN (in any file but one named FILE, when given).
check() {
    local rule=$1 dir=$2 pattern=$3 hits
    hits=$(grep -rnE --include='*.rs' --exclude="${4:-}" "$pattern" "$dir")
    if [[ -n $hits ]]; then
        while IFS= read -r line; do
            echo "check-layers: $rule: $line" >&2
        done <<<"$hits"
        status=1
    fi
}

check "jobs must not import protocol, tools or server" \
    src/jobs '\bcrate::(protocol|tools|server)\b|\bsuper::super::(protocol|tools|server)\b'
check "the transport must not reach into the job table (use the verbs of jobs::Jobs)" \
    src/server/transport '\b(JobTable|Pending|Window|Redact|StdinSlot)\b|stdin[ _]slot|\.table\(\)'
check "terminal is a leaf and must not name the rest of the crate" \
    src/terminal '\bcrate::|\bsuper::super::'
# The file engine is below every front-end: it names no tool or server type,
check "files must not name tools or server (the front-ends call files, not the reverse)" \
    src/files '\bcrate::(tools|server)\b|\bsuper::super::(tools|server)\b'
# and no hyper type but in fetch.rs, the HTTPS client of upload's `file`.
check "files must not name hyper (a transport's types stay in the front-ends)" \
    src/files '\bhyper(_util)?\b' fetch.rs

check "the floor must not name jobs, tools, server or protocol" \
    src/net '\bcrate::(jobs|tools|server|protocol|tasks|files|policy)\b'
# One framer of a server-sent event and one query decoder, in the floor:
check "only the floor frames a server-sent event (net::sse)" \
    src/server '"event: |b"event: '
check "only the floor decodes a query or a percent-escape (net::query)" \
    src/server "split\('&'\)|fn percent_decode|replace\('\+'"
for dir in src/*/; do
    [[ $dir == src/net/ || $dir == src/fuzzing/ ]] && continue
    check "only the floor binds or accepts (src/net/accept.rs)" \
        "$dir" '\bTcpListener::bind\b|\.accept\(\)\.await|socket\.accept\(\)'
done

if [[ $status -eq 0 ]]; then
    echo "check-layers: ok"
fi
exit "$status"
