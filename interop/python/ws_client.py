"""A real WebSocket client (PyPI `websockets`, pinned in interop/requirements.txt)
driven line by line by the Rust integration tests of `GET /jobs/<id>/tty`
(tests/http/tty.rs). Not a pytest module: the Rust test starts it with the
interop venv's python, writes one JSON command per line on its stdin and
reads one JSON answer per line on its stdout. Every wait has a timeout.

Commands (`name` names a connection; bytes travel as hex):
  {"op": "open", "name", "url", "headers"}   -> {"ok": true} | {"status", "body"} | {"error"}
  {"op": "send", "name", "binary"}           -> {"ok": true}   (binary: hex)
  {"op": "send", "name", "text"}             -> {"ok": true}
  {"op": "recv", "name", "timeout"}          -> {"binary"} | {"text"} | {"closed": {"code", "reason"}}
                                                | {"timeout": true}
  {"op": "collect", "name", "until", "timeout"}
        binary frames until their bytes contain `until` (hex), or the socket closes:
        -> {"binary", "texts", "closed"?}   ("timeout": true when neither happened in time)
  {"op": "close", "name", "abort"?}          -> {"ok": true}   (abort: drop the TCP connection
                                                without a closing handshake)
  {"op": "reconnects", "url", "headers", "count", "stop", "timeout"}
        reads the job's output across `count` forced reconnects: each connection asks for
        `since` = the bytes received so far, takes a few frames, and is closed (cleanly or
        aborted, alternately) mid-stream; after `count` of them, one sends `stop` (hex) as
        input and reads on until the exit frame.
        -> {"binary", "connections", "with_output", "exit", "gaps", "texts"}
        (`with_output`: the connections that were closed after receiving output, not after
        the exit frame: the forced reconnects that landed mid-stream)
"""

from __future__ import annotations

import json
import sys
import time

from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

connections = {}


def answer(value):
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def open_(cmd):
    try:
        ws = connect(
            cmd["url"],
            additional_headers=cmd.get("headers") or {},
            open_timeout=10,
            close_timeout=5,
            max_size=None,
            legacy=True,
        )
    except InvalidStatus as e:
        return {"status": e.response.status_code, "body": e.response.body.decode("utf-8", "replace")}
    except Exception as e:  # noqa: BLE001 - reported to the test
        return {"error": f"{type(e).__name__}: {e}"}
    connections[cmd["name"]] = ws
    return {"ok": True}


def frame(ws, timeout):
    try:
        m = ws.recv(timeout=timeout)
    except TimeoutError:
        return {"timeout": True}
    except ConnectionClosed as e:
        rcvd = e.rcvd
        return {"closed": {"code": rcvd.code if rcvd else None, "reason": rcvd.reason if rcvd else None}}
    if isinstance(m, bytes):
        return {"binary": m.hex()}
    return {"text": m}


def collect(ws, until, timeout):
    deadline = time.monotonic() + timeout
    data, texts = bytearray(), []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return {"binary": data.hex(), "texts": texts, "timeout": True}
        f = frame(ws, left)
        if "binary" in f:
            data += bytes.fromhex(f["binary"])
            if until is not None and until in data:
                return {"binary": data.hex(), "texts": texts}
        elif "text" in f:
            texts.append(f["text"])
        elif "closed" in f:
            return {"binary": data.hex(), "texts": texts, "closed": f["closed"]}
        else:
            return {"binary": data.hex(), "texts": texts, "timeout": True}


def reconnects(cmd):
    base, count = cmd["url"], cmd["count"]
    sep = "&" if "?" in base else "?"
    deadline = time.monotonic() + cmd["timeout"]
    data, texts, exit_, gaps, n, with_output = bytearray(), [], None, [], 0, 0
    while exit_ is None or n <= count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"after {n} connections and {len(data)} bytes")
        n += 1
        last = n > count
        ws = connect(f"{base}{sep}since={len(data)}", additional_headers=cmd.get("headers") or {},
                     open_timeout=10, close_timeout=5, max_size=None, legacy=True)
        frames = 0
        if last:
            ws.send(bytes.fromhex(cmd["stop"]))
        # A few frames per connection (1, 2 or 3), then close mid-stream.
        while last or frames < 1 + n % 3:
            f = frame(ws, max(0.1, deadline - time.monotonic()))
            if "binary" in f:
                data += bytes.fromhex(f["binary"])
                frames += 1
            elif "text" in f:
                value = json.loads(f["text"])
                if "exit" in value:
                    exit_ = value["exit"]
                    break
                if "gap" in value:
                    gaps.append(value["gap"])
                texts.append(f["text"])
            else:
                break
        else:
            with_output += 1
        if n % 2:
            ws.close()
        else:
            ws.socket.close()  # no closing handshake: the server finds the connection dropped
    return {"binary": data.hex(), "connections": n, "with_output": with_output, "exit": exit_,
            "gaps": gaps, "texts": texts}


def main():
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        try:
            if op == "open":
                answer(open_(cmd))
            elif op == "send":
                ws = connections[cmd["name"]]
                if "binary" in cmd:
                    ws.send(bytes.fromhex(cmd["binary"]))
                else:
                    ws.send(cmd["text"])
                answer({"ok": True})
            elif op == "recv":
                answer(frame(connections[cmd["name"]], cmd.get("timeout", 10)))
            elif op == "collect":
                until = bytes.fromhex(cmd["until"]) if cmd.get("until") is not None else None
                answer(collect(connections[cmd["name"]], until, cmd.get("timeout", 10)))
            elif op == "close":
                ws = connections.pop(cmd["name"])
                if cmd.get("abort"):
                    ws.socket.close()
                else:
                    ws.close()
                answer({"ok": True})
            elif op == "reconnects":
                answer(reconnects(cmd))
            else:
                answer({"error": f"unknown op {op}"})
        except Exception as e:  # noqa: BLE001 - reported to the test
            answer({"error": f"{type(e).__name__}: {e}"})


if __name__ == "__main__":
    main()
