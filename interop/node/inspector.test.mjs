// Smoke test with the MCP Inspector CLI (@modelcontextprotocol/inspector, pinned
// in package.json devDependencies; run from node_modules, never a fresh npx download).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
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

test('inspector --method tools/list lists the ten tools', async () => {
  const { tools } = await inspect('--method', 'tools/list');
  assert.deepEqual(
    tools.map((t) => t.name),
    ['execute', 'wait', 'status', 'output', 'input', 'kill', 'list_jobs', 'upload', 'download', 'shell_sessions'],
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
