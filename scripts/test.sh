#!/usr/bin/env bash
# The whole test suite, as the README promises:
#   1. sets the machine up (scripts/setup.sh): as root it installs the Debian packages and
#      writes the containers.conf the tests need, quickly skipped when nothing is missing;
#      otherwise it says what is missing,
#   2. builds both container images offline from the current code
#      (images/build-offline.sh; in CI missing prerequisites fail),
#   3. runs every Rust test: unit tests, the init crate's process tests
#      (real PID 1 via unshare), and the integration suite on four targets
#      (bare binary, PID 1 under unshare, the scratch image, the tini image);
#      then the fuzz smoke run (scripts/fuzz-smoke.sh) and cargo-deny's license
#      and ban checks (deny.toml),
#   4. runs the benchmark harness in smoke mode, and the README's install command
#      (scripts/install.sh) into a scratch prefix,
#   5. runs the interop suite against real MCP clients (interop/run.sh), which
#      installs their pinned Python and npm packages,
#   6. runs the shell examples of README.md and docs/ byte for byte, one fresh login shell per
#      document, with the binary step 4 installed (scripts/doc-examples.sh),
#   7. validates deploy/kubernetes/ offline against the Kubernetes schemas
#      (scripts/validate-k8s.sh; the pod itself runs under `podman kube play` in step 3).
#   Step 3 runs the bare target once more, and the signal tests on PID 1, with the servers
#   started with HUP, INT and QUIT ignored (as under nohup or from a backgrounding script).
#   Last, also when a step failed, it prints the 20 slowest tests with their times
#   (scripts/timed-runner.sh, scripts/slowest-tests.sh) and fails the run if a process it
#   started is still alive (scripts/leftovers.sh: every process of the run carries
#   MCP_EXEC_TEST_RUN).
# Tests needing root/unshare/podman fail when CI is set and skip (with a
# printed reason) elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -n ${MCP_EXEC_DOC_EXAMPLE:-} ]]; then
    echo "scripts/test.sh: not run from inside the examples test (scripts/doc-examples.sh)" >&2
    exit 1
fi

