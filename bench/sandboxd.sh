#!/usr/bin/env bash
# Issue 22's figure: sandboxd `Execute` of `true` through grpcio (the stub the agent-sandbox SDK
# uses, from interop/sandboxd/.venv) on loopback, p50 over N calls on one channel, against
# `POST /exec` of `true` (argv, no shell) on one keep-alive HTTP/1.1 connection, in the same run
# against the same server. Prints one JSON line: {n, grpc_execute_p50_ms, post_exec_p50_ms, ratio}.
#   bench/sandboxd.sh [N]   (default 500; MCP_EXEC_BIN: the binary, default the release build)
# Needs `interop/run.sh --install-python` first (the sandboxd venv).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-500}
bin=${MCP_EXEC_BIN:-target/x86_64-unknown-linux-gnu/release/mcp-exec}
python=interop/sandboxd/.venv/bin/python
log=$(mktemp)
MCP_EXEC_LOG=warn "$bin" --no-stdio --http 127.0.0.1:0 --sandboxd-grpc 127.0.0.1:0 \
    --sandboxd-root "${TMPDIR:-/tmp}" 2>"$log" &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -f "$log"' EXIT
port() { sed -n "s/^mcp-exec: listening for $1 on 127.0.0.1:\([0-9]*\)$/\1/p" "$log"; }
for _ in $(seq 100); do
    [[ -n "$(port 'sandboxd gRPC')" && -n "$(port HTTP)" ]] && break
    sleep 0.05
done
"$python" interop/sandboxd/client.py bench "$(port 'sandboxd gRPC')" "$(port HTTP)" "$n"
