"""mcp-exec driven by the official Python MCP SDK (PyPI `mcp`, pinned in
interop/requirements.txt).

Everything goes through the SDK's public client: results are parsed into its
pydantic types, and `call_tool` revalidates `structuredContent` against the
tool's `outputSchema` (it raises on a mismatch or when structured content is
missing), so a passing call is also a schema check of our output.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

from conftest import Tap, server_params, wait_for

pytestmark = pytest.mark.anyio

# What the SDK offers in `initialize` (mcp_types.version.LATEST_HANDSHAKE_VERSION)
# and what we must answer with: our latest legacy revision, the same string.
NEGOTIATED = "2025-11-25"
# What the SDK's default mode speaks after its `server/discover` probe: the modern,
# stateless revision (per-request `_meta`, no `initialize`).
MODERN = "2026-07-28"

READ_ONLY = {"wait", "status", "output", "list_jobs", "download", "screen"}
DESTRUCTIVE = {"execute", "input", "kill", "upload", "shell_sessions"}


def payload(result: types.CallToolResult) -> dict:
    """The tool's `structuredContent`, checked against the text block: the text
    is the tool's JSON (docs/tools.md) in every revision, so for `wait` it is the bare array
    that `structuredContent` (an object, as MCP requires) carries under `results`."""
    assert result.is_error is False, result
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent)
    text = json.loads(result.content[0].text)
    assert result.structured_content == ({"results": text} if isinstance(text, list) else text)
    return result.structured_content


@pytest.fixture(params=["auto", "legacy"])
async def client(request: pytest.FixtureRequest):
    """A connected SDK client in the default (`auto`: it negotiates 2026-07-28) or
    `legacy` (`initialize`, 2025-11-25) mode: every test below runs in both eras."""
    async with Client(server_params(), mode=request.param) as c:
        yield c


async def test_default_mode_discovers_2026_07_28_and_never_initializes(tap: Tap) -> None:
    """The probe (`server/discover`) finds the modern server, so the SDK stays modern: no
    fallback to `initialize`, and every request carries its own `_meta`."""
    async with Client(server_params(tap), mode="auto") as c:
        assert c.protocol_version == MODERN
        assert c.session.initialize_result is None
        discovered = c.session.discover_result
        assert discovered is not None and MODERN in discovered.supported_versions
        assert c.server_info is not None and c.server_info.name == "mcp-exec"
        assert len((await c.list_tools()).tools) == 11
        payload(await c.call_tool("execute", {"command": "true"}))
    sent = tap.sent()
    methods = [m.get("method") for m in sent]
    assert methods[0] == "server/discover"
    assert "initialize" not in methods and "notifications/initialized" not in methods
    for m in sent:
        if "id" in m:
            meta = m["params"]["_meta"]
            assert meta["io.modelcontextprotocol/protocolVersion"] == MODERN, m
            assert isinstance(meta["io.modelcontextprotocol/clientCapabilities"], dict), m
    # Every result says what it is and who answered (2026-07-28: resultType, serverInfo).
    answers = [m for m in tap.received() if "result" in m]
    assert answers and all(m["result"]["resultType"] == "complete" for m in answers)
    assert all(m["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-exec" for m in answers)


async def test_legacy_mode_initializes_first_without_a_probe(tap: Tap) -> None:
    async with Client(server_params(tap), mode="legacy") as c:
        assert c.protocol_version == NEGOTIATED
        assert len((await c.list_tools()).tools) == 11
    methods = [m.get("method") for m in tap.sent()]
    assert methods[:2] == ["initialize", "notifications/initialized"]
    assert "server/discover" not in methods


async def test_list_tools_gives_titles_annotations_and_output_schemas(client: Client) -> None:
    listed = await client.list_tools()
    names = [t.name for t in listed.tools]
    assert names == ["execute", "wait", "status", "output", "input", "kill", "list_jobs", "upload", "download", "shell_sessions", "screen"]
    for tool in listed.tools:
        assert tool.title, tool.name
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        a = tool.annotations
        assert a is not None, tool.name
        if tool.name in READ_ONLY:
            assert a.read_only_hint is True, tool.name
        else:
            assert tool.name in DESTRUCTIVE
            assert a.read_only_hint is False and a.destructive_hint is True, tool.name
            assert a.idempotent_hint is False, tool.name


async def test_upload_declares_its_chatgpt_file_param_in_the_tool_meta(client: Client) -> None:
    """ChatGPT replaces the inputs named in `_meta["openai/fileParams"]`
    with a file reference; the SDK's Tool type carries `_meta` through."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    upload = tools["upload"]
    assert upload.meta == {"openai/fileParams": ["file"]}
    file = upload.input_schema["properties"]["file"]
    assert file["required"] == ["download_url", "file_id"]
    assert all(t.meta is None for name, t in tools.items() if name != "upload")


