"""The E2B Python SDK (pinned in requirements.txt) against mcp-exec's envd listener.

Usage: envd_client.py PORT SCENARIO

Runs one scenario with `Sandbox.create(debug=True, sandbox_url=...)` (the SDK's local
debug mode: no E2B API, no access token) and prints one JSON object of what it observed;
the Rust tests (tests/envd.rs) assert the values. A scenario that raises prints
{"exception": type, "message": text} and exits 1.
"""

import json
import sys
import time

from e2b import CommandExitException, Sandbox, TimeoutException
from e2b.sandbox.commands.command_handle import PtySize


def sandbox(port):
    return Sandbox.create(debug=True, sandbox_url=f"http://127.0.0.1:{port}")


def exit_of(fn):
    """Runs fn; the CommandExitException's fields if it raised one."""
    try:
        r = fn()
        return {"exit_code": r.exit_code, "stdout": r.stdout, "stderr": r.stderr, "error": r.error}
    except CommandExitException as e:
        return {"raised": "CommandExitException", "exit_code": e.exit_code,
                "stdout": e.stdout, "stderr": e.stderr, "error": e.error}


def group_alive(sbx, pattern):
    """The processes matching pattern, seen from inside the target (pgrep -f)."""
    r = sbx.commands.run(f"pgrep -f '{pattern}' || true")
    return [p for p in r.stdout.split()]


def scenario_run(sbx):
    out = {}
    r = sbx.commands.run("echo out; echo err >&2")
    out["plain"] = {"stdout": r.stdout, "stderr": r.stderr, "exit_code": r.exit_code}
    out["failing"] = exit_of(lambda: sbx.commands.run("echo partial; echo bad >&2; exit 3"))
    r = sbx.commands.run("pwd; echo $GREETING", cwd="/tmp", envs={"GREETING": "hello there"})
    out["cwd_env"] = r.stdout
    t0 = time.monotonic()
    try:
        sbx.commands.run("sleep 30.5", timeout=1)
        out["timeout"] = "returned"
    except TimeoutException:
        out["timeout"] = "TimeoutException"
    except CommandExitException as e:
        out["timeout"] = f"CommandExitException {e.exit_code}"
    out["timeout_s"] = time.monotonic() - t0
    # The deadline ended the job's group (TERM, the grace, KILL): poll, bounded.
    deadline = time.monotonic() + 15
    while group_alive(sbx, "sleep 30[.]5") and time.monotonic() < deadline:
        time.sleep(0.1)
    out["timeout_left"] = group_alive(sbx, "sleep 30[.]5")
    out["running"] = sbx.is_running()
    return out


def scenario_background(sbx):
    h = sbx.commands.run("sleep 0.5; echo done; exit 5", background=True)
    listed = [{"pid": p.pid, "cmd": p.cmd, "args": p.args} for p in sbx.commands.list()]
    res = exit_of(h.wait)
    return {"pid": h.pid, "listed": listed, "wait": res,
            "listed_after": [p.pid for p in sbx.commands.list()]}


def scenario_kill(sbx):
    h = sbx.commands.run("sleep 1001 & sleep 1002 & wait", background=True)
    deadline = time.monotonic() + 10
    while len(group_alive(sbx, "sleep 100[12]")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    before = group_alive(sbx, "sleep 100[12]")
    killed = sbx.commands.kill(h.pid)
    res = exit_of(h.wait)
    after = group_alive(sbx, "sleep 100[12]")
    return {"before": before, "killed": killed, "wait": res, "after": after,
            "kill_again": sbx.commands.kill(h.pid), "kill_unknown": sbx.commands.kill(999999)}


def scenario_stdin(sbx):
    h = sbx.commands.run("cat; echo eof", background=True, stdin=True)
    sbx.commands.send_stdin(h.pid, "hello\n")
    sbx.commands.send_stdin(h.pid, b"bytes\n")
    sbx.commands.stream_input(h.pid, [b"streamed ", "input\n"])
    sbx.commands.close_stdin(h.pid)
    first = exit_of(h.wait)
    closed = exit_of(lambda: sbx.commands.run("cat; echo eof-at-once"))
    return {"cat": first, "no_stdin": closed}


def scenario_pty(sbx):
    t = sbx.pty.create(PtySize(rows=24, cols=80), cwd="/tmp")
    sbx.pty.resize(t.pid, PtySize(rows=30, cols=100))
    sbx.pty.send_stdin(t.pid, b"stty size; echo tty=$(tty | cut -c1-8); exit 7\n")
    out = bytearray()
    res = exit_of(lambda: t.wait(on_pty=lambda b: out.extend(b)))
    k = sbx.pty.create(PtySize(rows=24, cols=80))
    killed = sbx.pty.kill(k.pid)
    kres = exit_of(k.wait)
    return {"output": out.decode("utf-8", "replace"), "wait": res, "pid": t.pid,
            "killed": killed, "killed_wait": kres}


def scenario_burst(sbx):
    handles = [(i, sbx.commands.run(f"exit {i % 7}", background=True)) for i in range(200)]
    codes = {}
    for i, h in handles:
        codes[str(i)] = exit_of(h.wait)["exit_code"]
    wrong = {i: c for i, c in codes.items() if c != int(i) % 7}
    return {"count": len(codes), "wrong": wrong, "pids": len({h.pid for _, h in handles})}


def scenario_detached(sbx):
    h = sbx.commands.run("echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three; sleep 0.6",
                         background=True)
    pid = h.pid
    h.disconnect()
    time.sleep(0.9)  # output is written while no client is attached
    running = pid in [p.pid for p in sbx.commands.list()]
    again = sbx.commands.connect(pid)
    res = exit_of(again.wait)
    # Ended while detached: Connect still replays the output and delivers the end.
    late = sbx.commands.run("echo late; exit 4", background=True)
    late_pid = late.pid
    late.disconnect()
    deadline = time.monotonic() + 10
    while late_pid in [p.pid for p in sbx.commands.list()] and time.monotonic() < deadline:
        time.sleep(0.05)
    ended = exit_of(sbx.commands.connect(late_pid).wait)
    try:
        sbx.commands.connect(late_pid)
        collected_again = "connected"
    except Exception as e:  # noqa: BLE001: the type is what is checked
        collected_again = type(e).__name__
    return {"running_while_detached": running, "reattached": res, "ended_detached": ended,
            "collected_again": collected_again}


def scenario_timing(sbx):
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    for _ in range(10):
        sbx.commands.run("true")
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        sbx.commands.run("true")
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return {"n": n, "p50_ms": samples[n // 2], "p90_ms": samples[n * 9 // 10],
            "p99_ms": samples[min(n - 1, n * 99 // 100)]}


def main():
    port, name = sys.argv[1], sys.argv[2]
    try:
        result = globals()[f"scenario_{name}"](sandbox(port))
    except Exception as e:  # noqa: BLE001: reported to the Rust test
        print(json.dumps({"exception": type(e).__name__, "message": str(e)}))
        sys.exit(1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
