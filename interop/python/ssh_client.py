"""mcp-exec as a stdio MCP server on a remote host over `ssh -T`,
driven by the official Python MCP SDK's stdio client, for tests/ssh.rs.

Usage: ssh_client.py '<the ssh command line as a JSON array>' <marker>

The SDK starts the ssh command line as its server process. The script lists
the tools, runs a command, starts a job with `nowait` and `wait`s for it,
then starts a long job whose command line carries <marker>, and prints one
JSON line with what it saw (the remote server's pid among it). Then it
waits for a line on its stdin and closes the client: the test checks that
the remote server and its job are gone after that.
"""

from __future__ import annotations

import json
import sys

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters


def payload(result: types.CallToolResult) -> dict:
    assert result.is_error is False, result
    return result.structured_content


async def main() -> None:
    command = json.loads(sys.argv[1])
    marker = sys.argv[2]
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with Client(params) as c:
        tools = sorted(t.name for t in (await c.list_tools()).tools)
        # $PPID of the job's shell is the server that started it.
        ran = payload(await c.call_tool("execute", {"command": "echo hello over ssh; echo $PPID"}))
        hello, server_pid = ran["stdout"]["data"].splitlines()
        started = payload(await c.call_tool("execute", {"command": "sleep 0.3; echo late", "nowait": True}))
        waited = payload(await c.call_tool("wait", {"job_ids": [started["job_id"]], "timeout": 10}))
        [entry] = waited["results"]
        long = payload(await c.call_tool("execute", {"command": f"sleep 300; : {marker}", "nowait": True}))
        print(
            json.dumps(
                {
                    "tools": tools,
                    "hello": hello,
                    "exit_code": ran["exit_code"],
                    "server_pid": int(server_pid),
                    "nowait_state": started["state"],
                    "waited": {"state": entry["state"], "stdout": entry["stdout"]["data"]},
                    "long_state": long["state"],
                }
            ),
            flush=True,
        )
        await anyio.to_thread.run_sync(sys.stdin.readline)
    print(json.dumps({"closed": True}), flush=True)


if __name__ == "__main__":
    anyio.run(main)
