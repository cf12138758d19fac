// mcp-exec driven by the official TypeScript MCP SDK (@modelcontextprotocol/sdk,
// pinned in package-lock.json) over StreamableHTTPClientTransport, against
// `mcp-exec --http 127.0.0.1:<port> --no-stdio`: once with a bearer token
// (requestInit headers), once without one (allowed on loopback).
//
// A wrapping `fetch` records every exchange, so the tests also check what the
// SDK does not expose: the token and session header on each request, SSE for
// a call with a progress token, DELETE on close.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startHttpServer } from './http-server.mjs';

const TOOLS = ['execute', 'wait', 'status', 'output', 'input', 'kill', 'list_jobs', 'upload', 'download', 'shell_sessions', 'screen'];

// See sdk.test.mjs: structuredContent checked against the text block.
function payload(result) {
  assert.equal(result.isError, false, JSON.stringify(result));
  assert.equal(result.content.length, 1);
  assert.equal(result.content[0].type, 'text');
  const text = JSON.parse(result.content[0].text);
  assert.deepEqual(result.structuredContent, Array.isArray(text) ? { results: text } : text);
  return result.structuredContent;
}

function recordingFetch(exchanges) {
  return async (url, init = {}) => {
    const response = await fetch(url, init);
    const headers = new Headers(init.headers);
    let rpc = null;
    if (init.method === 'POST' && typeof init.body === 'string') rpc = JSON.parse(init.body).method ?? null;
    exchanges.push({
      method: init.method ?? 'GET',
      rpc,
      status: response.status,
      contentType: (response.headers.get('content-type') ?? '').split(';')[0],
      authorization: headers.get('authorization'),
      session: headers.get('mcp-session-id'),
      protocolVersion: headers.get('mcp-protocol-version'),
    });
    return response;
  };
}

async function connect(server, exchanges, headers = server.headers) {
  const transport = new StreamableHTTPClientTransport(new URL(server.url), {
    requestInit: { headers },
    fetch: recordingFetch(exchanges),
  });
  const client = new Client({ name: 'mcp-exec-interop', version: '0.0.0' });
  await client.connect(transport);
  return { client, transport };
}

for (const token of ['interop-token-3f9c', null]) {
  describe(token ? 'with a bearer token' : 'without a token on loopback', () => {
    let server;
    let client;
    let transport;
    const exchanges = [];
    const calls = () => exchanges.filter((e) => e.rpc === 'tools/call');

    before(async () => {
      server = await startHttpServer(token);
      ({ client, transport } = await connect(server, exchanges));
    });

    after(async () => {
      await transport?.terminateSession();
      await client?.close();
      await server?.stop();
    });

    test('initialize opens a session; later requests carry it, the token and the revision', async () => {
      assert.equal(transport.protocolVersion, '2025-11-25');
      assert.match(transport.sessionId, /^[\x21-\x7e]{16,}$/);
      assert.equal(client.getServerVersion()?.name, 'mcp-exec');
      const { tools } = await client.listTools();
      assert.deepEqual(
        tools.map((t) => t.name),
        TOOLS,
      );
      assert.ok(tools.every((t) => t.outputSchema && t.annotations));
      const [init, ...later] = exchanges.filter((e) => e.method === 'POST');
      assert.equal(init.rpc, 'initialize');
      assert.equal(init.status, 200);
      assert.ok(later.length >= 2);
      for (const e of later) {
        assert.equal(e.session, transport.sessionId, JSON.stringify(e));
        assert.equal(e.protocolVersion, '2025-11-25', JSON.stringify(e));
      }
      for (const e of exchanges) assert.equal(e.authorization, token ? `Bearer ${token}` : null);
    });

    test('blocking execute returns stdout as plain JSON', async () => {
      const job = payload(await client.callTool({ name: 'execute', arguments: { command: 'echo hi' } }));
      assert.equal(job.state, 'success');
      assert.equal(job.exit_code, 0);
      assert.equal(job.stdout.data, 'hi\n');
      assert.equal(calls().at(-1).contentType, 'application/json');
    });

    test('blocking execute with onprogress streams progress over SSE', async () => {
      const progress = [];
      const job = payload(
        await client.callTool({ name: 'execute', arguments: { command: 'sleep 1.2; echo done' } }, undefined, {
          onprogress: (p) => progress.push(p),
        }),
      );
      assert.equal(job.stdout.data, 'done\n');
      assert.ok(progress.length >= 3, JSON.stringify(progress));
      assert.deepEqual(
        progress.map((p) => p.progress),
        progress.map((_, i) => i + 1),
      );
      assert.ok(progress.every((p) => p.message === `${job.job_id} still running`), JSON.stringify(progress));
      assert.equal(calls().at(-1).contentType, 'text/event-stream');
    });

    test('execute nowait then wait delivers the result under results', async () => {
      const started = payload(
        await client.callTool({ name: 'execute', arguments: { command: 'sleep 0.3; echo late', nowait: true } }),
      );
      assert.equal(started.state, 'running');
      const waited = payload(
        await client.callTool({ name: 'wait', arguments: { job_ids: [started.job_id], timeout: 10 } }),
      );
      assert.equal(waited.results.length, 1);
      assert.equal(waited.results[0].job_id, started.job_id);
      assert.equal(waited.results[0].state, 'success');
      assert.equal(waited.results[0].stdout.data, 'late\n');
      assert.deepEqual(payload(await client.callTool({ name: 'list_jobs', arguments: {} })).jobs, []);
    });

    test('terminateSession sends DELETE (204); the old session id is then 404', async () => {
      const other = [];
      const second = await connect(server, other);
      const id = second.transport.sessionId;
      await second.transport.terminateSession();
      assert.deepEqual(
        other.filter((e) => e.method === 'DELETE').map((e) => e.status),
        [204],
      );
      const response = await fetch(server.url, {
        method: 'POST',
        headers: {
          ...server.headers,
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
          'Mcp-Session-Id': id,
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      assert.equal(response.status, 404);
      await second.client.close();
    });

    if (token) {
      test('a wrong token is refused with 401 before any session exists', async () => {
        const refused = [];
        await assert.rejects(connect(server, refused, { Authorization: 'Bearer wrong' }));
        assert.ok(refused.length > 0 && refused.every((e) => e.status === 401), JSON.stringify(refused));
      });
    }
  });
}
