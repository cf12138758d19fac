#!/usr/bin/env bash
# The dependency rule (STYLE.md "Dependencies point one way", docs/ARCHITECTURE.md
# "The dependency rule"), checked by grep so that it cannot erode silently:
#
# 1. `jobs` imports nothing from `protocol`, `tools` or `server`: the
#    lifecycle knows no wire format, no tool and no transport.
# 2. The transports (`src/server/transport/**`) never reach into the job
#    table: they name no `JobTable`, `Pending`, `Window`, `Redact` or stdin
#    slot, and call no `.table()`. They call the verbs of `jobs::Jobs` and
#    render the answers.
# 3. `terminal` (the PTY screen and keys) is a leaf: it names nothing else
#    in the crate, so jobs, tools and transports can all use it.
# 4. `files` (the file engine: path policy, commit, transfer pipeline) names
#    no tool, no server and no hyper type: every front-end calls it, it
#    knows none of them (`fetch.rs`, upload's HTTPS client, may use hyper's
#    client; it still names no tool or server).
# 5. The floor (`src/net/`, docs/ARCHITECTURE.md) names no job, tool, server
#    or protocol type: every listener stands on it, so it knows none of them.
# 6. `tools` names no `server` type: a tool reaches its server through
#    `tools::Host` (the job service, the policies, the settings), never the
#    server's state (`App`), a session or a transport; and nothing in tools
#    holds a `Weak` back to the server.
# 7. One wait loop per table: the "enable the notification, look, wait"
#    loop is written twice in the crate, `JobTable::wait_for` (src/jobs/table.rs)
#    for the jobs and `Tasks::wait_for` (src/tasks/mod.rs) for the MCP Tasks;
#    everything else that waits passes them a check (no `.notified()` or
#    `.enable()` elsewhere).
# 8. No listener binds or accepts outside the floor: `TcpListener::bind` and
#    an accept loop live in src/net/accept.rs only (the ports proxy and the
#    HTTPS fetch connect out; they do not listen).
# 9. A launch is one typed request (`jobs::LaunchRequest`), validated in one
#    step: only that step builds a `jobs::Launch`, and the proto front-ends
#    (envd, sandboxd) fill the request from their fields, never through the
#    JSON reader of `execute` (`tools::execute::parse`, `tools::Args`) nor
#    JSON built for it (`json!`, `serde_json::Map`/`Value`) outside their
#    tests.
# 10. A signal death becomes an exit code (128 + N) in one place:
#    `jobs::result::signal_exit_code`.
# 11. A started job's initial stdin is written by `jobs` (`Jobs::launch`):
#    no front-end takes it out of `Launched::Started` to write it itself
#    (`execute` alone asks for it, with `launch_leaving_stdin`).
# 12. One stream loop (`Jobs::stream`, src/jobs/stream.rs): `Follow::next`
#    is private to `jobs` (the one `pub async fn next` in follow.rs is the
#    observer's `RawFollow`), and the stream front-ends (POST /exec, envd,
#    sandboxd) run no keep-alive timer and tear no job down themselves.
# 13. The kernel's socket diagnostics (`NETLINK_SOCK_DIAG`) are written and
#    read in init/src/sockdiag.rs only (ports and the floor's peer rule).
# 14. The front-ends are siblings: http, envd and sandboxd (under
#    src/server/transport/) name none of the others; what they share is the
#    floor (src/net/) or transport/file_http.rs (files over HTTP), and the
#    sandboxd route on the MCP listener is mounted by server::run.
# 15. No front-end frames or parses a length-prefixed message envelope by
#    hand: gRPC's and Connect's 5-byte envelope is src/net/envelope.rs's
#    (its big-endian length is the only such integer a transport has).
#
# 16. A server-sent event is framed by net::sse only, and a query (with
#    its percent-escapes) is decoded by net::query only: each listener
#    names its `+` rule, none has its own decoder.
# 17. A `multipart/form-data` body is parsed by net::multipart only (its
#    delimiter, CRLF `--` boundary, is built nowhere else): a front-end
#    reads a form's parts through transport/file_http.rs.
# 18. One meaning per word (docs/ARCHITECTURE.md, "Words"): no type is
#    called plain `Error`, `Reply` or `Status`; "watch" is inotify only.
# 19. The documents call the installed binary: README.md and docs/ run
#    `mcp-exec` from PATH (what `scripts/install.sh` leaves), never a build
#    output such as target/release/mcp-exec (scripts/doc-examples.sh runs
#    every shell block of them, and fails on a fence that names no language).
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
    hits=$(grep -rnHE --include='*.rs' --exclude="${4:-}" "$pattern" "$dir")
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

