/**
 * The status service as a process (its bin, on plain node when built) polling four fake services, each in its
 * own process on 127.0.0.1:0: all green; one SIGSTOPped (a hung service: the port accepts, nothing answers)
 * turns red after exactly two unanswered polls with the reason, the others stay green and keep being polled,
 * /api/fleet keeps answering; SIGCONT brings it back; a timesvc in HOLDOVER shows amber with its estimated
 * error; /health and /metrics.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { waitFor } from '@broadcast-ops/core/testing';
import { fleet, levels, startRig } from '../helpers.ts';

async function metric(url: string, line: RegExp): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = line.exec(text);
  return m ? Number(m[1]) : 0;
}

test('SIGSTOP of one service: red within two polls with the reason, the others green and still polled', async () => {
  const rig = await startRig(1000, 600);
  try {
    await waitFor(async () => (await fleet(rig)).overall === 'green', {
      timeoutMs: 15_000,
      what: 'all green',
    });
    const f = await fleet(rig);
    assert.deepEqual(levels(f), {
      punch: 'green',
      'telemetry-bridge': 'green',
      'playout-monitor': 'green',
      timesvc: 'green',
    });
    const punch = f.services.find((s) => s.name === 'punch');
    assert.deepEqual(punch?.figures, { sessions: 2, peers_present: 3, peers_gone: 0 });
    assert.match(punch?.page ?? '', /^http:\/\/127\.0\.0\.1:\d+\/$/);

    const health = await fetch(`${rig.url}/health`);
    assert.equal(health.status, 200);
    assert.equal(((await health.json()) as { status: string }).status, 'ok');

    const noAnswer = /broadcast_ops_status_polls_total\{service="punch",result="no_answer"\} (\d+)/;
    const bridgeAnswered =
      /broadcast_ops_status_polls_total\{service="telemetry-bridge",result="answered"\} (\d+)/;
    const missedBefore = await metric(rig.url, noAnswer);
    const bridgeBefore = await metric(rig.url, bridgeAnswered);
    const target = rig.fakes.get('punch');
    assert.ok(target?.proc.child.pid);
    const stoppedAt = Date.now();
    process.kill(target.proc.child.pid, 'SIGSTOP');
    let slowest = 0;
    const red = await waitFor(
      async () => {
        const t0 = Date.now();
        const now = await fleet(rig); // the page's data source keeps answering meanwhile
        slowest = Math.max(slowest, Date.now() - t0);
        return now.services.find((s) => s.name === 'punch' && s.level === 'red') ? now : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100, what: 'punch red' },
    );
    const redAfterMs = Date.now() - stoppedAt;
    // Exactly two unanswered polls turned it red (the first one is amber): the red snapshot's own reason
    // says so. The counter is read later, and a third poll may have timed out by then on a loaded machine
    // (one every second, 600 ms each: 3 was read once under the full suite), so it is at least 2.
    const reason = red.services.find((s) => s.name === 'punch')?.reason ?? '';
    assert.match(reason, /^no answer: nothing within 600 ms \(2 polls in a row; last answer \d+ s ago\)$/);
    assert.ok((await metric(rig.url, noAnswer)) - missedBefore >= 2);
    // A hung service does not colour the others: none of them is red, and each is green while punch is
    // still stopped. One of their own polls may pass 600 ms on a loaded machine (amber for that poll; seen
    // once under the full suite with three Node versions at once), so green is waited for, not read from
    // the same snapshot.
    const others = ['telemetry-bridge', 'playout-monitor', 'timesvc'];
    assert.deepEqual(
      others.filter((name) => levels(red)[name] === 'red'),
      [],
      JSON.stringify(red.services.map((x) => [x.name, x.level, x.reason])),
    );
    await waitFor(
      async () => {
        const now = levels(await fleet(rig));
        return (now['punch'] === 'red' && others.every((name) => now[name] === 'green')) || undefined;
      },
      { timeoutMs: 10_000, intervalMs: 100, what: 'the others green while punch is stopped' },
    );
    // The others kept being polled on their own timers while punch hung.
    assert.ok((await metric(rig.url, bridgeAnswered)) - bridgeBefore >= 2);
    assert.match(
      await (await fetch(`${rig.url}/metrics`)).text(),
      /broadcast_ops_status_service_level\{service="punch"\} 0/,
    );
    console.log(
      `# punch red ${redAfterMs} ms after SIGSTOP (poll 1000 ms, timeout 600 ms); slowest /api/fleet ${slowest} ms`,
    );

    process.kill(target.proc.child.pid, 'SIGCONT');
    await waitFor(async () => levels(await fleet(rig))['punch'] === 'green', {
      timeoutMs: 15_000,
      what: 'punch back',
    });
  } finally {
    await rig.stop();
  }
});

test('a timesvc in HOLDOVER is amber with its estimated error; an offline playout device shows in the verdict and the devices metric', async () => {
  const rig = await startRig(500, 300);
  try {
    await waitFor(async () => (await fleet(rig)).overall === 'green', {
      timeoutMs: 15_000,
      what: 'all green',
    });
    const set = (kind: string, body: unknown) =>
      fetch(`http://127.0.0.1:${rig.fakes.get(kind)?.port}/__set`, {
        method: 'POST',
        body: JSON.stringify(body),
      });
    await set('timesvc', { clock_state: 'holdover', estimated_error_s: 0.0042 });
    const f = await waitFor(
      async () => {
        const now = await fleet(rig);
        return levels(now)['timesvc'] === 'amber' ? now : undefined;
      },
      { timeoutMs: 15_000, what: 'timesvc amber' },
    );
    const t = f.services.find((s) => s.name === 'timesvc');
    assert.equal(t?.reason, 'HOLDOVER: reference lost, estimated error 4.2 ms');
    assert.equal(t?.figures['estimated_error'], '4.2 ms');
    assert.equal(t?.figures['clock_state'], 'HOLDOVER');
    assert.equal(f.overall, 'amber');
    await set('playout-monitor', {
      devices: { list: [{ id: 1, name: 'CasparCG 1', connected: false, reason: 'no OSC for 5 s' }] },
    });
    await waitFor(async () => levels(await fleet(rig))['playout-monitor'] === 'red', { timeoutMs: 15_000 });
    const m = await (await fetch(`${rig.url}/metrics`)).text();
    assert.match(m, /broadcast_ops_status_playout_devices\{service="playout-monitor",state="offline"\} 1/);
    assert.match(m, /broadcast_ops_status_service_level\{service="timesvc"\} 1/);
  } finally {
    await rig.stop();
  }
});
