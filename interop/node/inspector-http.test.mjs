// The MCP Inspector CLI (@modelcontextprotocol/inspector, pinned in package.json
// devDependencies; run from node_modules) over Streamable HTTP: `--transport http`
// against `mcp-exec --http 127.0.0.1:<port> --no-stdio`, with the bearer token
// passed by `--header`, and once without a token (allowed on loopback).
// Every CLI run is a fresh session: a job started by one run is collected by the next.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startHttpServer } from './http-server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const inspector = path.join(here, 'node_modules', '.bin', 'inspector');

function run(server, headers, args) {
  const header = Object.entries(headers).flatMap(([name, value]) => ['--header', `${name}: ${value}`]);
  return promisify(execFile)(inspector, ['--cli', server.url, '--transport', 'http', ...header, ...args], {
    cwd: here,
    timeout: 60_000,
  });
}

async function inspect(server, ...args) {
  const { stdout } = await run(server, server.headers, args);
  return JSON.parse(stdout);
}

// A run in a protocol era, which only a config file can name (`protocolEra`):
// `modern` pins 2026-07-28 with no fallback to initialize.
async function inspectEra(server, era, ...args) {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'mcp-exec-inspector-'));
  try {
    const config = path.join(dir, 'mcp.json');
    const entry = { type: 'http', url: server.url, headers: server.headers, protocolEra: era };
    await fs.writeFile(config, JSON.stringify({ mcpServers: { 'mcp-exec': entry } }));
    const { stdout } = await promisify(execFile)(
      inspector,
      ['--cli', '--config', config, '--server', 'mcp-exec', ...args],
      { cwd: here, env: { ...process.env, MCP_INSPECTOR_SECRET_STORE: 'memory' }, timeout: 60_000 },
    );
    return JSON.parse(stdout);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

for (const token of ['interop-token-3f9c', null]) {
  describe(token ? 'with --header "Authorization: Bearer …"' : 'without a token on loopback', () => {
    let server;
    before(async () => {
      server = await startHttpServer(token);
    });
    after(async () => {
      await server?.stop();
    });

    test('--method tools/list lists the eleven tools', async () => {
      const { tools } = await inspect(server, '--method', 'tools/list');
      assert.deepEqual(
        tools.map((t) => t.name),
        ['execute', 'wait', 'status', 'output', 'input', 'kill', 'list_jobs', 'upload', 'download', 'shell_sessions', 'screen'],
      );
      assert.ok(tools.every((t) => t.outputSchema && t.annotations));
    });

    test('--method tools/call runs a blocking execute', async () => {
      const result = await inspect(
        server,
        ...['--method', 'tools/call', '--tool-name', 'execute', '--tool-arg', 'command=echo hi'],
      );
      assert.equal(result.isError, false);
      assert.equal(result.structuredContent.state, 'success');
      assert.equal(result.structuredContent.stdout.data, 'hi\n');
      assert.deepEqual(JSON.parse(result.content[0].text), result.structuredContent);
    });

    test('execute nowait in one run, wait in the next', async () => {
      const started = await inspect(
        server,
        ...['--method', 'tools/call', '--tool-name', 'execute'],
        ...['--tool-arg', 'command=sleep 0.3; echo late', 'nowait=true'],
      );
      assert.equal(started.structuredContent.state, 'running');
      const jobId = started.structuredContent.job_id;
      const waited = await inspect(
        server,
        ...['--method', 'tools/call', '--tool-name', 'wait'],
        ...['--tool-arg', `job_ids=${JSON.stringify([jobId])}`, 'timeout=10'],
      );
      assert.equal(waited.isError, false);
      const [entry] = waited.structuredContent.results;
      assert.equal(entry.job_id, jobId);
      assert.equal(entry.state, 'success');
      assert.equal(entry.stdout.data, 'late\n');
    });

    test('the modern era speaks 2026-07-28 on the same listener', async () => {
      const connected = await inspectEra(server, 'modern', '--method', 'initialize');
      assert.equal(connected.protocolVersion, '2026-07-28');
      assert.equal(connected.serverInfo.name, 'mcp-exec');
      const { tools } = await inspectEra(server, 'modern', '--method', 'tools/list');
      assert.equal(tools.length, 11);
      const legacy = await inspectEra(server, 'legacy', '--method', 'initialize');
      assert.equal(legacy.protocolVersion, '2025-11-25');
    });

    test('a job started in the modern era is collected in the legacy one', async () => {
      const started = await inspectEra(
        server,
        'modern',
        ...['--method', 'tools/call', '--tool-name', 'execute'],
        ...['--tool-arg', 'command=sleep 0.3; echo both', 'nowait=true'],
      );
      assert.equal(started.structuredContent.state, 'running');
      const jobId = started.structuredContent.job_id;
      const waited = await inspectEra(
        server,
        'legacy',
        ...['--method', 'tools/call', '--tool-name', 'wait'],
        ...['--tool-arg', `job_ids=${JSON.stringify([jobId])}`, 'timeout=10'],
      );
      const [entry] = waited.structuredContent.results;
      assert.equal(entry.job_id, jobId);
      assert.equal(entry.stdout.data, 'both\n');
    });

    if (token) {
      test('a modern run without the token fails (401)', async () => {
        await assert.rejects(inspectEra({ ...server, headers: {} }, 'modern', '--method', 'tools/list'), (e) => {
          assert.notEqual(e.code, 0);
          assert.doesNotMatch(e.stdout ?? '', /"tools"/);
          return true;
        });
      });

      test('a wrong token fails the run (401)', async () => {
        await assert.rejects(run(server, { Authorization: 'Bearer wrong' }, ['--method', 'tools/list']), (e) => {
          assert.notEqual(e.code, 0);
          assert.doesNotMatch(e.stdout, /"tools"/);
          return true;
        });
      });
    }
  });
}
