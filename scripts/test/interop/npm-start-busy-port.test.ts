/**
 * `npm start` with Prometheus's default port 9090 held by another program, in its own network and mount
 * namespaces (see npm-start.test.ts): the console names the port and the way to move it, and with the
 * documented offset the whole stack comes up and every URL it prints answers.
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot, tempDir } from '@broadcast-ops/core/testing';
import {
  declaredServices,
  endStack,
  nodeInStackNet,
  PROBE,
  requireStackTools,
  startStack,
} from '../npm-start-helpers.ts';

test(`npm start on Node ${process.versions.node} with 9090 held by another program: the port is named, and the documented offset brings the whole stack up`, async () => {
  requireStackTools();
  const services = declaredServices();
  mkdirSync(join(repoRoot, 'data'), { recursive: true });
  const data = tempDir('npm-start-busy-');
  // Prometheus's own default port, held by another program; then the first `npm start` must fail naming it,
  // and `npm start -- --port-offset 1000` must bring everything up beside it.
  const hold = `require('net').createServer().listen(9090, '127.0.0.1', () => console.log('holding 9090'))`;
  const inner =
    'set -e; ip link set lo up; mount --bind "$1" "$2/data"; cd "$2"; ' +
    `"$3" -e "${hold}" & sleep 1; ` +
    'if npm start; then echo "FIRST START DID NOT FAIL"; fi; echo "=== with offset"; exec npm start -- --port-offset 1000';
  const stack = startStack(inner, data.path, process.execPath);
  const servicePids: number[] = [];
  try {
    await stack.waitForOutput(/Press Ctrl-C to stop|exited unexpectedly|did not become ready/, 240_000);
    const out = stack.output();
    const [first = '', second = ''] = out.split('=== with offset');
    assert.doesNotMatch(first, /FIRST START DID NOT FAIL/, out);
    assert.match(first, /^ +9090\/tcp +telemetry-bridge +Metrics/m, out);
    assert.match(first, /npm start -- --port-offset 1000/, out);
    for (const m of second.matchAll(/\(pid (\d+), log/g)) servicePids.push(Number(m[1]));
    for (const name of services)
      assert.match(second, new RegExp(`^\\s+${name}\\s+up\\s`, 'm'), `${name} not up\n${out}`);
    assert.match(/http:\/\/\S+/.exec(second)?.[0] ?? '', /^http:\/\/127\.0\.0\.1:9600\/$/, out);
    const urls = [...second.matchAll(/^\s+.+?\s(http:\/\/127\.0\.0\.1:\d+\/\S*)$/gm)].map((m) => m[1] ?? '');
    assert.ok(urls.length >= services.length, out);
    for (const url of urls) assert.notEqual(new URL(url).port, '9090', out);
    assert.ok(
      urls.some((u) => u.includes(':10090/')),
      `metrics moved to 10090\n${out}`,
    );
    assert.ok(stack.child.pid);
    const probe = nodeInStackNet(stack.child.pid, PROBE, urls);
    assert.equal(probe.status, 0, `${probe.stdout}${probe.stderr}`);
    process.kill(-stack.child.pid, 'SIGINT');
    await stack.exited;
    assert.match(stack.output(), /^start-stack: exit 0$/m, stack.output());
  } finally {
    await endStack(stack, servicePids);
    data.remove();
  }
});
