"""mcp-exec driven by the official Python MCP SDK (PyPI `mcp`) over Streamable
HTTP: `streamable_http_client` on an httpx2 client that carries the bearer
token, against `mcp-exec --http 127.0.0.1:<port> --no-stdio`.

Each test runs twice: with a token (`MCP_EXEC_HTTP_TOKEN`) and without one
(allowed on loopback), and the `client` tests once per era: the SDK's default
mode (it probes `server/discover` and speaks 2026-07-28: stateless, no
`Mcp-Session-Id`) and its `legacy` mode (`initialize`, 2025-11-25). An httpx2
event hook records every exchange, so the tests can also check the HTTP facts
the SDK does not expose: the session header, the bearer token and the routing
headers on every request, SSE for a call with a progress token.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import HttpServer, http_server, wait_for

pytestmark = pytest.mark.anyio

NEGOTIATED = "2025-11-25"
MODERN = "2026-07-28"
TOOLS = ["execute", "wait", "status", "output", "input", "kill", "list_jobs", "upload", "download", "shell_sessions", "screen"]


@dataclass
class Exchange:
    method: str  # HTTP method
    rpc: str | None  # the JSON-RPC method of a POST body, None for a response or no body
    status: int
    content_type: str
    authorization: str | None
    session: str | None  # Mcp-Session-Id sent with the request
    minted: str | None  # Mcp-Session-Id the response carried
    version: str | None  # MCP-Protocol-Version sent
    mcp_method: str | None  # Mcp-Method sent
    mcp_name: str | None  # Mcp-Name sent


@dataclass
class Wire:
    exchanges: list[Exchange] = field(default_factory=list)

    async def on_response(self, response: httpx2.Response) -> None:
        request = response.request
        rpc = None
        if request.method == "POST":
            body = json.loads(request.content)
            rpc = body.get("method") if isinstance(body, dict) else None
        self.exchanges.append(
            Exchange(
                request.method,
                rpc,
                response.status_code,
                response.headers.get("content-type", "").split(";")[0],
                request.headers.get("authorization"),
                request.headers.get("mcp-session-id"),
                response.headers.get("mcp-session-id"),
                request.headers.get("mcp-protocol-version"),
                request.headers.get("mcp-method"),
                request.headers.get("mcp-name"),
            )
        )

    def posts(self, rpc: str) -> list[Exchange]:
        return [e for e in self.exchanges if e.rpc == rpc]


def payload(result: types.CallToolResult) -> dict:
    """`structuredContent`, checked against the text block (see test_python_sdk.py)."""
    assert result.is_error is False, result
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent)
    text = json.loads(result.content[0].text)
    assert result.structured_content == ({"results": text} if isinstance(text, list) else text)
    return result.structured_content


@pytest.fixture(params=["token", "no-token"])
def server(request: pytest.FixtureRequest):
    with http_server("interop-token-3f9c" if request.param == "token" else None) as s:
        yield s


def connect(server: HttpServer, wire: Wire, mode: str = "auto", headers: dict[str, str] | None = None) -> Client:
    http = create_mcp_http_client(headers=server.headers() if headers is None else headers)
    http.event_hooks["response"].append(wire.on_response)
    return Client(streamable_http_client(server.url, http_client=http), mode=mode)


@pytest.fixture(params=["auto", "legacy"])
async def client(request: pytest.FixtureRequest, server: HttpServer) -> AsyncIterator[tuple[Client, Wire]]:
    wire = Wire()
    async with connect(server, wire, request.param) as c:
        assert c.protocol_version == (MODERN if request.param == "auto" else NEGOTIATED)
        yield c, wire
    deletes = [e.status for e in wire.exchanges if e.method == "DELETE"]
    if request.param == "legacy":
        # Closing the client ends the session with DELETE /mcp.
        assert deletes == [204]
    else:
        # 2026-07-28 has no session: none minted, none sent, none to end.
        assert deletes == []
        assert all(e.session is None and e.minted is None for e in wire.exchanges), wire.exchanges


async def test_initialize_opens_a_session_and_every_request_carries_it_and_the_token(server: HttpServer) -> None:
    wire = Wire()
    async with connect(server, wire, "legacy") as c:
        assert c.protocol_version == NEGOTIATED
        assert c.server_info is not None and c.server_info.name == "mcp-exec"
        listed = await c.list_tools()
        assert [t.name for t in listed.tools] == TOOLS
        assert all(t.output_schema is not None and t.annotations is not None for t in listed.tools)

    [init] = wire.posts("initialize")
    assert init.status == 200 and init.session is None and init.minted
    later = [e for e in wire.exchanges if e.rpc != "initialize"]
    assert later and all(e.session == init.minted for e in later), later
    expected = f"Bearer {server.token}" if server.token else None
    assert all(e.authorization == expected for e in wire.exchanges)


async def test_default_mode_speaks_2026_07_28_statelessly_with_the_token_and_routing_headers(
    server: HttpServer,
) -> None:
    """The SDK's `server/discover` probe is answered (no 400, no
    fallback), then every request is its own: no `initialize`, no GET stream, no
    `Mcp-Session-Id`, the token, `MCP-Protocol-Version`, `Mcp-Method` and (for
    `tools/call`) `Mcp-Name` on each."""
    wire = Wire()
    async with connect(server, wire, "auto") as c:
        assert c.protocol_version == MODERN
        assert c.session.initialize_result is None
        assert c.server_info is not None and c.server_info.name == "mcp-exec"
        listed = await c.list_tools()
        assert [t.name for t in listed.tools] == TOOLS
        assert all(t.output_schema is not None and t.annotations is not None for t in listed.tools)
        payload(await c.call_tool("execute", {"command": "true"}))
    calls = [(e.method, e.rpc, e.status) for e in wire.exchanges]
    assert calls == [
        ("POST", "server/discover", 200),
        ("POST", "tools/list", 200),
        ("POST", "tools/call", 200),
    ]
    expected = f"Bearer {server.token}" if server.token else None
    for e in wire.exchanges:
        assert e.authorization == expected and e.session is None and e.minted is None, e
        assert e.version == MODERN and e.mcp_method == e.rpc, e
    assert wire.posts("tools/call")[0].mcp_name == "execute"


async def test_blocking_execute_streams_progress_over_sse(client: tuple[Client, Wire]) -> None:
    c, wire = client
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    job = payload(await c.call_tool("execute", {"command": "sleep 1.2; echo done"}, progress_callback=on_progress))
    assert job["state"] == "success" and job["exit_code"] == 0
    assert job["stdout"]["data"] == "done\n"
    # MCP_EXEC_PROGRESS_INTERVAL=0.2: about six events in 1.2 s.
    assert len(progress) >= 3, progress
    assert [p[0] for p in progress] == list(range(1, len(progress) + 1))
    assert all(p[2] == f"{job['job_id']} still running" for p in progress), progress
    [call] = wire.posts("tools/call")
    assert call.status == 200 and call.content_type == "text/event-stream"


async def test_blocking_execute_without_a_progress_token_is_plain_json(client: tuple[Client, Wire]) -> None:
    c, wire = client
    job = payload(
        await c.call_tool("execute", {"command": "echo hi; echo oops >&2", "capture": {"on_success": "all"}})
    )
    assert job["state"] == "success"
    assert job["stdout"]["data"] == "hi\n" and job["stderr"]["data"] == "oops\n"
    [call] = wire.posts("tools/call")
    assert call.status == 200 and call.content_type == "application/json"


async def test_nowait_then_wait_round_trip(client: tuple[Client, Wire]) -> None:
    c, _ = client
    started = payload(await c.call_tool("execute", {"command": "sleep 0.3; echo late", "nowait": True}))
    assert started["state"] == "running"
    job_id = started["job_id"]
    assert payload(await c.call_tool("list_jobs", {}))["jobs"] == [{"job_id": job_id, "state": "running"}]
    [entry] = payload(await c.call_tool("wait", {"job_ids": [job_id], "timeout": 10}))["results"]
    assert entry["job_id"] == job_id and entry["state"] == "success"
    assert entry["stdout"]["data"] == "late\n"
    assert payload(await c.call_tool("list_jobs", {}))["jobs"] == []


@pytest.mark.parametrize("first_mode, second_mode", [("legacy", "legacy"), ("auto", "legacy"), ("legacy", "auto")])
async def test_a_job_started_by_one_client_is_collected_by_another_in_either_era(
    server: HttpServer, first_mode: str, second_mode: str
) -> None:
    """The jobs are the same jobs in both eras: a job started in one
    HTTP session, or by a stateless 2026-07-28 request, is waited for by the other."""
    first, second = Wire(), Wire()
    async with connect(server, first, first_mode) as c:
        job_id = payload(await c.call_tool("execute", {"command": "sleep 0.3; echo x", "nowait": True}))["job_id"]
    async with connect(server, second, second_mode) as c:
        [entry] = payload(await c.call_tool("wait", {"job_ids": [job_id], "timeout": 10}))["results"]
        assert entry["state"] == "success" and entry["stdout"]["data"] == "x\n"
    if first_mode == second_mode == "legacy":
        assert first.posts("tools/call")[0].session != second.posts("tools/call")[0].session


async def test_a_2026_07_28_call_whose_stream_the_sdk_closes_is_cancelled_and_its_job_torn_down(
    server: HttpServer,
) -> None:
    """2026-07-28 Streamable HTTP: a closed response stream IS the cancellation,
    and no notifications/cancelled is sent; a blocking `execute` cancelled that way
    tears its job down."""
    from test_python_sdk import _alive, _children_of, _processes_with

    marker = f"interop-http-abandoned-{time.monotonic_ns()}"
    wire = Wire()
    async with connect(server, wire, "auto") as c:
        assert c.protocol_version == MODERN
        outcome: dict[str, BaseException] = {}

        async def call() -> None:
            try:
                await c.call_tool("execute", {"command": f"sleep 30; : {marker}"}, read_timeout_seconds=1.5)
            except MCPError as e:
                outcome["error"] = e

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            [shell] = await wait_for(lambda: _processes_with(marker), 5, "the job's shell")
            [sleeper] = await wait_for(lambda: _children_of(shell), 5, "the job's sleep")
        assert isinstance(outcome.get("error"), MCPError), outcome
        await wait_for(lambda: not _alive(shell) and not _alive(sleeper), 10, "the job to be torn down")
        assert payload(await c.call_tool("list_jobs", {}))["jobs"] == []
    assert wire.posts("notifications/cancelled") == []


@pytest.mark.parametrize("sent", [None, "Bearer wrong-token"])
async def test_a_missing_or_wrong_token_is_refused_with_401(sent: str | None) -> None:
    with http_server("interop-token-3f9c") as server:
        wire = Wire()
        # The transport turns the 401 into an MCPError, raised out of its task group.
        with pytest.raises(ExceptionGroup) as raised:
            async with connect(server, wire, "legacy", {} if sent is None else {"Authorization": sent}):
                pass
        assert raised.group_contains(MCPError, depth=None), raised.value
        assert wire.exchanges and all(e.status == 401 for e in wire.exchanges), wire.exchanges
