// mcp-exec's 2025-11-25 Tasks (SEP-1686, docs/tasks.md) driven by the TypeScript SDK
// 1.32.2's experimental client (`client.experimental.tasks`): create (callToolStream
// with a task), poll (getTask), result (getTaskResult), list, cancel; over stdio
// and over Streamable HTTP with a token.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { startHttpServer } from './http-server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const binary = process.env.MCP_EXEC_BIN ?? path.resolve(here, '../../target/debug/mcp-exec');

async function stdioClient() {
  const transport = new StdioClientTransport({
    command: binary,
    env: { ...process.env, MCP_EXEC_LOG: 'warn' },
    stderr: 'inherit',
  });
  const client = new Client({ name: 'mcp-exec-interop-tasks', version: '0.0.0' });
  await client.connect(transport);
  return { client, close: () => client.close() };
}

async function httpClient() {
  const server = await startHttpServer('interop-tasks-token');
  const transport = new StreamableHTTPClientTransport(new URL(server.url), {
    requestInit: { headers: server.headers },
  });
  const client = new Client({ name: 'mcp-exec-interop-tasks', version: '0.0.0' });
  await client.connect(transport);
  return {
    client,
    close: async () => {
      await transport.terminateSession();
      await client.close();
      await server.stop();
    },
  };
}

for (const [name, open] of [['stdio', stdioClient], ['Streamable HTTP with a token', httpClient]]) {
  describe(`Tasks over ${name}`, () => {
    let client;
    let close;
    before(async () => {
      ({ client, close } = await open());
    });
    after(async () => {
      await close?.();
    });

    test('the server declares tasks and only execute may run as one', async () => {
      const caps = client.getServerCapabilities();
      assert.deepEqual(caps.tasks?.requests?.tools?.call, {});
      assert.ok(caps.tasks.cancel);
      assert.ok(caps.tasks.list, 'requestors are identified (stdio, a token)');
      const { tools } = await client.listTools();
      for (const tool of tools) {
        assert.equal(tool.execution?.taskSupport, tool.name === 'execute' ? 'optional' : undefined, tool.name);
      }
    });

    test('callToolStream creates a task, reports its status and ends with the execute result', async () => {
      const seen = [];
      let result;
      const stream = client.experimental.tasks.callToolStream(
        { name: 'execute', arguments: { command: 'sleep 0.3; echo from-a-task' } },
        undefined,
        { task: { ttl: 60_000 } },
      );
      for await (const message of stream) {
        seen.push(message.type);
        if (message.type === 'taskCreated') {
          assert.match(message.task.taskId, /^[0-9a-f]{32}$/);
          assert.equal(message.task.status, 'working');
        }
        if (message.type === 'result') result = message.result;
        if (message.type === 'error') assert.fail(String(message.error));
      }
      assert.equal(seen[0], 'taskCreated', seen.join(','));
      assert.equal(seen.at(-1), 'result', seen.join(','));
      assert.equal(result.isError, false);
      assert.equal(result.structuredContent.stdout.data, 'from-a-task\n');
      assert.equal(result.structuredContent.exit_code, 0);
    });

    test('create, poll with getTask, fetch with getTaskResult twice, find it in listTasks', async () => {
      let taskId;
      const stream = client.experimental.tasks.callToolStream(
        { name: 'execute', arguments: { command: 'echo polled' } },
        undefined,
        { task: {} },
      );
      // Only the creation: the rest is polled.
      for await (const message of stream) {
        if (message.type === 'taskCreated') {
          taskId = message.task.taskId;
          break;
        }
      }
      assert.ok(taskId);
      let task;
      for (let i = 0; i < 200; i++) {
        task = await client.experimental.tasks.getTask(taskId);
        if (task.status !== 'working') break;
        await sleep(20);
      }
      assert.equal(task.status, 'completed', JSON.stringify(task));
      const first = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
      const again = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
      assert.deepEqual(again, first, 'identical on every call');
      assert.equal(first.structuredContent.stdout.data, 'polled\n');
      const { tasks } = await client.experimental.tasks.listTasks();
      assert.ok(tasks.some((t) => t.taskId === taskId));
    });

    test('cancelTask makes it cancelled at once, and the job dies', async () => {
      let taskId;
      let job;
      const stream = client.experimental.tasks.callToolStream(
        { name: 'execute', arguments: { command: 'sleep 60' } },
        undefined,
        { task: {} },
      );
      for await (const message of stream) {
        if (message.type === 'taskCreated') {
          taskId = message.task.taskId;
          job = message.task.statusMessage.split(' ')[0];
          break;
        }
      }
      const cancelled = await client.experimental.tasks.cancelTask(taskId);
      assert.equal(cancelled.status, 'cancelled');
      let task;
      for (let i = 0; i < 200; i++) {
        task = await client.experimental.tasks.getTask(taskId);
        if (/verified/.test(task.statusMessage ?? '')) break;
        await sleep(20);
      }
      assert.equal(task.status, 'cancelled');
      assert.match(task.statusMessage, /process group is dead/);
      const status = await client.callTool({ name: 'status', arguments: { job_id: job } });
      assert.equal(status.isError, true, 'the cancelled job was removed');
    });
  });
}
