// mcp-exec driven by the official TypeScript MCP SDK (@modelcontextprotocol/sdk,
// pinned in package-lock.json) over StdioClientTransport.
//
// The SDK's output-schema validation stays on (its default Ajv validator):
// `callTool` throws when a tool that declares an outputSchema returns no
// structuredContent, or structuredContent that does not validate. So every
// successful call below is also a check of our structured output.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  CallToolResultSchema,
  EmbeddedResourceSchema,
  LATEST_PROTOCOL_VERSION,
} from '@modelcontextprotocol/sdk/types.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const binary = process.env.MCP_EXEC_BIN ?? path.resolve(here, '../../target/debug/mcp-exec');

let client;
let negotiated;

// The tool's structuredContent, checked against the text block: the text is the
// tool's JSON (docs/tools.md) in every revision, so for `wait` it is the bare array that
// structuredContent (an object, as MCP requires) carries under `results`.
function payload(result) {
  assert.equal(result.isError, false, JSON.stringify(result));
  assert.equal(result.content.length, 1);
  assert.equal(result.content[0].type, 'text');
  const text = JSON.parse(result.content[0].text);
  assert.deepEqual(result.structuredContent, Array.isArray(text) ? { results: text } : text);
  return result.structuredContent;
}

before(async () => {
  const transport = new StdioClientTransport({
    command: binary,
    env: { ...process.env, MCP_EXEC_LOG: 'warn' },
    stderr: 'inherit',
  });
  // The SDK hands the negotiated revision to transports that want it (the HTTP
  // ones); stdio has no such hook, so we add one to observe it.
  transport.setProtocolVersion = (version) => {
    negotiated = version;
  };
  client = new Client({ name: 'mcp-exec-interop', version: '0.0.0' });
  await client.connect(transport);
});

after(async () => {
  await client?.close();
});

test('initialize negotiates the SDK latest revision, 2025-11-25', () => {
  assert.equal(LATEST_PROTOCOL_VERSION, '2025-11-25');
  assert.equal(negotiated, '2025-11-25');
  assert.equal(client.getServerVersion()?.name, 'mcp-exec');
  // Tasks (docs/tasks.md): a 2025-11-25 session over stdio can list its tasks (one requestor).
  assert.deepEqual(client.getServerCapabilities(), {
    tools: {},
    tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
  });
});

test('tools/list gives eleven tools with titles, annotations and output schemas', async () => {
  const { tools } = await client.listTools();
  assert.deepEqual(
    tools.map((t) => t.name),
    ['execute', 'wait', 'status', 'output', 'input', 'kill', 'list_jobs', 'upload', 'download', 'shell_sessions', 'screen'],
  );
  for (const tool of tools) {
    assert.ok(tool.title, tool.name);
    assert.equal(tool.outputSchema?.type, 'object', tool.name);
    const readOnly = ['wait', 'status', 'output', 'list_jobs', 'download', 'screen'].includes(tool.name);
    assert.equal(tool.annotations?.readOnlyHint, readOnly, tool.name);
    if (!readOnly) {
      assert.equal(tool.annotations?.destructiveHint, true, tool.name);
      assert.equal(tool.annotations?.idempotentHint, false, tool.name);
    }
  }
});

test('the SDK output validator is active and rejects a result without job_id', async () => {
  // listTools caches one compiled validator per outputSchema; callTool uses it.
  await client.listTools();
  const validate = client.getToolOutputValidator('execute');
  assert.equal(typeof validate, 'function');
  assert.equal(validate({ state: 'success' }).valid, false);
  assert.equal(validate({ job_id: 'job-1', state: 'success', exit_code: 0 }).valid, true);
});

test('execute blocks and returns the job result as structured content', async () => {
  const job = payload(await client.callTool({ name: 'execute', arguments: { command: 'echo hi' } }));
  assert.equal(job.state, 'success');
  assert.equal(job.exit_code, 0);
  assert.equal(job.stdout.data, 'hi\n');
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
});

test('kill terminates a running job and reports the verified death', async () => {
  const started = payload(
    await client.callTool({ name: 'execute', arguments: { command: 'sleep 30', nowait: true } }),
  );
  const killed = payload(
    await client.callTool({ name: 'kill', arguments: { job_id: started.job_id, signal: 'TERM', timeout: 5 } }),
  );
  assert.equal(killed.job_id, started.job_id);
  assert.equal(killed.terminated, true);
  assert.equal(killed.signal_sent, 15);
  assert.equal(killed.result.state, 'error');
  assert.equal(killed.result.signal, 'terminated');
  const listed = payload(await client.callTool({ name: 'list_jobs', arguments: {} }));
  assert.deepEqual(listed.jobs, []);
});

// `download`: the JSON as the text block (and structured content), the bytes
// as an embedded resource the SDK's own schemas accept: a base64 blob for
// binary, text for UTF-8.
test('download returns an embedded resource the SDK schemas parse', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-exec-interop-'));
  try {
    const data = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const file = path.join(dir, 'all.bin');
    const up = payload(
      await client.callTool({ name: 'upload', arguments: { path: file, content_base64: data.toString('base64') } }),
    );
    assert.equal(up.bytes, 256);
    assert.deepEqual(fs.readFileSync(file), data);

    const result = CallToolResultSchema.parse(
      await client.callTool({ name: 'download', arguments: { path: file } }),
    );
    assert.equal(result.isError, false);
    assert.equal(result.content.length, 2);
    const [text, embedded] = result.content;
    assert.equal(text.type, 'text');
    assert.deepEqual(JSON.parse(text.text), result.structuredContent);
    assert.equal(result.structuredContent.sha256, crypto.createHash('sha256').update(data).digest('hex'));
    const resource = EmbeddedResourceSchema.parse(embedded).resource;
    assert.equal(resource.uri, `file://${file}`);
    assert.equal(resource.mimeType, 'application/octet-stream');
    assert.deepEqual(Buffer.from(resource.blob, 'base64'), data);

    const note = path.join(dir, 'note.txt');
    await client.callTool({ name: 'upload', arguments: { path: note, text: 'héllo' } });
    const page = await client.callTool({ name: 'download', arguments: { path: note, offset: 1 } });
    const textResource = EmbeddedResourceSchema.parse(page.content[1]).resource;
    assert.equal(textResource.text, 'éllo');
    assert.equal(page.structuredContent.total_bytes, Buffer.byteLength('héllo'));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
