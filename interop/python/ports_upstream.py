"""Listeners for the tests of ports and the preview proxy (tests/http/ports.rs), run as jobs
by the mcp-exec under test. Not a pytest module. Every mode prints one line saying what it
bound, then serves until it is killed.

  listen N      N sockets on port 0, alternately on 0.0.0.0 and 127.0.0.1:
                prints "pid PID ports PORT/ADDR PORT/ADDR ..."
  http          an HTTP/1.1 server on 127.0.0.1, port 0: prints "listening PORT"
                GET  /echo...        -> 200 JSON {method, path, headers}
                POST /echo...        -> 200 JSON {method, path, headers, body}
                GET  /stream?gate=F  -> chunked: "first\n", then, once file F exists, "second\n"
                GET  /big?n=N        -> N bytes of "x", sized
  ws            a WebSocket echo server (PyPI websockets) on 127.0.0.1, port 0: "listening PORT"
  at PORT [ADDR [freebind]]
                one socket on ADDR:PORT (default 127.0.0.1; with freebind, IP_FREEBIND
                first, so ADDR need not be on any interface): prints "listening PORT"
"""

import json
import os
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def forever():
    while True:
        time.sleep(3600)


def listen(n):
    held = []
    for i in range(n):
        addr = "0.0.0.0" if i % 2 == 0 else "127.0.0.1"
        s = socket.socket()
        s.bind((addr, 0))
        s.listen()
        held.append(s)
    ports = " ".join(f"{s.getsockname()[1]}/{s.getsockname()[0]}" for s in held)
    say(f"pid {os.getpid()} ports {ports}")
    forever()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, body, content_type="application/json"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def echo(self, body=None):
        out = {"method": self.command, "path": self.path,
               "headers": {k.lower(): v for k, v in self.headers.items()}}
        if body is not None:
            out["body"] = body.decode("utf-8", "replace")
        self.reply(json.dumps(out))

    def do_GET(self):
        url = urlparse(self.path)
        if url.path.startswith("/stream"):
            gate = parse_qs(url.query)["gate"][0]
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.chunk(b"first\n")
            deadline = time.monotonic() + 30
            while not os.path.exists(gate) and time.monotonic() < deadline:
                time.sleep(0.01)
            self.chunk(b"second\n")
            self.chunk(b"")
        elif url.path.startswith("/big"):
            n = int(parse_qs(url.query)["n"][0])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            block = b"x" * 65536
            while n > 0:
                self.wfile.write(block[: min(n, len(block))])
                n -= min(n, len(block))
        else:
            self.echo()

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.echo(self.rfile.read(n))

    def chunk(self, data):
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def http():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    say(f"listening {server.server_address[1]}")
    server.serve_forever()


def ws():
    from websockets.sync.server import serve

    def echo(conn):
        for message in conn:
            conn.send(message)

    with serve(echo, "127.0.0.1", 0) as server:
        say(f"listening {server.socket.getsockname()[1]}")
        server.serve_forever()


def at(port, addr="127.0.0.1", freebind=False):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if freebind:
        s.setsockopt(socket.SOL_IP, 15, 1)  # IP_FREEBIND
    s.bind((addr, port))
    s.listen()
    say(f"listening {port}")
    forever()


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "listen":
        listen(int(sys.argv[2]))
    elif mode == "http":
        http()
    elif mode == "ws":
        ws()
    elif mode == "at":
        at(int(sys.argv[2]), *sys.argv[3:4], freebind=sys.argv[4:5] == ["freebind"])
    else:
        sys.exit(f"unknown mode {mode}")
