#!/usr/bin/env bash
# Installs the peers that the bench scenario `peers` (bench/src/peers.rs) measures side by
# side with mcp-exec, pinned, into git-ignored directories beside this script:
#   node/node_modules  DesktopCommander (npm @wonderwhy-er/desktop-commander, node/package.json
#                      and node/package-lock.json), run with the `node` on PATH (>= 18)
#   .venv              mcp-shell-server (PyPI, requirements.txt)
# The platform SDKs that the same scenario drives against envd and sandboxd are the interop
# venvs: `bash interop/run.sh --install-e2b` and `bash interop/run.sh --install-python`.
# Idempotent: a stamp holding the pin file's hash skips an install that is current.
# Needs the npm and PyPI registries for the first install. CI does not run this: the scenario
# skips a peer that is not installed, with the reason printed.
set -euo pipefail
cd "$(dirname "$0")"

pins_hash() { cat "$@" | sha256sum; }
stamp_matches() { [[ -f "$1" ]] && [[ "$(pins_hash "${@:2}")" == "$(cat "$1")" ]]; } # <stamp> <pin files…>
status=0

# DesktopCommander. Install scripts are skipped: its own postinstall sets up the user's
# Claude config and telemetry, @vscode/ripgrep's fetches rg from GitHub and md-to-pdf's
# puppeteer a Chrome, none of which the benchmark's start_process needs.
if command -v npm >/dev/null 2>&1; then
    if ! stamp_matches node/node_modules/.pins.sha256 node/package.json node/package-lock.json; then
        rm -rf node/node_modules
        if (cd node && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
            pins_hash node/package.json node/package-lock.json >node/node_modules/.pins.sha256
        else
            echo "peers: npm ci of DesktopCommander failed" >&2
            status=1
        fi
    fi
else
    echo "peers: npm not found: DesktopCommander not installed" >&2
    status=1
fi

# mcp-shell-server, in its own venv.
if command -v python3 >/dev/null 2>&1; then
    if ! stamp_matches .venv/.requirements.sha256 requirements.txt; then
        rm -rf .venv
        if python3 -m venv .venv &&
            .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input \
                -r requirements.txt </dev/null; then
            pins_hash requirements.txt >.venv/.requirements.sha256
        else
            echo "peers: pip install of mcp-shell-server failed" >&2
            status=1
        fi
    fi
else
    echo "peers: python3 not found: mcp-shell-server not installed" >&2
    status=1
fi
exit "$status"
