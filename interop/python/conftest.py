"""Fixtures for driving mcp-exec with the official Python MCP SDK (PyPI `mcp`).

Every test starts its own server, over stdio or (`http_server`) over
Streamable HTTP on a free loopback port. `MCP_EXEC_BIN` names the binary
(interop/run.sh sets it; the default is the debug build of this checkout).
A wire tap (`tee` on both pipes) records what the SDK actually sent, so tests
can assert protocol facts the SDK does not expose (the discover probe, the
`notifications/cancelled` it sends on a read timeout).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters

REPO = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("MCP_EXEC_BIN", REPO / "target" / "debug" / "mcp-exec"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Tap:
    """The two halves of a tapped stdio session, one JSON message per line."""

    sent_path: Path
    received_path: Path

    @staticmethod
    def _read(path: Path) -> list[dict]:
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def sent(self) -> list[dict]:
        """Messages the client wrote to the server's stdin, in order."""
        return self._read(self.sent_path)

    def received(self) -> list[dict]:
        """Messages the server wrote to its stdout, in order."""
        return self._read(self.received_path)


def server_params(tap: Tap | None = None, **env: str) -> StdioServerParameters:
    """Launch parameters for mcp-exec, optionally behind a wire tap."""
    assert BINARY.is_file(), f"{BINARY} is missing: run `cargo build` (interop/run.sh does)"
    full_env = {**os.environ, "MCP_EXEC_PROGRESS_INTERVAL": "1", **env}
    if tap is None:
        return StdioServerParameters(command=str(BINARY), env=full_env)
    # `exec tee` keeps the pipeline's last stage as the process the SDK
    # signals; stdin EOF still flows through the first tee to the server.
    script = 'tee "$1" | "$2" | exec tee "$3"'
    return StdioServerParameters(
        command="/bin/sh",
        args=["-c", script, "sh", str(tap.sent_path), str(BINARY), str(tap.received_path)],
        env=full_env,
    )


@pytest.fixture
def tap(tmp_path: Path) -> Tap:
    return Tap(tmp_path / "sent.jsonl", tmp_path / "received.jsonl")


async def wait_for(cond: Callable[[], object], timeout: float, what: str) -> object:
    """Polls `cond` until it is truthy (returned) or `timeout` seconds pass (fails).

    Polling is the only option here: the facts we wait for (a process has
    gone from /proc, a file has a line) have no event a test can subscribe to.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        await anyio.sleep(0.05)


@dataclass
class HttpServer:
    """An mcp-exec serving Streamable HTTP only (`--http … --no-stdio`)."""

    url: str  # the MCP endpoint, http://127.0.0.1:<port>/mcp
    base: str  # http://127.0.0.1:<port>
    token: str | None
    process: subprocess.Popen

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthz(base: str) -> int | None:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=1) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


@contextlib.contextmanager
def http_server(token: str | None, **env: str) -> Iterator[HttpServer]:
    """Starts the server on a free loopback port, waits for `/healthz` 200,
    and at the end stops it with SIGTERM and checks it exits 0.

    Progress is every 0.2 s so a short blocking call yields several events."""
    assert BINARY.is_file(), f"{BINARY} is missing: run `cargo build` (interop/run.sh does)"
    full_env = {**os.environ, "MCP_EXEC_PROGRESS_INTERVAL": "0.2", "MCP_EXEC_LOG": "warn", **env}
    full_env.pop("MCP_EXEC_HTTP_TOKEN", None)
    full_env.pop("MCP_EXEC_HTTP_TOKEN_FILE", None)
    if token is not None:
        full_env["MCP_EXEC_HTTP_TOKEN"] = token
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [str(BINARY), "--http", f"127.0.0.1:{port}", "--no-stdio"],
        env=full_env,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while _healthz(base) != 200:
            assert process.poll() is None, f"mcp-exec exited with {process.returncode} before serving"
            assert time.monotonic() < deadline, "/healthz did not answer 200 within 10 s"
            time.sleep(0.05)
        yield HttpServer(f"{base}/mcp", base, token, process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            pytest.fail("mcp-exec did not exit within 15 s of SIGTERM")
    assert code == 0, f"mcp-exec exited {code} on SIGTERM"
