import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseSamples, sampleValue } from '../../src/domain/prom-text.ts';
import { verdict, type Fetched } from '../../src/domain/verdict.ts';
import { Fleet } from '../../src/domain/fleet.ts';

const ok = (body: unknown, status = 200): Fetched => ({ ok: true, status, body: JSON.stringify(body) });
const text = (body: string): Fetched => ({ ok: true, status: 200, body });

test('timesvc: LOCKED green, HOLDOVER amber with its estimated error, SYNCING red; stratum and GPSDO from metrics', () => {
  const metrics = text('# HELP x\ntimesvc_ntp_stratum 1\ntimesvc_gpsdo_locked 0\ntimesvc_ptp_port_state 6\n');
  const locked = verdict('timesvc', {
    health: ok({ clock_state: 'locked', estimated_error_s: 0.000012, reference: 'GPS' }),
    metrics,
  });
  assert.equal(locked.level, 'green');
  assert.equal(locked.reason, 'LOCKED, estimated error 12 µs');
  assert.deepEqual(locked.figures, {
    clock_state: 'LOCKED',
    estimated_error: '12 µs',
    reference: 'GPS',
    stratum: 1,
    ptp_state: 'MASTER',
    gpsdo: 'not locked',
  });
  const holdover = verdict('timesvc', {
    health: ok({ clock_state: 'HOLDOVER', estimated_error_s: 0.0023 }, 200),
  });
  assert.equal(holdover.level, 'amber');
  assert.equal(holdover.reason, 'HOLDOVER: reference lost, estimated error 2.3 ms');
  const syncing = verdict('timesvc', { health: ok({ clock_state: 'SYNCING' }, 503) });
  assert.equal(syncing.level, 'red');
  assert.match(syncing.reason, /^SYNCING: clients are served "unsynchronised"/);
  assert.equal(verdict('timesvc', { health: ok({ status: 'weird' }) }).level, 'red');
});

test('punch: ok green with sessions; a gone peer amber; degraded store amber; other answers red', () => {
  const metrics = text(
    'punch_sessions_live 2\npunch_peers{presence="present"} 3\npunch_peers{presence="absent"} 0\n',
  );
  const green = verdict('punch', { health: ok({ status: 'ok' }), metrics });
  assert.deepEqual([green.level, green.reason], ['green', 'ok, 2 live session(s)']);
  assert.deepEqual(green.figures, { sessions: 2, peers_present: 3, peers_gone: 0 });
  const gone = verdict('punch', {
    health: ok({ status: 'ok' }),
    metrics: text('punch_sessions_live 1\npunch_peers{presence="absent"} 1\n'),
  });
  assert.deepEqual([gone.level, gone.reason], ['amber', '1 peer(s) of a live stream gone (grace period)']);
  const degraded = verdict('punch', {
    health: ok({ status: 'degraded', store: { state: 'failing', error: 'SQLITE_FULL' } }, 503),
  });
  assert.deepEqual([degraded.level, degraded.reason], ['amber', 'degraded: store SQLITE_FULL']);
  assert.equal(verdict('punch', { health: ok('nope', 500) }).level, 'red');
});

test('telemetry-bridge: healthy green; Companion link lost amber; unhealthy red with the dependency named', () => {
  const up = text(
    'telemetry_bridge_adapter_state{adapter="companion.satellite"} 1\ntelemetry_bridge_subscribers_current 4\n',
  );
  const green = verdict('telemetry-bridge', {
    health: ok({ status: 'healthy', dependencies: [] }),
    metrics: up,
  });
  assert.deepEqual([green.level, green.reason], ['green', 'healthy, 4 client(s)']);
  assert.deepEqual(green.figures, { companion: 'connected', clients: 4 });
  const lost = verdict('telemetry-bridge', {
    health: ok({ status: 'healthy', dependencies: [] }),
    metrics: text('telemetry_bridge_adapter_state{adapter="companion.satellite"} 0\n'),
  });
  assert.deepEqual([lost.level, lost.reason], ['amber', 'Companion link lost']);
  const bad = verdict('telemetry-bridge', {
    health: ok(
      { status: 'unhealthy', dependencies: [{ name: 'event_log', status: 'unhealthy', error: 'ENOSPC' }] },
      503,
    ),
  });
  assert.deepEqual([bad.level, bad.reason], ['red', 'event_log unhealthy (ENOSPC)']);
});

test('playout-monitor: all online green; some offline amber with names and reasons; none online red', () => {
  const health = ok({ status: 'healthy', devices: { total: 2, connected: 1, list: [] } });
  const two = (a: boolean, b: boolean): Fetched =>
    ok([
      { id: 1, name: 'CasparCG 1', connected: a, reason: a ? undefined : 'no OSC for 5 s' },
      { id: 2, name: 'HyperDeck', connected: b },
    ]);
  const g = verdict('playout-monitor', { health, devices: two(true, true) });
  assert.deepEqual(
    [g.level, g.reason, g.devices],
    ['green', '2 of 2 devices online', { online: 2, offline: 0 }],
  );
  const a = verdict('playout-monitor', { health, devices: two(false, true) });
  assert.deepEqual(
    [a.level, a.reason, a.devices],
    ['amber', '1 of 2 devices offline: CasparCG 1 (no OSC for 5 s)', { online: 1, offline: 1 }],
  );
  assert.equal(verdict('playout-monitor', { health, devices: two(false, false) }).level, 'red');
});

test('no answer is red with the reason, whatever the kind', () => {
  for (const kind of ['punch', 'timesvc', 'telemetry-bridge', 'playout-monitor', 'http'] as const) {
    const v = verdict(kind, { health: { ok: false, error: 'nothing within 1500 ms' } });
    assert.deepEqual([v.level, v.reason], ['red', 'no answer: nothing within 1500 ms']);
  }
});

test('prometheus text: labels with escapes, comments and other names skipped', () => {
  const s = parseSamples(
    '# TYPE a gauge\na{x="q\\"uote",y="2"} 3.5\nb 1\na 7 1700000000\nbroken line\n',
    new Set(['a']),
  );
  assert.deepEqual(s, [
    { name: 'a', labels: { x: 'q"uote', y: '2' }, value: 3.5 },
    { name: 'a', labels: {}, value: 7 },
  ]);
  assert.equal(sampleValue(s, 'a', { y: '2' }), 3.5);
  assert.equal(sampleValue(s, 'a', { y: '3' }), undefined);
});

test('fleet: one missed poll amber, the second red with the age of the last answer; an answer clears it', () => {
  const fleet = new Fleet([{ name: 'punch', kind: 'punch', health: 'http://127.0.0.1:1/' }]);
  assert.equal(fleet.overall(), 'unknown');
  const green = verdict('punch', { health: ok({ status: 'ok' }) });
  fleet.record('punch', green, true, 1000);
  assert.equal(fleet.overall(), 'green');
  const none = verdict('punch', { health: { ok: false, error: 'nothing within 1500 ms' } });
  const first = fleet.record('punch', none, false, 3000);
  assert.equal(first.level, 'amber');
  assert.equal(first.reason, 'no answer: nothing within 1500 ms (1 poll in a row; last answer 2 s ago)');
  const second = fleet.record('punch', none, false, 5000);
  assert.equal(second.level, 'red');
  assert.match(second.reason, /2 polls in a row; last answer 4 s ago/);
  assert.deepEqual(second.figures, {});
  assert.equal(fleet.overall(), 'red');
  assert.equal(fleet.record('punch', green, true, 7000).level, 'green');
});
