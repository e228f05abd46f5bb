/**
 * The `npm start` port plan (scripts/stack/plan.ts) for the real packages' toolkit.start entries, for every
 * offset from 0 to 3000 in steps of 100: each plan either keeps every port usable by a browser, or is refused
 * naming the port and suggesting an offset whose own plan is accepted. Pure: no sockets, no processes.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { substituteEnv } from '@broadcast-ops/core';
import { repoRoot } from '@broadcast-ops/core/testing';
import {
  FETCH_BAD_PORTS,
  LANDING_PORT,
  checkPlan,
  describeRefusal,
  planClaims,
  type PlanService,
} from '../../stack/plan.ts';

/** The plan inputs as the launcher reads them (toolkit.start of each package with a bin). */
function realPlan(): PlanService[] {
  const out: PlanService[] = [];
  for (const dir of readdirSync(join(repoRoot, 'packages')).sort()) {
    const file = join(repoRoot, 'packages', dir, 'package.json');
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, 'utf8')) as {
      bin?: Record<string, string>;
      toolkit?: { start?: Omit<PlanService, 'name'> };
    };
    const bin = Object.keys(pkg.bin ?? {})[0];
    if (!pkg.toolkit?.start || !bin) continue;
    const start = substituteEnv(pkg.toolkit.start, {}, file) as Omit<PlanService, 'name'>;
    out.push({ name: bin, ...start });
  }
  return out;
}

test('the Fetch standard bad-port list is the one Node fetch refuses (each port: "bad port" before connecting)', async () => {
  for (const port of FETCH_BAD_PORTS) {
    if (port === 0) continue; // a URL with port 0 is not fetchable at all
    const err = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(2000) }).then(
      () => undefined,
      (e: unknown) => e as Error & { cause?: Error },
    );
    assert.ok(err, `fetch to ${port} was not refused`);
    assert.match(err.cause?.message ?? err.message, /bad port/i, `port ${port}`);
  }
});

test('every offset 0..3000 step 100: accepted with only usable ports, or refused naming the port with a working offset', () => {
  const plan = realPlan();
  assert.deepEqual(plan.map((s) => s.name).sort(), [
    'broadcast-ops-status',
    'playout-monitor',
    'punch',
    'telemetry-bridge',
    'timesvc',
  ]);
  const refused: number[] = [];
  for (let offset = 0; offset <= 3000; offset += 100) {
    const r = checkPlan(plan, offset);
    const tcp = r.claims.filter((c) => c.proto === 'tcp');
    // The plan covers the landing page and each service's health URL port.
    assert.ok(
      r.claims.some((c) => c.service === 'start-stack' && c.port === LANDING_PORT + offset),
      `offset ${offset}`,
    );
    // The status service serves the landing page: its port is the landing page's claim above.
    for (const name of ['playout-monitor', 'punch', 'telemetry-bridge', 'timesvc'])
      assert.ok(
        tcp.some((c) => c.service === name),
        `offset ${offset}: no TCP port for ${name}`,
      );
    const bad = tcp.filter((c) => FETCH_BAD_PORTS.has(c.port) || c.port < 1 || c.port > 65535);
    if (r.ok) {
      assert.deepEqual(bad, [], `offset ${offset} accepted with bad ports`);
      continue;
    }
    refused.push(offset);
    assert.deepEqual(
      r.refused.map((x) => x.claim),
      bad,
      `offset ${offset}`,
    );
    assert.ok(r.suggestion !== undefined && r.suggestion > offset, `offset ${offset}`);
    assert.equal(r.suggestion % 100, 0);
    assert.ok(checkPlan(plan, r.suggestion).ok, `offset ${offset}: suggestion ${r.suggestion} refused too`);
    const text = describeRefusal(r, 'BROADCAST_OPS_PORT_OFFSET');
    for (const x of r.refused)
      assert.match(text, new RegExp(`\\b${x.claim.port}/tcp\\s+${x.claim.service}\\b`));
    assert.match(text, new RegExp(`npm start -- --port-offset ${r.suggestion}\\b`));
  }
  // The one the issue found from outside: timesvc's web port 8080 + 2000 = 10080.
  assert.deepEqual(refused, [2000]);
  const r2000 = checkPlan(plan, 2000);
  assert.equal(r2000.ok, false);
  if (!r2000.ok) {
    assert.deepEqual(
      r2000.refused.map((x) => [x.claim.port, x.claim.service]),
      [[10080, 'timesvc']],
    );
    assert.equal(r2000.suggestion, 2100);
  }
});

test('a port pushed outside 1-65535 is refused; UDP ports are not held to the browser list; port 0 is not claimed', () => {
  const plan: PlanService[] = [
    {
      name: 'svc',
      ready: 'http://127.0.0.1:8000/health',
      ports: [
        { label: 'ntp', proto: 'udp', port: 4123 },
        { label: 'ephemeral', proto: 'tcp', port: 0 },
        { label: 'sent to', proto: 'tcp', port: 4000, outbound: true },
      ],
    },
  ];
  const low = checkPlan(plan, -8000);
  assert.equal(low.ok, false);
  if (!low.ok) assert.match(low.refused.map((x) => x.why).join(), /outside 1-65535/);
  // 4123 - 4000 = 123 (NTP) over UDP: fine; TCP 8000 - 4000 = 4000 fine; landing 4600 fine.
  const udpOnBad = checkPlan(plan, -4000);
  assert.equal(udpOnBad.ok, true);
  assert.deepEqual(
    planClaims(plan, 0).map((c) => `${c.port}/${c.proto}`),
    ['8600/tcp', '8000/tcp', '4123/udp'],
  );
  // TCP 8000 + 2080 = 10080 is refused; the suggestion skips to 2100.
  const r = checkPlan(plan, 2080);
  assert.equal(r.ok, false);
  if (!r.ok) assert.equal(r.suggestion, 2100);
});
