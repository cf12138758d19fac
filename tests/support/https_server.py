"""A local HTTPS server for the tests of upload's `file` source (docs/files.md).

Python's standard library only (http.server + ssl); certificates are made
at start with the `openssl` CLI in a fresh directory: a throwaway CA, a
server certificate it signs for 127.0.0.1 / localhost, and a second,
untrusted CA whose certificate the second listener serves.

Usage: python3 https_server.py DIR — DIR holds the files served under
/file/<name>. Prints one JSON line {port, untrusted_port, plain_port, ca}
and serves until its stdin closes (the test holds it), so the server never
outlives the test. Loopback only.

Routes (GET):
  /file/<name>              the file, with Content-Length, in 256 KiB writes
  /status/<code>            that status, a short body
  /redirect/<n>?to=<path>   302 to /redirect/<n-1>..., then to <path>
  /relative?to=<rel>        302 with a relative Location
  /to-http?to=<path>        302 to http://127.0.0.1:<plain_port><path>
  /chunked?size=<n>         n bytes, chunked, no Content-Length
  /claims?length=<n>        Content-Length: n, then nothing for 60 s
  /stall                    Content-Length: 1000, 10 bytes, then 60 s of nothing
"""

import http.server
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

SERVE_DIR = sys.argv[1]
CERTS = tempfile.mkdtemp(prefix="mcp-exec-https-")


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, cwd=CERTS,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_ca(name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "2", "-subj", f"/CN=mcp-exec test {name}",
            "-keyout", f"{name}.key", "-out", f"{name}.pem",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")


def make_leaf(name, ca):
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-subj", "/CN=localhost", "-keyout", f"{name}.key", "-out", f"{name}.csr")
    with open(os.path.join(CERTS, f"{name}.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                "basicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem")


make_ca("ca")
make_leaf("server", "ca")
make_ca("rogue")
make_leaf("rogue-server", "rogue")

PLAIN_PORT = [0]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_body(self, code, body=b""):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def redirect(self, location):
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        parts = url.path.strip("/").split("/")
        try:
            self.route(parts, query)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass

    def route(self, parts, query):
        head = parts[0]
        if head == "file" and len(parts) == 2:
            path = os.path.join(SERVE_DIR, parts[1])
            if not os.path.isfile(path):
                return self.send_body(404, b"no such file\n")
            self.send_response(200)
            self.send_header("Content-Length", str(os.path.getsize(path)))
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            with open(path, "rb") as f:
                shutil.copyfileobj(f, self.wfile, 256 * 1024)
        elif head == "status":
            self.send_body(int(parts[1]), b"status page\n")
        elif head == "redirect":
            n = int(parts[1])
            to = query.get("to", "/file/a")
            if n <= 0:
                return self.redirect(to)
            self.redirect(f"/redirect/{n - 1}?" + urllib.parse.urlencode({"to": to}))
        elif head == "relative":
            self.redirect(query["to"])
        elif head == "to-http":
            self.redirect(f"http://127.0.0.1:{PLAIN_PORT[0]}{query.get('to', '/file/a')}")
        elif head == "chunked":
            size = int(query["size"])
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"z" * 65536
            sent = 0
            while sent < size:
                piece = chunk[: min(len(chunk), size - sent)]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                sent += len(piece)
            self.wfile.write(b"0\r\n\r\n")
        elif head == "claims":
            self.send_response(200)
            self.send_header("Content-Length", query["length"])
            self.end_headers()
            self.wfile.flush()
            time.sleep(60)
        elif head == "stall":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"0123456789")
            self.wfile.flush()
            time.sleep(60)
        else:
            self.send_body(404, b"no such route\n")


def listener(cert=None):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(CERTS, f"{cert}.pem"), os.path.join(CERTS, f"{cert}.key"))
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


port = listener("server")
untrusted_port = listener("rogue-server")
PLAIN_PORT[0] = listener(None)
print(json.dumps({"port": port, "untrusted_port": untrusted_port, "plain_port": PLAIN_PORT[0],
                  "ca": os.path.join(CERTS, "ca.pem"), "certs": CERTS}), flush=True)
sys.stdin.read()
shutil.rmtree(CERTS, ignore_errors=True)
