"""What a platform SDK costs over the raw wire, for the bench scenario `peers`
(bench/src/peers.rs), against one mcp-exec that serves both.

Usage:
  sdk_rtt.py e2b ENVD_PORT HTTP_PORT N        run from interop/e2b/.venv
  sdk_rtt.py sandboxd GRPC_PORT HTTP_PORT N   run from interop/sandboxd/.venv

Interleaved sample by sample: the SDK's `commands.run("true")`, then `POST /exec` on one
keep-alive HTTP/1.1 connection running the argv that the SDK itself sends for that command
(E2B: `/bin/bash -l -c true`; agent-sandbox: `/bin/sh -c true`), so the difference is the SDK
and its protocol, not the command. Both from this same Python. After 5 warm-up pairs, prints
one JSON line per pair, {"sdk_ms": .., "raw_ms": ..}, then {"sdk": NAME, "version": V,
"argv": [..]}. A failure prints {"error": text} and exits 1.
"""

import http.client
import importlib.metadata
import json
import os
import sys
import time

TIMEOUT = 60
WARMUP = 5


def e2b_run(port, _http_port):
    from e2b import Sandbox

    sbx = Sandbox.create(debug=True, sandbox_url=f"http://127.0.0.1:{port}")
    return (lambda: sbx.commands.run("true")), "e2b", ["/bin/bash", "-l", "-c", "true"]


def sandboxd_run(port, http_port):
    # The SDK set up as the interop client does (a loopback pod IP; notes/platform-protocols.md §1.3).
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "interop", "sandboxd"))
    from client import sandbox

    # The REST port is only configuration here (the SDK wants one distinct from gRPC's).
    sbx = sandbox(port, http_port)
    return (lambda: sbx.commands.run("true")), "k8s-agent-sandbox", ["/bin/sh", "-c", "true"]


def main():
    kind, port, http_port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    run, package, argv = {"e2b": e2b_run, "sandboxd": sandboxd_run}[kind](port, http_port)
    conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=TIMEOUT)
    body = json.dumps({"argv": argv})
    headers = {"Accept": "text/event-stream", "Content-Type": "application/json"}

    def raw():
        conn.request("POST", "/exec", body=body, headers=headers)
        answer = conn.getresponse().read()
        if b"event: exit" not in answer:
            raise RuntimeError(f"POST /exec answered {answer[:200]!r}")

    def sdk():
        r = run()
        if r.exit_code != 0:
            raise RuntimeError(f"commands.run(\"true\") exited {r.exit_code}")

    for i in range(WARMUP + n):
        t = time.perf_counter()
        sdk()
        sdk_ms = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        raw()
        raw_ms = (time.perf_counter() - t) * 1000
        if i >= WARMUP:
            print(json.dumps({"sdk_ms": sdk_ms, "raw_ms": raw_ms}), flush=True)
    print(json.dumps({"sdk": package, "version": importlib.metadata.version(package), "argv": argv}))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001: reported to the Rust scenario
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        sys.exit(1)
