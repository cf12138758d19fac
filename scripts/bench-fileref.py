#!/usr/bin/env python3
"""Issue 23's file-reference figure: a 100 MiB ChatGPT-style fetch (`upload`
with `file`) from a local HTTPS server, against `curl` to a file in the same
run, and the server's peak RSS during it.

Usage: scripts/bench-fileref.py [BINARY] [MIB] [RUNS]
  BINARY  default target/x86_64-unknown-linux-gnu/release/mcp-exec
  MIB     default 100; RUNS default 3 (alternating curl / mcp-exec)

The remote is tests/support/https_server.py (a throwaway CA made with the
openssl CLI, trusted through MCP_EXEC_CA_FILE and curl --cacert). Each run
starts a fresh mcp-exec, so its VmHWM (peak RSS, /proc/<pid>/status) is the
fetch's. Prints one JSON line per run and a summary; everything on loopback;
everything it starts ends with it.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    ROOT, "target/x86_64-unknown-linux-gnu/release/mcp-exec")
MIB = int(sys.argv[2]) if len(sys.argv) > 2 else 100
RUNS = int(sys.argv[3]) if len(sys.argv) > 3 else 3


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def main():
    work = tempfile.mkdtemp(prefix="mcp-exec-bench-fileref-")
    serve = os.path.join(work, "served")
    os.mkdir(serve)
    with open(os.path.join(serve, "big"), "wb") as f:
        chunk = os.urandom(1 << 20)
        for _ in range(MIB):
            f.write(chunk)
    remote = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "tests/support/https_server.py"), serve],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    server = None
    try:
        ready = json.loads(remote.stdout.readline())
        url = f"https://127.0.0.1:{ready['port']}/file/big"
        results = {"curl": [], "mcp-exec": []}
        for run in range(RUNS):
            out = os.path.join(work, f"curl-{run}")
            t0 = time.monotonic()
            subprocess.run(["curl", "-fsS", "--cacert", ready["ca"], "-o", out, url], check=True)
            curl_s = time.monotonic() - t0
            os.unlink(out)
            env = dict(os.environ, MCP_EXEC_CA_FILE=ready["ca"],
                       MCP_EXEC_MAX_TRANSFER_BYTES=str((MIB + 1) << 20), MCP_EXEC_LOG="warn")
            server = subprocess.Popen([BINARY], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      env=env, text=True)

            def rpc(i, method, params):
                server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                                               "params": params}) + "\n")
                server.stdin.flush()
                while True:
                    msg = json.loads(server.stdout.readline())
                    if msg.get("id") == i:
                        return msg

            rpc(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                  "clientInfo": {"name": "bench-fileref", "version": "0"}})
            server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
            rss_idle = status_kib(server.pid, "VmRSS")
            dest = os.path.join(work, f"mcp-{run}")
            t0 = time.monotonic()
            answer = rpc(2, "tools/call", {"name": "upload", "arguments": {
                "path": dest, "file": {"download_url": url, "file_id": f"bench-{run}"}}})
            mcp_s = time.monotonic() - t0
            hwm = status_kib(server.pid, "VmHWM")
            result = answer["result"]
            assert not result["isError"], result
            assert result["structuredContent"]["bytes"] == MIB << 20, result
            os.unlink(dest)
            server.stdin.close()
            server.wait(timeout=20)
            server = None
            row = {"run": run, "mib": MIB, "curl_s": round(curl_s, 3), "mcp_exec_s": round(mcp_s, 3),
                   "ratio_vs_curl": round(curl_s / mcp_s, 3),
                   "rss_idle_kib": rss_idle, "rss_peak_kib": hwm}
            print(json.dumps(row), flush=True)
            results["curl"].append(curl_s)
            results["mcp-exec"].append((mcp_s, hwm))
        best_curl = min(results["curl"])
        best_mcp = min(s for s, _ in results["mcp-exec"])
        print(json.dumps({
            "summary": f"{MIB} MiB over HTTPS on loopback",
            "curl_best_s": round(best_curl, 3), "curl_mib_s": round(MIB / best_curl, 1),
            "mcp_exec_best_s": round(best_mcp, 3), "mcp_exec_mib_s": round(MIB / best_mcp, 1),
            "ratio_best": round(best_curl / best_mcp, 3),
            "rss_peak_max_kib": max(h for _, h in results["mcp-exec"]),
        }), flush=True)
    finally:
        if server is not None:
            server.kill()
            server.wait()
        # Its stdin closed, the remote removes its certificates and exits.
        remote.stdin.close()
        try:
            remote.wait(timeout=10)
        except subprocess.TimeoutExpired:
            remote.kill()
            remote.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
