// Runs the official MCP conformance suite (@modelcontextprotocol/conformance,
// pinned in package-lock.json) against mcp-exec over Streamable HTTP. Run it with
// the Node 22 this package installs (node_modules/.bin/node): the suite needs Node >= 22.
//
// Every server scenario runs (`--suite all`); expected-failures.yml lists the ones that
// do not apply, and the suite fails on any other failure and on a stale entry. The
// scenarios that do apply must also have run and passed every check (REQUIRED).
//
// The suite has no option for request headers, so the server runs without a token
// (allowed on a loopback address).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startHttpServer } from '../node/http-server.mjs';

const REQUIRED = ['server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection'];

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
const version = JSON.parse(
  await fs.readFile(path.join(here, 'node_modules', '@modelcontextprotocol', 'conformance', 'package.json'), 'utf8'),
).version;
console.log(`conformance ${version} on node ${process.version}`);

const out = await fs.mkdtemp(path.join(os.tmpdir(), 'mcp-exec-conformance-'));
const server = await startHttpServer(null);
let failure;
try {
  const args = [cli, 'server', '--url', server.url, '--suite', 'all'];
  args.push('--expected-failures', path.join(here, 'expected-failures.yml'), '-o', out);
  try {
    const { stdout } = await promisify(execFile)(process.execPath, args, { timeout: 300_000, maxBuffer: 1 << 26 });
    console.log(stdout.slice(stdout.indexOf('=== SUMMARY ===')));
  } catch (e) {
    console.log(e.stdout, e.stderr);
    failure = new Error(`the conformance suite failed (exit ${e.code})`);
  }
  // Result directories are named server-<scenario>-<timestamp>.
  const dirs = await fs.readdir(out);
  for (const scenario of REQUIRED) {
    const dir = dirs.find((d) => d.startsWith(`server-${scenario}-2`));
    assert.ok(dir, `${scenario} did not run`);
    const checks = JSON.parse(await fs.readFile(path.join(out, dir, 'checks.json'), 'utf8'));
    const bad = checks.filter((c) => !['SUCCESS', 'INFO'].includes(c.status));
    assert.ok(checks.some((c) => c.status === 'SUCCESS'), `${scenario}: no check passed`);
    assert.deepEqual(bad, [], `${scenario}: checks not passed`);
    console.log(`required: ${scenario}: ${checks.filter((c) => c.status === 'SUCCESS').length} checks passed`);
  }
} finally {
  await server.stop();
  await fs.rm(out, { recursive: true, force: true });
}
if (failure) throw failure;