check "tools must not name server types (a tool reaches its server through tools::Host)" \
    src/tools '\bcrate::server\b|\bsuper::super::server\b|\bApp\b|\bWeak<'

check "the floor must not name jobs, tools, server or protocol" \
    src/net '\bcrate::(jobs|tools|server|protocol|tasks|files|policy)\b'
# One framer of a server-sent event and one query decoder, in the floor:
check "only the floor frames a server-sent event (net::sse)" \
    src/server '"event: |b"event: '
check "only the floor decodes a query or a percent-escape (net::query)" \
    src/server "split\('&'\)|fn percent_decode|replace\('\+'"
check "only the floor parses multipart/form-data (net::multipart)" \
    src/server '\\r\\n--(\{|")|fn boundary(_of)?\('
for dir in src/*/; do
    [[ $dir == src/net/ || $dir == src/fuzzing/ ]] && continue
    check "only the floor binds or accepts (src/net/accept.rs)" \
        "$dir" '\bTcpListener::bind\b|\.accept\(\)\.await|socket\.accept\(\)'
done
check "envelopes are the floor's to frame and parse (crate::net::envelope)" \
    src/server/transport '\b(from_be_bytes|to_be_bytes|put_u32|get_u32|put_u32_be|get_u32_be)\b|first_chunk::<(4|5)>|split_first_chunk::<(4|5)>'

# The kernel's socket diagnostics are written and read in one place.
for dir in src init/src; do
    check "only init/src/sockdiag.rs speaks NETLINK_SOCK_DIAG" \
        "$dir" 'const SOCK_DIAG_BY_FAMILY|netlink::SOCK_DIAG\b' sockdiag.rs
done

check "only LaunchRequest::validate builds a jobs::Launch (src/jobs/request.rs)" \
    src '(^|[=(:,]|return)[[:space:]]*Launch \{' request.rs
check "envd and sandboxd build a LaunchRequest from their fields, not execute's JSON" \
    src/server/transport/envd '\bexecute::((parse|Execute)\b|\{[^}]*\b(parse|Execute)\b)|\btools::Args\b'
check "envd and sandboxd build a LaunchRequest from their fields, not execute's JSON" \
    src/server/transport/sandboxd '\bexecute::((parse|Execute)\b|\{[^}]*\b(parse|Execute)\b)|\btools::Args\b'
# No JSON built in their files that launch, up to their tests (a test may
# build a proto message from JSON).
for file in $(grep -rlE --include='*.rs' '\bLaunchRequest\b|\.launch\(' src/server/transport/envd src/server/transport/sandboxd); do
    hits=$(awk '/^#\[cfg\(test\)\]/ { exit }
        /json!|serde_json::(Map|Value|to_value|json)|Map<String, *Value>/ { print FILENAME ":" FNR ":" $0 }' "$file")
    if [[ -n $hits ]]; then
        while IFS= read -r line; do
            echo "check-layers: a launch from envd or sandboxd builds no JSON (fill a LaunchRequest): $line" >&2
        done <<<"$hits"
        status=1
    fi
done

# Code lines (not comments) that add to 128, outside the one function.
hits=$(grep -rnE --include='*.rs' '^\s*[^/ ].*\b128 *\+ *[a-z_(]' src | grep -v '^src/jobs/result\.rs:')
if [[ -n $hits ]]; then
    while IFS= read -r line; do
        echo "check-layers: a signal's exit code is jobs::result::signal_exit_code (one 128 + N): $line" >&2
    done <<<"$hits"
    status=1
fi
check "jobs writes a started job's stdin (Jobs::launch); front-ends do not take it from Launched::Started" \
    src/server 'Launched::Started *\{[^}]*\bstdin\b|launch_leaving_stdin'

if [[ $(grep -c '^\s*pub async fn next' src/jobs/follow.rs) -ne 1 ]]; then
    echo "check-layers: Follow::next is private to jobs (front-ends call Jobs::stream): src/jobs/follow.rs" >&2
    status=1
fi
for f in src/server/transport/http/exec.rs src/server/transport/envd src/server/transport/sandboxd/grpc.rs; do
    check "a stream front-end leaves its loop, keep-alives and client-gone policy to Jobs::stream" \
        "$f" 'tokio::time::interval|\bfn retain\b'
done
# (sandboxd's one teardown is of a job whose id does not fit its wire, before any stream.)
for f in src/server/transport/http/exec.rs src/server/transport/envd; do
    check "a stream front-end tears no job down itself (ClientGone::TearDown does)" "$f" '\.teardown\('
done
# check-layers' `check` excludes one file name; the two homes of a wait loop
# are told apart by path here.
hits=$(grep -rnE --include='*.rs' '\.notified\(\)|\.enable\(\)' src |
    grep -vE '^src/(jobs/table|tasks/mod)\.rs:')
if [[ -n $hits ]]; then
    while IFS= read -r line; do
        echo "check-layers: wait through JobTable::wait_for or Tasks::wait_for, not a loop of your own: $line" >&2
    done <<<"$hits"
    status=1
fi

for front in http envd sandboxd; do
    others=$(printf '%s\n' http envd sandboxd | grep -vx "$front" | paste -sd'|')
    check "a front-end names no other front-end ($front): share through src/net or transport/file_http.rs" \
        "src/server/transport/$front" "\\b(transport|super::super)::($others)\\b"
done

for dir in src init/src; do
    check "a type is named for what it is, not plain Error, Reply or Status (docs/ARCHITECTURE.md, Words)" \
        "$dir" '^\s*(pub(\([a-z]+\))? )?(enum|struct) (Error|Reply|Status)\b|^\s*pub(\([a-z]+\))? type (Error|Reply|Status)\b'
    check "\"watch\" is inotify: name a pending exit or a wait otherwise (docs/ARCHITECTURE.md, Words)" \
        "$dir" '\b(struct|enum|type) \w*Watch\b|\bExitWatch\b' watch.rs
done

# tracked RULE GIT-GREP-ARGS…: report every line of the tracked files that
# `git grep -nI ARGS` finds (outside a git work tree there is nothing to check).
tracked() {
    local rule=$1 hits
    shift
    git rev-parse --is-inside-work-tree >/dev/null 2>&1 || return 0
    hits=$(git grep -nI "$@" || true)
    if [[ -n $hits ]]; then
        while IFS= read -r line; do
            echo "check-layers: $rule: $line" >&2
        done <<<"$hits"
        status=1
    fi
}

tracked "a document runs the installed mcp-exec, not a build output (rule 19)" \
    -E '(^\s*|[|;&]\s*|\$\()target/(x86_64-unknown-linux-gnu/)?(release|debug)/mcp-exec\b' \
    -- README.md docs/

# The product specification does not ship with the project: code, docs, tests and messages
# state the rule or link to docs/, never the specification's sections. (The word is split
# here so that this line does not find itself.)
tracked "state the rule or link to docs/, not the specification" -w "SP""EC" -- .

if [[ $status -eq 0 ]]; then
    echo "check-layers: ok"
fi
exit "$status"
