#!/usr/bin/env bash
# The whole test suite, as the README promises:
#   1. builds both container images offline from the current code
#      (images/build-offline.sh; needs podman — in CI a missing podman fails),
#   2. runs every Rust test: unit tests, the init crate's process tests
#      (real PID 1 via unshare), and the integration suite on four targets
#      (bare binary, PID 1 under unshare, the scratch image, the tini image),
#   3. runs the benchmark harness in smoke mode,
#   4. runs the interop suite against real MCP clients (interop/run.sh).
# Tests needing root/unshare/podman fail when CI is set and skip (with a
# printed reason) elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v podman >/dev/null 2>&1; then
    bash images/build-offline.sh </dev/null
elif [[ -n "${CI:-}" ]]; then
    echo "scripts/test.sh: podman is required in CI (run .ci/setup-podman.sh)" >&2
    exit 1
else
    echo "scripts/test.sh: podman not installed: container targets will be skipped" >&2
fi

cargo test --workspace --locked

# The benchmark harness in smoke mode (a few iterations; no timing asserted),
# so that it cannot rot. Full runs: see BENCHMARKS.md.
RUSTFLAGS='-C target-feature=+crt-static -C relocation-model=static' cargo build --release --locked \
    --target x86_64-unknown-linux-gnu -p mcp-exec
cargo run --release --locked -p bench -- --smoke

# Real MCP clients: Python SDK, TypeScript SDK, MCP Inspector CLI (pinned).
bash interop/run.sh </dev/null
