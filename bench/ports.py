#!/usr/bin/env python3
"""The figures of issue 23's ports, measured against the static release binary:

  1. a new listener's visible latency while `wait until port` waits: from the job's own
     CLOCK_MONOTONIC just after listen() to the client's when `wait` answers (goal <= 200 ms);
  2. a scan at 1,000 open descriptors: `GET /ports` round trips while a job holds 1,000 open
     descriptors (and 20 listeners), next to `GET /livez` round trips on the same keep-alive
     connection (the HTTP cost without a scan); the difference is the scan (goal <= 2 ms);
  3. the proxy's throughput against a direct loopback connection: `curl` of a 256 MiB answer
     from the same upstream through `/ports/<n>/` and directly, interleaved (goal >= 0.8x).

Usage (Python 3, curl; the listeners are interop/python/ports_upstream.py):
  RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --target x86_64-unknown-linux-gnu
  python3 bench/ports.py [--binary target/x86_64-unknown-linux-gnu/release/mcp-exec] [--rounds N] [--pid1]
Timings are printed, never asserted.
"""

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UPSTREAM = os.path.join(ROOT, "interop", "python", "ports_upstream.py")
TOKEN = "bench-ports-token"


class Server:
    def __init__(self, binary, pid1):
        env = dict(os.environ, MCP_EXEC_HTTP_TOKEN=TOKEN)
        wrap = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"] if pid1 else []
        self.p = subprocess.Popen(wrap + [binary, "--http", "127.0.0.1:0"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.port = None
        while self.port is None:
            line = self.p.stderr.readline().decode()
            if not line:
                sys.exit("the server ended before it listened")
            m = re.search(r"listening for HTTP on 127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
        self.next = 0
        self.rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "bench-ports", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()

    def rpc(self, method, params):
        self.next += 1
        self.send({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params})
        while True:
            msg = json.loads(self.p.stdout.readline())
            if msg.get("id") == self.next:
                return msg["result"]

    def call(self, tool, args):
        r = self.rpc("tools/call", {"name": tool, "arguments": args})
        return r.get("structuredContent") or json.loads(r["content"][0]["text"])

    def job(self, command):
        return self.call("execute", {"command": command, "nowait": True})["job_id"]

    def line(self, job):
        self.call("wait", {"job_ids": [job], "timeout": 30, "until": {"pattern": "\n"}})
        return self.call("output", {"job_id": job, "stdout": "all"})["stdout"]["data"].strip()

    def close(self):
        self.p.kill()
        self.p.wait()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def visible_latency(s, rounds):
    import socket
    out = []
    for _ in range(rounds):
        d = tempfile.mkdtemp()
        gate, stamp = os.path.join(d, "gate"), os.path.join(d, "stamp")
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        # The job listens a random 0-100 ms after its gate opens, so listens fall anywhere in
        # the waiter's backoff, and stamps CLOCK_MONOTONIC (system-wide) right after listen().
        path = os.path.join(d, "l.py")
        open(path, "w").write(
            "import os,random,socket,time\n"
            f"while not os.path.exists({gate!r}): time.sleep(0.001)\n"
            "time.sleep(random.random() / 10)\n"
            f"s=socket.socket(); s.bind(('127.0.0.1',{port})); s.listen()\n"
            f"open({stamp!r},'w').write(str(time.monotonic()))\n"
            "time.sleep(60)\n"
        )
        job = s.job(f"exec {sys.executable} {path}")
        time.sleep(0.2)
        open(gate, "w").close()
        r = s.call("wait", {"job_ids": [job], "timeout": 10, "until": {"port": port}})
        seen = time.monotonic()
        entries = r["results"] if isinstance(r, dict) else r
        assert entries[0].get("ports"), entries
        out.append((seen - float(open(stamp).read())) * 1000)
        s.call("kill", {"job_id": job})
    return out


def scan_cost(s, rounds):
    holder = s.job(f"exec {sys.executable} -c \"import os,socket,time\n"
                   "fds=[os.open('/dev/null',os.O_RDONLY) for _ in range(980)]\n"
                   "ls=[socket.socket() for _ in range(20)]\n"
                   "[l.bind(('127.0.0.1',0)) or l.listen() for l in ls]\n"
                   "print('ready',flush=True); time.sleep(600)\"")
    s.line(holder)
    c = http.client.HTTPConnection("127.0.0.1", s.port)
    h = {"Authorization": f"Bearer {TOKEN}"}

    def rt(path):
        t = time.perf_counter()
        c.request("GET", path, headers=h)
        body = c.getresponse().read()
        return (time.perf_counter() - t) * 1000, body

    for _ in range(20):
        rt("/ports")
        rt("/livez")
    scans, lives = [], []
    for _ in range(rounds):
        scans.append(rt("/ports")[0])
        lives.append(rt("/livez")[0])
    n = len(json.loads(rt("/ports")[1])["ports"])
    fds = descriptors(s, holder)
    s.call("kill", {"job_id": holder})
    return scans, lives, n, fds


def descriptors(s, job):
    """The job's open descriptors, as the job itself counts them."""
    r = s.call("execute", {"command": "ls /proc/$(pgrep -f 'fds=\\[' | head -1)/fd | wc -l"})
    return r["stdout"]["data"].strip() if isinstance(r.get("stdout"), dict) else r


def http_get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
    return c.getresponse().read()


def throughput(s, rounds, size):
    job = s.job(f"exec {sys.executable} {UPSTREAM} http")
    port = int(s.line(job).split()[1])

    def curl(url, auth):
        args = ["curl", "-s", "-o", "/dev/null", "-w", "%{speed_download}", url]
        if auth:
            args[1:1] = ["-H", f"Authorization: Bearer {TOKEN}"]
        return float(subprocess.check_output(args)) / 1e6

    direct, proxied = [], []
    for _ in range(rounds):
        direct.append(curl(f"http://127.0.0.1:{port}/big?n={size}", False))
        proxied.append(curl(f"http://127.0.0.1:{s.port}/ports/{port}/big?n={size}", True))
    s.call("kill", {"job_id": job})
    return direct, proxied


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--binary", default=os.path.join(
        ROOT, "target/x86_64-unknown-linux-gnu/release/mcp-exec"))
    a.add_argument("--rounds", type=int, default=20)
    a.add_argument("--size", type=int, default=256 << 20)
    a.add_argument("--pid1", action="store_true",
                   help="serve as PID 1 of a fresh pid namespace with its own /proc (root), as in a container")
    args = a.parse_args()
    s = Server(args.binary, args.pid1)
    print(f"{'PID 1 (unshare --pid --mount-proc)' if args.pid1 else 'bare'}: {args.binary}")
    try:
        lat = visible_latency(s, args.rounds)
        print(f"listener visible after listen(), wait until port: median {statistics.median(lat):.1f} ms, "
              f"p90 {pct(lat, 90):.1f} ms, max {max(lat):.1f} ms (n={len(lat)})")
        scans, lives, n, fds = scan_cost(s, args.rounds * 10)
        print(f"GET /ports with {n} listeners listed, a job holding {fds} descriptors: median "
              f"{statistics.median(scans):.2f} ms, p90 {pct(scans, 90):.2f} ms; GET /livez median "
              f"{statistics.median(lives):.2f} ms; scan ~ {statistics.median(scans) - statistics.median(lives):.2f} ms")
        direct, proxied = throughput(s, max(3, args.rounds // 4), args.size)
        d, p = statistics.median(direct), statistics.median(proxied)
        print(f"{args.size >> 20} MiB answer: direct {d:.0f} MB/s, through /ports/<n>/ {p:.0f} MB/s "
              f"(median of {len(direct)}): {p / d:.2f}x")
    finally:
        s.close()


if __name__ == "__main__":
    main()
