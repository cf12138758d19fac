// Starts mcp-exec serving Streamable HTTP only (`--http 127.0.0.1:<free port>
// --no-stdio`), waits for `/healthz` 200, and stops it with SIGTERM (checking
// it exits 0). Shared by the HTTP tests of the SDK and the Inspector CLI.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const binary = process.env.MCP_EXEC_BIN ?? path.resolve(here, '../../target/debug/mcp-exec');

async function freePort() {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  server.close();
  await once(server, 'close');
  return port;
}

// token: the bearer token (MCP_EXEC_HTTP_TOKEN), or null for none (loopback only).
// Progress every 0.2 s, so a short blocking call yields several events.
export async function startHttpServer(token) {
  const port = await freePort();
  const env = { ...process.env, MCP_EXEC_LOG: 'warn', MCP_EXEC_PROGRESS_INTERVAL: '0.2' };
  delete env.MCP_EXEC_HTTP_TOKEN;
  delete env.MCP_EXEC_HTTP_TOKEN_FILE;
  if (token) env.MCP_EXEC_HTTP_TOKEN = token;
  const child = spawn(binary, ['--http', `127.0.0.1:${port}`, '--no-stdio'], {
    env,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const exited = once(child, 'exit');
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    assert.equal(child.exitCode, null, `mcp-exec exited with ${child.exitCode} before serving`);
    try {
      if ((await fetch(`${base}/healthz`)).status === 200) break;
    } catch {
      // not listening yet
    }
    assert.ok(Date.now() < deadline, '/healthz did not answer 200 within 10 s');
    await sleep(50);
  }
  return {
    url: `${base}/mcp`,
    base,
    token,
    headers: token ? { Authorization: `Bearer ${token}` } : {},
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const [code, signal] = await exited;
      clearTimeout(timer);
      assert.notEqual(signal, 'SIGKILL', 'mcp-exec did not exit within 15 s of SIGTERM');
      assert.equal(code, 0, `mcp-exec ended with code ${code}, signal ${signal} on SIGTERM`);
    },
  };
}