async def test_blocking_execute_reports_progress_while_the_job_runs(client: Client) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    result = await client.call_tool(
        "execute", {"command": "sleep 2.5; echo done"}, progress_callback=on_progress
    )
    job = payload(result)
    assert job["state"] == "success" and job["exit_code"] == 0
    assert job["stdout"]["data"] == "done\n"
    assert len(progress) >= 2, progress
    assert [p[0] for p in progress] == list(range(1, len(progress) + 1))
    # From 2025-03-26 on the message names the job; 2024-11-05 keeps
    # Part I's fixed "command still running".
    assert all(p[2] == f"{job['job_id']} still running" for p in progress), progress


async def test_nowait_then_wait_delivers_the_result_under_results(client: Client) -> None:
    started = payload(await client.call_tool("execute", {"command": "sleep 0.3; echo late", "nowait": True}))
    assert started["state"] == "running"
    job_id = started["job_id"]
    listed = payload(await client.call_tool("list_jobs", {}))
    assert listed["jobs"] == [{"job_id": job_id, "state": "running"}]

    waited = payload(await client.call_tool("wait", {"job_ids": [job_id], "timeout": 10}))
    [entry] = waited["results"]
    assert entry["job_id"] == job_id and entry["state"] == "success"
    assert entry["stdout"]["data"] == "late\n"
    assert payload(await client.call_tool("list_jobs", {}))["jobs"] == []


async def test_argument_errors_are_error_results_not_protocol_errors(client: Client) -> None:
    result = await client.call_tool("execute", {"command": "  "})
    assert result.is_error is True
    assert result.structured_content is None
    # Part II (2025-03-26 on) accepts `argv` too, and says so.
    assert result.content[0].text == '"command" or "argv" is required'


async def test_download_returns_an_embedded_resource_in_the_sdk_types(client: Client, tmp_path: Path) -> None:
    """`download`: the JSON as the text block (and structured content), the
    bytes as an embedded resource: a base64 blob for binary, text for UTF-8."""
    data = bytes(range(256))
    binary = tmp_path / "all.bin"
    up = await client.call_tool("upload", {"path": str(binary), "content_base64": base64.b64encode(data).decode()})
    assert up.is_error is False and up.structured_content["bytes"] == 256
    assert binary.read_bytes() == data

    result = await client.call_tool("download", {"path": str(binary)})
    assert result.is_error is False
    text, resource = result.content
    assert isinstance(text, types.TextContent)
    assert json.loads(text.text) == result.structured_content
    assert result.structured_content["sha256"] == hashlib.sha256(data).hexdigest()
    assert isinstance(resource, types.EmbeddedResource)
    assert isinstance(resource.resource, types.BlobResourceContents)
    assert str(resource.resource.uri) == f"file://{binary}"
    assert resource.resource.mime_type == "application/octet-stream"
    assert base64.b64decode(resource.resource.blob) == data

    note = tmp_path / "note.txt"
    await client.call_tool("upload", {"path": str(note), "text": "héllo"})
    result = await client.call_tool("download", {"path": str(note), "offset": 1})
    resource = result.content[1]
    assert isinstance(resource, types.EmbeddedResource)
    assert isinstance(resource.resource, types.TextResourceContents)
    assert resource.resource.text == "éllo"
    assert result.structured_content["total_bytes"] == len("héllo".encode())


