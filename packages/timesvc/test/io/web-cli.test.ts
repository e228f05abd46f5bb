// The operator commands against a running server with one chrony upstream (chronyd -x, its own config,
// pidfile and sockets on loopback), check-config warnings, hash-password, the human query output.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { freePort, tempDir } from '@broadcast-ops/core/testing';
import { startChronyServer } from '../helpers/chrony.ts';
import { run } from '../helpers/cli.ts';
import { PASSWORDS, startWebRig, until } from '../helpers/web.ts';

const closers: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const c of closers.reverse()) await c();
});

test('sources, sourcestats and tracking against a running server with one chrony upstream', async () => {
  const dir = tempDir('timesvc-cli-chrony-');
  closers.push(() => dir.remove());
  const chronyPort = await freePort('udp');
  const chrony = await startChronyServer(dir.path, chronyPort, { stratum: 6 });
  closers.push(() => chrony.stop());
  const rig = await startWebRig({
    ntp: {
      local_stratum: false,
      upstream_peers: [{ address: `127.0.0.1:${chronyPort}`, minpoll: 0, maxpoll: 0 }],
    },
  });
  closers.push(() => rig.close());
  await until(() => rig.service.manager.state === 'LOCKED' || undefined, 60_000, 'locked on chrony');
  const env = { TIMESVC_URL: rig.url, TIMESVC_PASSWORD: PASSWORDS.viewer };
  const sources = await run(['sources', '--user', 'viewer'], env);
  assert.equal(sources.code, 0, sources.stderr);
  const row = sources.stdout.split('\n').find((l) => l.includes(`127.0.0.1:${chronyPort}`));
  assert.ok(row, sources.stdout);
  assert.match(row, /^\^\* /, `selected: ${row}`);
  const m = /\s([+-]\d+)(ns|us|ms|s) \+\/-/.exec(row);
  assert.ok(m, row);
  const scale = { ns: 1e-9, us: 1e-6, ms: 1e-3, s: 1 }[m[2] as 'ns'];
  assert.ok(Math.abs(Number(m[1]) * scale) < 0.005, `plausible offset on loopback: ${row}`);
  assert.match(row, / 6 /, 'chrony serves stratum 6');
  // LastRx as chronyc means it: seconds since the last good reply, within one poll (2^0 s here) and a margin.
  const [, , , poll, , lastRx] = row.trim().split(/\s+/);
  assert.ok(Number(lastRx) <= 2 ** Number(poll) + 2, `LastRx ${lastRx} at poll ${poll}: ${row}`);
  assert.match(sources.stdout, /^MS Name\/IP address\s+Stratum Poll Reach LastRx Last sample/m);

  const tracking = await run(['tracking', '--user', 'viewer'], env);
  assert.equal(tracking.code, 0, tracking.stderr);
  assert.match(tracking.stdout, /^Reference ID\s+: 7F000001 \(127\.0\.0\.1\)$/m);
  assert.match(tracking.stdout, /^Stratum\s+: 7$/m);
  assert.match(tracking.stdout, /^Clock state\s+: LOCKED$/m);
  assert.match(tracking.stdout, /^Leap status\s+: Normal$/m);
  const last = /^Last offset\s+: ([+-]\d+\.\d+) seconds$/m.exec(tracking.stdout);
  assert.ok(last && Math.abs(Number(last[1])) < 0.005, tracking.stdout);

  const stats = await run(['sourcestats', '--url', rig.url, '--user', 'viewer'], {
    TIMESVC_PASSWORD: PASSWORDS.viewer,
  });
  assert.equal(stats.code, 0, stats.stderr);
  const srow = stats.stdout.split('\n').find((l) => l.startsWith(`127.0.0.1:${chronyPort}`));
  assert.ok(srow && Number(srow.trim().split(/\s+/)[1]) >= 3, stats.stdout);

  const denied = await run(['sources'], { TIMESVC_URL: rig.url });
  assert.equal(denied.code, 1);
  assert.match(denied.stderr, /401.*--user/);
  const json = await run(['sources', '--json', '--user', 'viewer'], env);
  assert.equal((JSON.parse(json.stdout) as { selected: boolean }[])[0]?.selected, true);
});
