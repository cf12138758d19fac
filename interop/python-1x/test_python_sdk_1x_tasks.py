"""mcp-exec's 2025-11-25 Tasks (SEP-1686, docs/tasks.md) driven by the last 1.x release of
the official Python SDK (PyPI `mcp`, pinned in requirements.txt here; interop/python pins
2.x, which dropped the experimental Tasks client): `session.experimental.call_tool_as_task`,
`get_task`, `get_task_result`, `list_tasks`, `cancel_task`, over stdio and over Streamable
HTTP with a token. Each test starts and ends its own server. `MCP_EXEC_BIN` names the
binary (interop/run.sh sets it; default: the debug build of this checkout).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
import urllib.request
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

REPO = Path(__file__).resolve().parents[2]
BINARY = str(Path(os.environ.get("MCP_EXEC_BIN", REPO / "target" / "debug" / "mcp-exec")))
TOKEN = "interop-1x-token"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def over_stdio():
    env = {**os.environ, "MCP_EXEC_LOG": "warn"}
    async with stdio_client(StdioServerParameters(command=BINARY, env=env)) as (r, w):
        async with ClientSession(r, w) as session:
            await session.initialize()
            yield session


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@asynccontextmanager
async def over_http():
    port = free_port()
    env = {**os.environ, "MCP_EXEC_LOG": "warn", "MCP_EXEC_HTTP_TOKEN": TOKEN}
    env.pop("MCP_EXEC_HTTP_TOKEN_FILE", None)
    server = subprocess.Popen([BINARY, "--http", f"127.0.0.1:{port}", "--no-stdio"], env=env)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with streamablehttp_client(f"http://127.0.0.1:{port}/mcp", headers=headers) as (r, w, _):
            async with ClientSession(r, w) as session:
                await session.initialize()
                yield session
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


TRANSPORTS = pytest.mark.parametrize("connect", [over_stdio, over_http], ids=["stdio", "http"])


async def poll(session: ClientSession, task_id: str, done) -> types.GetTaskResult:
    with anyio.fail_after(10):
        while True:
            task = await session.experimental.get_task(task_id)
            if done(task):
                return task
            await anyio.sleep(0.02)


@pytest.mark.anyio
@TRANSPORTS
async def test_create_poll_and_result_identical_on_every_call(connect) -> None:
    async with connect() as session:
        init = session.get_server_capabilities()
        assert init is not None and init.tasks is not None and init.tasks.requests is not None
        created = await session.experimental.call_tool_as_task(
            "execute", {"command": "sleep 0.3; echo from-python-1x"}, ttl=60000
        )
        task_id = created.task.taskId
        assert re.fullmatch(r"[0-9a-f]{32}", task_id)
        assert created.task.status == "working"
        assert created.task.ttl == 60000
        task = await poll(session, task_id, lambda t: t.status != "working")
        assert task.status == "completed"
        first = await session.experimental.get_task_result(task_id, types.CallToolResult)
        again = await session.experimental.get_task_result(task_id, types.CallToolResult)
        assert first == again
        assert first.isError is False
        assert first.structuredContent["stdout"]["data"] == "from-python-1x\n"
        listed = await session.experimental.list_tasks()
        assert task_id in [t.taskId for t in listed.tasks]


@pytest.mark.anyio
@TRANSPORTS
async def test_cancel_is_cancelled_at_once_and_the_job_dies(connect) -> None:
    async with connect() as session:
        created = await session.experimental.call_tool_as_task("execute", {"command": "sleep 60"})
        task_id = created.task.taskId
        job = created.task.statusMessage.split(" ")[0]
        cancelled = await session.experimental.cancel_task(task_id)
        assert cancelled.status == "cancelled"
        task = await poll(session, task_id, lambda t: "verified" in (t.statusMessage or ""))
        assert task.status == "cancelled"
        assert "process group is dead" in task.statusMessage
        status = await session.call_tool("status", {"job_id": job})
        assert status.isError is True  # the cancelled job was removed
