#!/usr/bin/env bash
# Issue 24's file figure: a 4 MiB files.write / files.read through the e2b SDK (envd's
# POST/GET /files on --envd) against the same 4 MiB through our own PUT/GET /files/<path>
# (--http), in the same run, same server, same disk. Both listeners are on loopback without a
# token (the SDK's debug mode sends none; with a token set, envd would require it). Prints one
# JSON line (p50 and min of ROUNDS rounds, milliseconds, client-side wall time).
#   bench/envd_files.sh [ROUNDS]        (default 20; needs interop/e2b/.venv and a built binary)
# MCP_EXEC_BIN overrides the binary (default: the static release build of images/build-offline.sh,
# else target/release, else target/debug).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-20}"
bin="${MCP_EXEC_BIN:-}"
if [[ -z "$bin" ]]; then
    for b in target/x86_64-unknown-linux-gnu/release/mcp-exec target/release/mcp-exec target/debug/mcp-exec; do
        [[ -x "$b" ]] && { bin=$b; break; }
    done
fi
echo "bench/envd_files.sh: $bin" >&2
py=interop/e2b/.venv/bin/python
[[ -x "$py" ]] || { echo "no $py: create the e2b venv (interop/run.sh)" >&2; exit 1; }
tmp="$(mktemp -d)"
log="$tmp/server.log"
"$bin" --no-stdio --http 127.0.0.1:0 --envd 127.0.0.1:0 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
port_of() { sed -n "s/.*listening for $1 on 127.0.0.1:\([0-9]*\).*/\1/p" "$log" | head -1; }
for _ in $(seq 200); do
    [[ -n "$(port_of HTTP)" && -n "$(port_of envd)" ]] && break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.05
done
"$py" interop/e2b/fs_suite.py bench "http://127.0.0.1:$(port_of envd)" \
    "http://127.0.0.1:$(port_of HTTP)" "" "$tmp/work" "$rounds"