# Marks every process of this run (tests/support/guard.rs passes it on to every server);
# whatever still carries it when the run ends was left behind.
MCP_EXEC_TEST_RUN="$$-$(date +%s%N)-$RANDOM"
export MCP_EXEC_TEST_RUN
# Every Rust test's time (scripts/timed-runner.sh), for the slowest-tests report.
MCP_EXEC_TEST_TIMES=$(mktemp -t mcp-exec-test-times.XXXXXX)
export MCP_EXEC_TEST_TIMES
# Only on `cargo test` below: a runner applies to `cargo run` too.
timed=(env CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$PWD/scripts/timed-runner.sh")
started=$SECONDS
# The time of each step, printed at the end: where a slow run spent it.
steps=""
mark=$SECONDS
step() {
    steps+="$(printf '%6d s  %s' $((SECONDS - mark)) "$1")"$'\n'
    mark=$SECONDS
}
leftovers() {
    local status=$?
    # A report, never a reason to fail (nor to skip the check below).
    bash scripts/slowest-tests.sh "$MCP_EXEC_TEST_TIMES" 20 || true
    rm -f "$MCP_EXEC_TEST_TIMES"
    printf '== time per step\n%s' "$steps"
    echo "scripts/test.sh: $((SECONDS - started)) s in all"
    if ! env -u MCP_EXEC_TEST_RUN bash scripts/leftovers.sh "$MCP_EXEC_TEST_RUN"; then
        echo "scripts/test.sh: the run left processes behind (listed above)" >&2
        ((status)) || status=1
    fi
    exit "$status"
}
trap leftovers EXIT

bash scripts/setup.sh </dev/null
step "setup"

if bash images/build-offline.sh --check; then
    bash images/build-offline.sh </dev/null
elif [[ -n "${CI:-}" ]]; then
    echo "scripts/test.sh: the images are required in CI" >&2
    exit 1
else
    echo "scripts/test.sh: cannot build the images: container targets will be skipped" >&2
fi
step "images"

# The pinned Python packages first: an integration test parses /metrics with
# prometheus_client from interop/.venv, and the terminal-attach tests
# (tests/http/tty.rs) drive the websockets client from it; the sandboxd tests
# (tests/sandboxd.rs) drive the agent-sandbox SDK from interop/sandboxd/.venv.
if ! bash interop/run.sh --install-python </dev/null && [[ -n "${CI:-}" ]]; then
    echo "scripts/test.sh: the interop Python packages are required in CI" >&2
    exit 1
fi
# The E2B SDK's own venv: tests/envd.rs drives it against --envd on every target.
if ! bash interop/run.sh --install-e2b </dev/null && [[ -n "${CI:-}" ]]; then
    echo "scripts/test.sh: the E2B SDK (interop/e2b) is required in CI" >&2
    exit 1
fi
step "python and e2b packages"

# Four tests at a time on two CPUs: most of a test's time is spent waiting (for a deadline, a
# child, a socket), and the integration suite used 57 % of the CPUs so: 820 s at the default of
# one per CPU, 465–493 s at four (two whole runs, every test passing). RUST_TEST_THREADS set
# by the caller wins.
export RUST_TEST_THREADS=${RUST_TEST_THREADS:-4}
"${timed[@]}" cargo test --workspace --locked
step "cargo test --workspace (build and every target)"

# Jobs and init mode's command start with every signal at its default whatever the server
# inherited (issue 19 §5): the bare target once more (about 90 s here), and the signal tests
# on PID 1, with every server started with HUP, INT and QUIT ignored (tests/support/guard.rs).
MCP_EXEC_TEST_INHERIT_IGNORED=HUP,INT,QUIT "${timed[@]}" cargo test --locked --test integration -- \
    bare:: server_signals:: initmode::pid1:: pid1::a_job_killed_by_a_signal
step "bare target again, signals inherited ignored"

# Fuzzing smoke (FUZZING.md): every target briefly under libFuzzer, or on stable as
# randomized tests when nightly or cargo-fuzz is missing; it prints which mode ran.
bash scripts/fuzz-smoke.sh </dev/null
step "fuzz smoke"

# Licenses and bans of the dependency tree (deny.toml): no advisory database is fetched.
if cargo deny --version >/dev/null 2>&1; then
    cargo deny --locked check licenses bans
elif [[ -n "${CI:-}" ]]; then
    echo "scripts/test.sh: cargo-deny is required in CI (scripts/setup.sh installs it)" >&2
    exit 1
else
    echo "scripts/test.sh: no cargo-deny: license and ban checks skipped (scripts/setup.sh installs it)" >&2
fi
step "cargo deny"

# The benchmark harness in smoke mode (a few iterations; no timing asserted),
# so that it cannot rot. Full runs: see BENCHMARKS.md.
RUSTFLAGS='-C target-feature=+crt-static -C relocation-model=static' cargo build --release --locked \
    --target x86_64-unknown-linux-gnu -p mcp-exec
cargo run --release --locked -p bench -- --smoke
step "static release build and bench smoke"

# The README's install command, into a scratch prefix (it reuses the static build above): the
# installed binary runs and says it is the static build of this commit.
# The examples of the documents (below) run this installed binary.
prefix=$(mktemp -d -t mcp-exec-install.XXXXXX)
bash scripts/install.sh "$prefix" </dev/null
installed=$("$prefix/bin/mcp-exec" --version)
if [[ $installed != "mcp-exec "*"(commit $(git rev-parse --short=12 HEAD), static, features: "* ]]; then
    echo "scripts/test.sh: the installed binary says \"$installed\"" >&2
    exit 1
fi
step "install"

# Real MCP clients: Python SDK, TypeScript SDK, MCP Inspector CLI (pinned).
bash interop/run.sh </dev/null
step "interop"

# Every shell example of README.md and docs/, byte for byte, one fresh login shell per
# document with the binary installed above on PATH (docs/development.md).
MCP_EXEC_DOC_PREFIX=$prefix bash scripts/doc-examples.sh </dev/null
rm -rf "$prefix"
step "doc examples"

# The Kubernetes manifests against the bundled schemas (pinned kubernetes-validate).
bash scripts/validate-k8s.sh </dev/null
step "kubernetes validation"
