/**
 * `npm start -- --port-offset 2000`, the plan that put timesvc's web port on 10080 (a port browsers and fetch
 * refuse): refused before anything starts, naming 10080 and a working offset; with that offset the whole stack
 * comes up, every URL it prints answers, the timesvc lab credential the landing page shows logs in, and the
 * status service shows every service green and a SIGSTOPped punch red within two polls. In its own network and
 * mount namespaces, as npm-start.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot, tempDir } from '@broadcast-ops/core/testing';
import { TIMESVC_LAB_PASSWORD, TIMESVC_LAB_USER } from '../../stack/landing-notes.ts';
import {
  declaredServices,
  endStack,
  nodeInStackNet,
  PROBE,
  requireStackTools,
  startStack,
} from '../npm-start-helpers.ts';

/** Logs in to timesvc with the lab credential; exits 1 unless a bearer token comes back. */
const LOGIN = `
const res = await fetch(process.argv[1], {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ username: process.argv[2], password: process.argv[3] }),
  signal: AbortSignal.timeout(20000),
});
const body = await res.json();
if (res.status !== 200 || typeof body.token !== 'string') { console.error(res.status, JSON.stringify(body)); process.exit(1); }
console.log('login ok');
`;

/**
 * Polls the status service's /api/fleet until `name` has `level` (`*`: every service), then prints the fleet
 * and the milliseconds it took; exits 1 with the last fleet after the deadline.
 */
const FLEET_WAIT = `
const [url, name, level, deadlineMs] = process.argv.slice(1);
const t0 = Date.now();
let last;
while (Date.now() - t0 < Number(deadlineMs)) {
  try {
    last = await (await fetch(url, { signal: AbortSignal.timeout(5000) })).json();
    const hit = name === '*' ? last.services.every((s) => s.level === level) : last.services.some((s) => s.name === name && s.level === level);
    if (hit) { console.log(JSON.stringify({ ms: Date.now() - t0, fleet: last })); process.exit(0); }
  } catch {}
  await new Promise((r) => setTimeout(r, 200));
}
console.error(JSON.stringify(last)); process.exit(1);
`;

interface FleetWait {
  ms: number;
  fleet: { services: { name: string; level: string; reason: string; figures: Record<string, unknown> }[] };
}

test(`npm start -- --port-offset 2000 on Node ${process.versions.node}: refused naming 10080 with a working offset, which then brings the stack up`, async () => {
  requireStackTools();
  const services = declaredServices();
  mkdirSync(join(repoRoot, 'data'), { recursive: true });
  const data = tempDir('npm-start-offset-');
  const inner =
    'set -e; ip link set lo up; mount --bind "$1" "$2/data"; cd "$2"; ' +
    'if npm start -- --port-offset 2000; then echo "REFUSAL DID NOT HAPPEN"; fi; ' +
    'ls data/logs 2>/dev/null | sed "s/^/LOG: /"; echo "=== with suggestion"; ' +
    'exec npm start -- --port-offset 2100';
  const stack = startStack(inner, data.path);
  const servicePids: number[] = [];
  try {
    await stack.waitForOutput(/Press Ctrl-C to stop|exited unexpectedly|REFUSAL DID NOT HAPPEN/, 240_000);
    const out = stack.output();
    const [first = '', second = ''] = out.split('=== with suggestion');
    assert.doesNotMatch(first, /REFUSAL DID NOT HAPPEN/, out);
    assert.match(first, /^ +10080\/tcp +timesvc +.*refused by browsers and fetch/m, out);
    assert.match(first, /npm start -- --port-offset 2100\b/, out);
    assert.doesNotMatch(first, /^LOG: /m, out); // no service was started: no log opened
    assert.doesNotMatch(first, /\(pid \d+, log/, out);
    for (const m of second.matchAll(/\(pid (\d+), log/g)) servicePids.push(Number(m[1]));
    for (const name of services)
      assert.match(second, new RegExp(`^\\s+${name}\\s+up\\s`, 'm'), `${name} not up\n${out}`);
    assert.match(/http:\/\/\S+/.exec(second)?.[0] ?? '', /^http:\/\/127\.0\.0\.1:10700\/$/, out);
    const urls = [...second.matchAll(/^\s+.+?\s(http:\/\/127\.0\.0\.1:\d+\/\S*)$/gm)].map((m) => m[1] ?? '');
    assert.ok(urls.length >= services.length, out);
    assert.ok(
      urls.some((u) => u.startsWith('http://127.0.0.1:10180/')),
      `timesvc on 10180\n${out}`,
    );
    assert.ok(stack.child.pid);
    const probe = nodeInStackNet(stack.child.pid, PROBE, urls);
    assert.equal(probe.status, 0, `${probe.stdout}${probe.stderr}`);
    const login = nodeInStackNet(stack.child.pid, LOGIN, [
      'http://127.0.0.1:10180/api/auth/login',
      TIMESVC_LAB_USER,
      TIMESVC_LAB_PASSWORD,
    ]);
    assert.equal(login.status, 0, `${login.stdout}${login.stderr}`);

    // The status service (started by npm start like the others, plain node on built files) sees them all
    // green; a SIGSTOPped punch turns red within two polls (2 s each) with the reason, the others stay green.
    const fleetUrl = 'http://127.0.0.1:10700/api/fleet'; // the landing page is the status service
    const green = nodeInStackNet(stack.child.pid, FLEET_WAIT, [fleetUrl, '*', 'green', '50000']);
    assert.equal(green.status, 0, `not all green: ${green.stdout}${green.stderr}`);
    const all = (JSON.parse(green.stdout) as FleetWait).fleet.services;
    assert.deepEqual(all.map((x) => x.name).sort(), [
      'playout-monitor',
      'punch',
      'telemetry-bridge',
      'timesvc',
    ]);
    const punchPid = Number(new RegExp(String.raw`punch\s+up\s+\(pid (\d+),`).exec(second)?.[1]);
    assert.ok(punchPid > 0, second);
    process.kill(punchPid, 'SIGSTOP');
    try {
      const red = nodeInStackNet(stack.child.pid, FLEET_WAIT, [fleetUrl, 'punch', 'red', '30000']);
      assert.equal(red.status, 0, `punch not red: ${red.stdout}${red.stderr}`);
      const seen = JSON.parse(red.stdout) as FleetWait;
      const byName = Object.fromEntries(seen.fleet.services.map((x) => [x.name, x]));
      assert.match(byName['punch']?.reason ?? '', /^no answer: nothing within 1500 ms \(2 polls in a row/);
      for (const other of ['playout-monitor', 'telemetry-bridge', 'timesvc'])
        assert.equal(byName[other]?.level, 'green', `${other}: ${JSON.stringify(byName[other])}`);
      console.log(`# real stack: punch red ${seen.ms} ms after SIGSTOP (poll 2000 ms, timeout 1500 ms)`);
    } finally {
      process.kill(punchPid, 'SIGCONT');
    }
    process.kill(-stack.child.pid, 'SIGINT');
    await stack.exited;
    assert.match(stack.output(), /^start-stack: exit 0$/m, stack.output());
  } finally {
    await endStack(stack, servicePids);
    data.remove();
  }
});