def _processes_with(marker: str) -> list[int]:
    """Pids whose command line contains `marker`."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            pids.append(int(proc.name))
    return pids


def _children_of(pid: int) -> list[int]:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in children.split()]


def _alive(pid: int) -> bool:
    """Running or a zombie nobody reaped: either way not torn down."""
    return Path(f"/proc/{pid}").exists()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_call_abandoned_by_its_read_timeout_is_cancelled_and_its_job_torn_down(tap: Tap, mode: str) -> None:
    """On stdio both eras cancel with `notifications/cancelled` (2026-07-28 stdio:
    "the client MUST send a notifications/cancelled")."""
    marker = f"interop-abandoned-{time.monotonic_ns()}"
    # `; :` keeps the shell alive (no exec of the last command), so the
    # marker names the job's shell and its child is the `sleep 30`.
    command = f"sleep 30; : {marker}"
    async with Client(server_params(tap), mode=mode) as c:
        assert c.protocol_version == (MODERN if mode == "auto" else NEGOTIATED)
        outcome: dict[str, BaseException] = {}

        async def call() -> None:
            try:
                await c.call_tool("execute", {"command": command}, read_timeout_seconds=1.5)
            except MCPError as e:
                outcome["error"] = e

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            [shell] = await wait_for(lambda: _processes_with(marker), 5, "the job's shell")
            [sleeper] = await wait_for(lambda: _children_of(shell), 5, "the job's sleep")
        error = outcome["error"]
        assert isinstance(error, MCPError) and error.code == types.REQUEST_TIMEOUT, error

        await wait_for(lambda: not _alive(shell) and not _alive(sleeper), 10, "the job to be torn down")
        assert payload(await c.call_tool("list_jobs", {}))["jobs"] == []

    sent = tap.sent()
    call_id = next(m["id"] for m in sent if m.get("method") == "tools/call")
    cancels = [m for m in sent if m.get("method") == "notifications/cancelled"]
    assert [m["params"]["requestId"] for m in cancels] == [call_id]
    answer = next(m for m in tap.received() if m.get("id") == call_id)
    assert answer["error"]["code"] == -32800


@pytest.mark.parametrize("revision", ["2025-06-18", "2025-03-26", "2024-11-05"])
async def test_older_revisions_get_their_own_shapes_through_the_sdk_types(revision: str) -> None:
    """`Client` always offers 2025-11-25; the SDK's session API can offer an
    older revision, adopt it, and validate results for that revision."""
    async with stdio_client(server_params()) as (read, write):
        async with ClientSession(dispatcher=JSONRPCDispatcher(read, write)) as session:
            init = await session.send_request(
                types.InitializeRequest(
                    params=types.InitializeRequestParams(
                        protocol_version=revision,
                        capabilities=types.ClientCapabilities(),
                        client_info=types.Implementation(name="mcp-exec-interop", version="0"),
                    )
                ),
                types.InitializeResult,
            )
            assert init.protocol_version == revision
            session.adopt(init)
            await session.send_notification(types.InitializedNotification())
            assert session.protocol_version == revision

            tools = (await session.list_tools()).tools
            structured = revision >= "2025-06-18"
            for tool in tools:
                assert (tool.output_schema is not None) == structured, tool.name
                assert (tool.title is not None) == structured, tool.name
                assert (tool.annotations is not None) == (revision >= "2025-03-26"), tool.name

            result = await session.call_tool("execute", {"command": "echo hi"})
            assert result.is_error is False
            job = json.loads(result.content[0].text)
            assert job["state"] == "success" and job["stdout"]["data"] == "hi\n"
            assert result.structured_content == (job if structured else None)

            missing = await session.call_tool("execute", {"command": "  "})
            assert missing.is_error is True
            part_one = revision == "2024-11-05"
            expected = '"command" is required' if part_one else '"command" or "argv" is required'
            assert missing.content[0].text == expected
