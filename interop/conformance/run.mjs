// Runs the official MCP conformance suite (@modelcontextprotocol/conformance,
// pinned in package-lock.json) against mcp-exec over Streamable HTTP. Run it with
// the Node 22 this package installs (node_modules/.bin/node): the suite needs Node >= 22.
//
// One listener serves both eras, and the suite runs once per revision, each at that
// revision's own wire (`--requirements <revision>`: exactly the scenarios it requires,
// frozen at its release): 2025-11-25 (initialize, Mcp-Session-Id) and 2026-07-28
// (stateless, per-request _meta). Each run has its own baseline,
// expected-failures.<revision>.yml, whose every entry says why it cannot apply; the
// suite fails on any other failure and on an entry that starts passing (stale). The
// scenarios that do apply (`required`) must also have run, and passed every check but
// those their baseline excuses one by one (`<scenario>:<check-id>`) and those the suite
// skips for a reason named in `skipped` (a check the suite marks SKIPPED is no failure
// to it, so it cannot be a baseline entry).
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
import YAML from 'yaml';
import { startHttpServer } from '../node/http-server.mjs';

const RUNS = [
  {
    requirements: '2025-11-25',
    required: [
      'server-initialize',
      'ping',
      'tools-list',
      'server-sse-multiple-streams',
      'dns-rebinding-protection',
      'server-session-lifecycle',
    ],
  },
  {
    requirements: '2026-07-28',
    required: [
      'server-stateless',
      'tools-list',
      'caching',
      'server-sse-multiple-streams',
      'dns-rebinding-protection',
      'http-header-validation',
    ],
    skipped: {
      // The listen-stream checks: mcp-exec offers no subscriptions/listen (its tool list
      // never changes and it has no resources), so the suite has no stream to observe.
      'server-stateless': [
        'sep-2575-server-sends-subscription-ack',
        'sep-2575-server-tags-subscription-id',
        'sep-2575-server-honors-notification-filter',
        'sep-2575-server-sends-prompts-list-changed-on-subscription',
        'sep-2575-server-sends-tools-list-changed-on-subscription',
      ],
      // resources/read is skipped because resources/list has nothing: no resources.
      caching: ['sep-2549-resources-read-caching-hints'],
    },
  },
];

// The Tasks extension's scenarios (SEP-2663) are in no --requirements set: each runs with
// --scenario against expected-failures.tasks.yml (fixture tools). Its passing checks:
// the advertised extension, -32021 for clients that did not declare it, tasks/result and
// tasks/list -32601, an unknown taskId -32602, a mismatched Mcp-Method -32020, and the
// wire schema of every message.
const TASK_SCENARIOS = [
  'tasks-lifecycle',
  'tasks-capability-negotiation',
  'tasks-wire-fields',
  'tasks-request-state-removal',
  'tasks-mrtr-input',
  'tasks-request-headers',
  'tasks-dispatch-and-envelope',
  'tasks-required-task-error',
  'tasks-mrtr-composition',
];

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
const version = JSON.parse(
  await fs.readFile(path.join(here, 'node_modules', '@modelcontextprotocol', 'conformance', 'package.json'), 'utf8'),
).version;
console.log(`conformance ${version} on node ${process.version}`);

/** The checks of `scenario` its baseline excuses (`<scenario>:<check-id>` entries). */
function excused(baseline, scenario) {
  return new Set(
    (baseline.server ?? [])
      .filter((e) => typeof e === 'string' && e.startsWith(`${scenario}:`))
      .map((e) => e.slice(scenario.length + 1)),
  );
}

const server = await startHttpServer(null);
const failures = [];
try {
  for (const run of RUNS) {
    const baselinePath = path.join(here, `expected-failures.${run.requirements}.yml`);
    const baseline = YAML.parse(await fs.readFile(baselinePath, 'utf8')) ?? {};
    const out = await fs.mkdtemp(path.join(os.tmpdir(), `mcp-exec-conformance-${run.requirements}-`));
    try {
      const args = [cli, 'server', '--url', server.url, '--requirements', run.requirements];
      args.push('--expected-failures', baselinePath, '-o', out);
      console.log(`\n== --requirements ${run.requirements} ==`);
      try {
        const { stdout } = await promisify(execFile)(process.execPath, args, { timeout: 300_000, maxBuffer: 1 << 26 });
        console.log(stdout.slice(stdout.indexOf('=== SUMMARY ===')));
      } catch (e) {
        console.log(e.stdout, e.stderr);
        failures.push(`--requirements ${run.requirements}: the suite failed (exit ${e.code})`);
      }
      // Result directories are named server-<scenario>-<timestamp>.
      const dirs = await fs.readdir(out);
      for (const scenario of run.required) {
        try {
          const dir = dirs.find((d) => d.startsWith(`server-${scenario}-2`));
          assert.ok(dir, `${scenario} did not run`);
          const checks = JSON.parse(await fs.readFile(path.join(out, dir, 'checks.json'), 'utf8'));
          const allowed = excused(baseline, scenario);
          const skips = new Set(run.skipped?.[scenario] ?? []);
          const skippedHere = (c) => c.status === 'SKIPPED' && skips.has(c.id);
          const bad = checks.filter(
            (c) => !['SUCCESS', 'INFO'].includes(c.status) && !allowed.has(c.id) && !skippedHere(c),
          );
          assert.ok(checks.some((c) => c.status === 'SUCCESS'), `${scenario}: no check passed`);
          assert.deepEqual(bad, [], `${scenario}: checks not passed`);
          const passed = checks.filter((c) => c.status === 'SUCCESS').length;
          console.log(
            `required ${run.requirements}: ${scenario}: ${passed} checks passed, ${allowed.size} excused, ${skips.size} skipped`,
          );
        } catch (e) {
          failures.push(`--requirements ${run.requirements}: ${e.message}`);
        }
      }
    } finally {
      await fs.rm(out, { recursive: true, force: true });
    }
  }
  const tasksBaseline = path.join(here, 'expected-failures.tasks.yml');
  for (const scenario of TASK_SCENARIOS) {
    const args = [cli, 'server', '--url', server.url, '--scenario', scenario, '--expected-failures', tasksBaseline];
    console.log(`\n== --scenario ${scenario} ==`);
    try {
      const { stdout } = await promisify(execFile)(process.execPath, args, { timeout: 300_000, maxBuffer: 1 << 26 });
      console.log(stdout.slice(stdout.indexOf('Passed:')));
    } catch (e) {
      console.log(e.stdout, e.stderr);
      failures.push(`--scenario ${scenario}: the suite failed (exit ${e.code})`);
    }
  }
} finally {
  await server.stop();
}
if (failures.length > 0) throw new Error(`conformance:\n  ${failures.join('\n  ')}`);
