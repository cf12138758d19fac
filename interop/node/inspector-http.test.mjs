// The MCP Inspector CLI (@modelcontextprotocol/inspector, pinned in package.json
// devDependencies; run from node_modules) over Streamable HTTP: `--transport http`
// against `mcp-exec --http 127.0.0.1:<port> --no-stdio`, with the bearer token
// passed by `--header`, and once without a token (allowed on loopback).
// Every CLI run is a fresh session: a job started by one run is collected by the next.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
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

for (const token of ['interop-token-3f9c', null]) {
  describe(token ? 'with --header "Authorization: Bearer …"' : 'without a token on loopback', () => {
    let server;
    before(async () => {
      server = await startHttpServer(token);
    });
    after(async () => {
      await server?.stop();
    });

    test('--method tools/list lists the ten tools', async () => {
      const { tools } = await inspect(server, '--method', 'tools/list');
      assert.deepEqual(
        tools.map((t) => t.name),
        ['execute', 'wait', 'status', 'output', 'input', 'kill', 'list_jobs', 'upload', 'download', 'shell_sessions'],
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

    if (token) {
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
