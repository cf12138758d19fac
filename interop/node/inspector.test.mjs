// Smoke test with the MCP Inspector CLI (@modelcontextprotocol/inspector, pinned
// in package.json devDependencies; run from node_modules, never a fresh npx download).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const here = path.dirname(fileURLToPath(import.meta.url));
const binary = process.env.MCP_EXEC_BIN ?? path.resolve(here, '../../target/debug/mcp-exec');
const inspector = path.join(here, 'node_modules', '.bin', 'inspector');

async function inspect(...args) {
  const { stdout } = await promisify(execFile)(inspector, ['--cli', binary, ...args], {
    cwd: here,
    env: { ...process.env, MCP_EXEC_LOG: 'warn' },
    timeout: 60_000,
  });
  return JSON.parse(stdout);
}

test('inspector --method tools/list lists the eleven tools', async () => {
  const { tools } = await inspect('--method', 'tools/list');
  assert.deepEqual(
    tools.map((t) => t.name),
    ['execute', 'wait', 'status', 'output', 'input', 'kill', 'list_jobs', 'upload', 'download', 'shell_sessions', 'screen'],
  );
  assert.ok(tools.every((t) => t.outputSchema && t.annotations));
});

test('inspector --method tools/call runs execute', async () => {
  const result = await inspect('--method', 'tools/call', '--tool-name', 'execute', '--tool-arg', 'command=echo hi');
  assert.equal(result.isError, false);
  assert.equal(result.structuredContent.state, 'success');
  assert.equal(result.structuredContent.stdout.data, 'hi\n');
  assert.deepEqual(JSON.parse(result.content[0].text), result.structuredContent);
});

// The protocol era comes from a config file's `protocolEra` (the CLI has no flag for
// it): `legacy` (the Inspector's default: initialize) or `modern` (2026-07-28 pinned,
// no fallback, so a server that is not modern fails the run).
async function inspectEra(era, ...args) {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'mcp-exec-inspector-'));
  try {
    const config = path.join(dir, 'mcp.json');
    const server = { type: 'stdio', command: binary, env: { MCP_EXEC_LOG: 'warn' }, protocolEra: era };
    await fs.writeFile(config, JSON.stringify({ mcpServers: { 'mcp-exec': server } }));
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

// Each era's capabilities: 2025-11-25 Tasks in the legacy one, the Tasks extension in the modern one.
const CAPABILITIES = {
  legacy: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
  modern: { tools: {}, extensions: { 'io.modelcontextprotocol/tasks': {} } },
};

for (const [era, revision] of [['legacy', '2025-11-25'], ['modern', '2026-07-28']]) {
  test(`inspector in the ${era} era connects with ${revision} and runs execute`, async () => {
    const connected = await inspectEra(era, '--method', 'initialize');
    assert.equal(connected.protocolVersion, revision);
    assert.equal(connected.serverInfo.name, 'mcp-exec');
    assert.deepEqual(connected.capabilities, CAPABILITIES[era]);
    const { tools } = await inspectEra(era, '--method', 'tools/list');
    assert.equal(tools.length, 11);
    assert.ok(tools.every((t) => t.outputSchema && t.annotations));
    const result = await inspectEra(era, '--method', 'tools/call', '--tool-name', 'execute', '--tool-arg', 'command=echo hi');
    assert.equal(result.isError, false);
    assert.equal(result.structuredContent.stdout.data, 'hi\n');
  });
}
