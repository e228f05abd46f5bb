/**
 * The Companion Satellite session as a pure state machine (src/domain/companion/session.ts, docs/companion.md)
 * on a ManualClock: the scenarios the socket tests under test/companion/ wait for on wall time (keepalive
 * timeout and reconnect backoff, hot-standby failover after its grace period and back, a key held across a
 * reconnect, lines split or malformed), each asserting the exact lines, links and wake times.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AdapterCommand } from '../../src/domain/adapter.ts';
import { LineSplitter } from '../../src/protocol/satellite.ts';
import { companionRig, DEVICE_ID } from './companion-rig.ts';

const ADD_DEVICE =
  `ADD-DEVICE DEVICEID="${DEVICE_ID}" PRODUCT_NAME="Bridge" KEYS_TOTAL=2 KEYS_PER_ROW=2 BITMAPS=0 ` +
  'COLORS="hex" TEXT=1 TEXT_STYLE=0 BRIGHTNESS=1\n';

function command(action: string, keyIndex: number, correlationId = 'c-1'): AdapterCommand {
  return {
    id: `cmd-${correlationId}`,
    source: 'ops',
    path: `companion.device.${DEVICE_ID}.key.${keyIndex}`,
    action,
    params: {},
    correlationId,
    deadline: Number.MAX_SAFE_INTEGER,
  };
}

test('handshake: open, BEGIN → ADD-DEVICE, OK → connected; PING every heartbeat, PONG to a PING, wake times', async () => {
  const r = companionRig();
  assert.deepEqual(r.take(), [['open', 1, 'primary:16622']]);
  assert.deepEqual(r.states, ['connecting']);
  assert.equal(r.session.wakeAt, undefined, 'nothing to wait for until the link opens');
  r.session.opened(1);
  assert.equal(r.session.wakeAt, 1000, 'first heartbeat');
  r.session.line(1, 'BEGIN CompanionVersion=3.2.0 ApiVersion=1.7.0');
  assert.deepEqual(r.take(), [['send', 1, ADD_DEVICE]]);
  r.session.line(1, `ADD-DEVICE OK DEVICEID=${DEVICE_ID}`);
  await r.settle();
  assert.deepEqual(r.states, ['connecting', 'connected']);
  assert.deepEqual(r.state.get('companion.connection.active'), {
    connected: true,
    host: 'primary',
    port: 16622,
    index: 0,
    role: 'primary',
    since: r.clock.now(),
  });
  assert.equal(r.session.capabilities()['press'], true);
  r.session.line(1, 'PING abc');
  assert.deepEqual(r.take(), [['send', 1, 'PONG abc\n']]);
  r.clock.advance(1000);
  assert.deepEqual(r.take(), [['send', 1, 'PING 1\n']]);
  // The refresh timeout (1000 ms) ran out with the heartbeat: stale cleared 50 ms later.
  assert.deepEqual(r.connected, []);
  r.clock.advance(50);
  assert.deepEqual(r.connected, [true]);
  r.session.line(1, 'PONG 1');
  r.clock.advance(950);
  assert.deepEqual(r.take(), [['send', 1, 'PING 2\n']]);
  assert.equal(r.session.wakeAt, 3000);
});

test('keepalive: a silent Companion is dropped after deadAfter, then reconnect with exponential backoff, reset by a registration', async () => {
  const r = companionRig();
  r.take();
  await r.register(1);
  r.take();
  // Silent from here: PINGs at 1 s and 2 s, then at 3 s the silence (3000 ms) is past deadAfter (2500 ms).
  r.clock.advance(3000);
  assert.deepEqual(r.take(), [
    ['send', 1, 'PING 1\n'],
    ['send', 1, 'PING 2\n'],
    ['close', 1, 'no data from Companion for 3000 ms'],
  ]);
  assert.deepEqual(r.states, ['connecting', 'connected', 'reconnecting']);
  assert.equal(r.state.get('companion.connection.lastError'), 'no data from Companion for 3000 ms');
  assert.equal(r.reconnects, 1);
  const lost = r.clock.monotonicMs();
  // Attempt 1 after reconnectDelay (500 ms, jitter drawn 0), attempt 2 after 1000, 3 after 2000, then capped.
  assert.equal(r.session.wakeAt, lost + 500);
  r.clock.advance(499);
  assert.deepEqual(r.take(), []);
  r.clock.advance(1);
  assert.deepEqual(r.take(), [['open', 2, 'primary:16622']]);
  r.session.openFailed(2, 'connect ECONNREFUSED');
  assert.equal(r.session.wakeAt, lost + 500 + 1000);
  assert.equal(
    r.state.get('companion.connection.lastError'),
    'connect to primary:16622 failed: connect ECONNREFUSED',
  );
  r.clock.advance(1000);
  assert.deepEqual(r.take(), [['open', 3, 'primary:16622']]);
  r.session.openFailed(3, 'connect ECONNREFUSED');
  assert.equal(r.session.wakeAt, lost + 500 + 1000 + 2000);
  r.clock.advance(2000);
  assert.deepEqual(r.take(), [['open', 4, 'primary:16622']]);
  // Connected but never registered: the connection timeout ends the attempt.
  r.session.opened(4);
  r.clock.advance(2000);
  assert.deepEqual(r.take(), [
    ['send', 4, 'PING 1\n'],
    ['close', 4, 'no registration within 2000 ms'],
  ]);
  assert.equal(r.session.wakeAt, r.clock.monotonicMs() + 4000, 'capped at maxReconnectDelay');
  r.clock.advance(4000);
  assert.deepEqual(r.take(), [['open', 5, 'primary:16622']]);
  await r.register(5);
  assert.equal(r.session.state, 'connected');
  assert.deepEqual(
    r.events.map((e) => [e.path, e.event]),
    [['companion.connection', 'reconnected']],
    'one event for the whole outage',
  );
  r.take();
  r.session.closed(5, 'connection closed by Companion');
  assert.equal(
    r.session.wakeAt,
    r.clock.monotonicMs() + 500,
    'the backoff starts again after a registration',
  );
  assert.equal(r.reconnects, 5);
});

test('hot standby: the standby after failoverDelay, commands fail fast with the reason meanwhile; back to the primary when the standby fails', async () => {
  const r = companionRig({
    hosts: [
      { host: 'primary', port: 16622 },
      { host: 'standby', port: 16622 },
    ],
    failoverDelay: 250,
  });
  assert.deepEqual(r.take(), [['open', 1, 'primary:16622']]);
  await r.register(1);
  r.take();
  r.session.closed(1, 'connection closed by Companion');
  assert.deepEqual(r.take(), [['close', 1, 'connection closed by Companion']]);
  assert.deepEqual(r.state.get('companion.connection.active'), {
    connected: false,
    host: 'primary',
    port: 16622,
    index: 0,
    role: 'primary',
    since: r.clock.now(),
    reason: 'connection closed by Companion',
  });
  const during = await r.session.execute(command('press', 0), new AbortController().signal);
  assert.deepEqual(during, {
    status: 'failed',
    error: {
      code: 'ADAPTER_ERROR',
      message:
        'Companion is not connected (state reconnecting): Companion primary:16622 failed ' +
        '(connection closed by Companion); failing over to standby:16622',
      details: { state: 'reconnecting', failover: true },
    },
  });
  assert.equal(r.session.wakeAt, r.clock.monotonicMs() + 250, 'the grace period');
  r.clock.advance(249);
  assert.deepEqual(r.take(), []);
  r.clock.advance(1);
  assert.deepEqual(r.take(), [['open', 2, 'standby:16622']]);
  await r.register(2);
  assert.equal(r.session.capabilities()['activeHost'], 'standby:16622');
  assert.deepEqual(r.session.hosts, [
    { host: 'primary', port: 16622, active: false },
    { host: 'standby', port: 16622, active: true },
  ]);
  const failover = r.events.find((e) => e.event === 'failover');
  assert.deepEqual(failover?.data, {
    kind: 'failover',
    from: { host: 'primary', port: 16622, role: 'primary' },
    to: { host: 'standby', port: 16622, role: 'backup' },
    reason: 'connection closed by Companion',
    lostAt: r.clock.now() - 250,
    at: r.clock.now(),
    durationMs: 250,
    failedAttempts: 0,
  });
  r.take();
  // No automatic failback: only the standby failing moves the session, again after the grace period.
  r.session.closed(2, 'connection closed by Companion');
  r.clock.advance(250);
  assert.deepEqual(r.take(), [
    ['close', 2, 'connection closed by Companion'],
    ['open', 3, 'primary:16622'],
  ]);
  // The primary refuses too: a full round has failed, so the backoff (500 ms) applies before the standby.
  r.session.openFailed(3, 'connect ECONNREFUSED');
  assert.equal(r.session.wakeAt, r.clock.monotonicMs() + 500);
  r.clock.advance(500);
  assert.deepEqual(r.take(), [['open', 4, 'standby:16622']]);
  await r.register(4);
  assert.equal(r.session.capabilities()['activeHost'], 'standby:16622');
});

test('a key held across a reconnect is released on that Companion once linked again; the late "up" is not sent twice', async () => {
  const r = companionRig();
  r.take();
  await r.register(1);
  r.take();
  const down = r.session.execute(command('down', 1, 'c-down'), new AbortController().signal);
  await r.settle();
  assert.deepEqual(r.take(), [['send', 1, `KEY-PRESS DEVICEID="${DEVICE_ID}" KEY=1 PRESSED=1\n`]]);
  r.session.line(1, 'KEY-PRESS OK');
  assert.deepEqual(await down, { status: 'completed', result: { sent: ['KEY-PRESS'] } });
  const held = r.state.get('companion.held') as { keyIndex: number; host: string; correlationId: string }[];
  assert.deepEqual(
    held.map((h) => [h.keyIndex, h.host, h.correlationId]),
    [[1, 'primary', 'c-down']],
  );
  // The link is cut before the release: the key stays held (Companion keeps a departed surface's key down).
  r.session.closed(1, 'connection reset');
  r.clock.advance(500);
  assert.deepEqual(r.take(), [
    ['close', 1, 'connection reset'],
    ['open', 2, 'primary:16622'],
  ]);
  await r.register(2);
  assert.deepEqual(r.take(), [
    ['send', 2, ADD_DEVICE],
    ['send', 2, `KEY-PRESS DEVICEID="${DEVICE_ID}" KEY=1 PRESSED=0\n`],
  ]);
  r.session.line(2, 'KEY-PRESS OK');
  await r.settle();
  assert.deepEqual(r.state.get('companion.held'), []);
  assert.equal(r.heldReleased, 1);
  assert.deepEqual(r.events.at(-1), {
    path: `companion.device.${DEVICE_ID}.key.1`,
    event: 'released',
    data: { deviceId: DEVICE_ID, keyIndex: 1, reason: 'left_held' },
  });
  // The client's own "up" arrives late: already released by the bridge, so nothing goes out.
  const up = await r.session.execute(command('up', 1, 'c-up'), new AbortController().signal);
  assert.deepEqual(up, { status: 'completed', result: { sent: [] } });
  assert.deepEqual(r.take(), []);
});

test('a reply that never comes ends the session (the FIFO is unsure) and the command fails with the reason', async () => {
  const r = companionRig();
  r.take();
  await r.register(1);
  r.take();
  // Keep the link talking so only the missing reply counts.
  const press = r.session.execute(command('press', 0), new AbortController().signal);
  await r.settle();
  r.session.line(1, 'KEY-STATE DEVICEID=other KEY=0');
  r.clock.advance(1000);
  assert.deepEqual(await press, {
    status: 'failed',
    error: { code: 'ADAPTER_ERROR', message: 'Companion did not answer KEY-PRESS within 1000 ms' },
  });
  assert.deepEqual(r.take(), [
    ['send', 1, `KEY-PRESS DEVICEID="${DEVICE_ID}" KEY=0 PRESSED=1\n`],
    ['send', 1, 'PING 1\n'],
    ['close', 1, 'no reply to KEY-PRESS'],
  ]);
  assert.equal(r.session.state, 'reconnecting');
});

test('lines split across reads reach the session whole; unknown lines are ignored; a line from a stale link is ignored', async () => {
  const r = companionRig();
  r.take();
  r.session.opened(1);
  const splitter = new LineSplitter(1024);
  const feed = (chunk: string): void => {
    for (const l of splitter.push(chunk)) r.session.line(1, l);
  };
  feed('BEGIN CompanionVer');
  assert.deepEqual(r.take(), []);
  feed('sion=3.2.0 ApiVersion=1.7.0\r\nPI');
  assert.deepEqual(r.take(), [['send', 1, ADD_DEVICE]]);
  feed('NG 7\n');
  assert.deepEqual(r.take(), [['send', 1, 'PONG 7\n']]);
  feed(`ADD-DEVICE OK DEVICEID=${DEVICE_ID}\nSOMETHING-NEW A=1\nBRIGHTNESS DEVICEID=${DEVICE_ID} VALUE=42\n`);
  await r.settle();
  assert.equal(r.session.state, 'connected');
  assert.deepEqual(r.take(), []);
  assert.equal(r.state.get(`companion.device.${DEVICE_ID}.brightness`), 42);
  assert.ok(r.logs.some((l) => l.level === 'debug' && l.msg === 'companion line ignored'));
  r.session.line(99, 'PING 8');
  r.session.closed(99, 'gone');
  assert.deepEqual(r.take(), []);
  assert.equal(r.session.state, 'connected');
});

test('malformed first lines: not a Satellite API, or ApiVersion 2: state error with the reason, retried with backoff', () => {
  const r = companionRig();
  r.take();
  r.session.opened(1);
  r.session.line(1, 'HTTP/1.1 400 Bad Request');
  const reason = 'not a Companion Satellite API: first line "HTTP/1.1 400 Bad Request"';
  assert.deepEqual(r.take(), [['close', 1, reason]]);
  assert.deepEqual(r.states, ['connecting', 'error']);
  assert.equal(r.state.get('companion.connection.lastError'), reason);
  r.clock.advance(500);
  assert.deepEqual(r.states, ['connecting', 'error', 'reconnecting']);
  assert.deepEqual(r.take(), [['open', 2, 'primary:16622']]);
  r.session.opened(2);
  r.session.line(2, 'BEGIN CompanionVersion=9.0.0 ApiVersion=2.0.0');
  assert.deepEqual(r.take(), [
    ['close', 2, 'unsupported Satellite ApiVersion "2.0.0" (this adapter speaks 1.x)'],
  ]);
  assert.equal(r.session.state, 'error');
  assert.equal(r.session.wakeAt, r.clock.monotonicMs() + 1000);
});

test('stop: QUIT on the open link, then closed; no wake left; a late open is closed at once', () => {
  const r = companionRig({ maxReconnectAttempts: 1 });
  r.take();
  r.session.opened(1);
  r.session.stop();
  assert.deepEqual(r.take(), [
    ['send', 1, 'QUIT\n'],
    ['close', 1, 'adapter stopped'],
  ]);
  assert.equal(r.session.state, 'disconnected');
  assert.equal(r.session.wakeAt, undefined);
  r.session.opened(1);
  assert.deepEqual(r.take(), [['close', 1, 'closed by adapter']]);
});

test('maxReconnectAttempts exhausted: state error, no further attempt', () => {
  const r = companionRig({ maxReconnectAttempts: 2 });
  r.take();
  r.session.openFailed(1, 'connect ECONNREFUSED');
  r.clock.advance(500);
  r.session.openFailed(2, 'connect ECONNREFUSED');
  r.clock.advance(1000);
  r.session.openFailed(3, 'connect ECONNREFUSED');
  assert.deepEqual(r.take(), [
    ['open', 2, 'primary:16622'],
    ['open', 3, 'primary:16622'],
  ]);
  assert.equal(r.session.state, 'error');
  assert.equal(
    r.state.get('companion.connection.lastError'),
    'connect to primary:16622 failed: connect ECONNREFUSED; gave up after 2 attempts',
  );
  assert.equal(r.session.wakeAt, undefined);
});

test('configured locations: ADD-SUB on a session that offers subscriptions, live once drawn, stale with the reason on a loss, unavailable where there is no ADD-SUB', async () => {
  const r = companionRig({ locations: ['2/0/1'] });
  r.take();
  assert.deepEqual(r.state.get('companion.subscriptions'), {
    '2/0/1': {
      path: 'companion.page.2.row.0.column.1',
      status: 'restoring',
      reason: 'configured: waiting for a Companion session',
    },
  });
  r.session.opened(1);
  r.session.line(1, 'BEGIN CompanionVersion=4.0.0 ApiVersion=1.10.0');
  assert.deepEqual(r.take(), [], 'CAPS awaited');
  r.session.line(1, 'CAPS SUBSCRIPTIONS=1');
  const sent = r.take();
  assert.equal(sent.length, 1);
  assert.match(sent[0]![2], /^ADD-DEVICE /);
  r.session.line(1, `ADD-DEVICE OK DEVICEID=${DEVICE_ID}`);
  await r.settle();
  assert.deepEqual(r.take(), [
    ['send', 1, 'ADD-SUB SUBID="tb-2-0-1" LOCATION="2/0/1" TEXT=1 COLORS="hex"\n'],
  ]);
  r.session.line(1, 'ADD-SUB OK SUBID=tb-2-0-1');
  r.session.line(1, 'SUB-STATE SUBID=tb-2-0-1 TEXT=R08= PRESSED=0');
  await r.settle();
  const subs = (): unknown => r.state.get('companion.subscriptions');
  assert.deepEqual(subs(), { '2/0/1': { path: 'companion.page.2.row.0.column.1', status: 'live' } });
  r.session.closed(1, 'connection closed by Companion');
  assert.deepEqual(subs(), {
    '2/0/1': {
      path: 'companion.page.2.row.0.column.1',
      status: 'stale',
      reason: 'Companion link lost: connection closed by Companion',
    },
  });
  // The next session is a Companion 3.x (ApiVersion 1.7.0): no ADD-SUB, so the location cannot come back.
  r.clock.advance(500);
  r.take();
  await r.register(2);
  assert.deepEqual(subs(), {
    '2/0/1': {
      path: 'companion.page.2.row.0.column.1',
      status: 'unavailable',
      reason: 'cannot restore: Companion 3.2.0 (ApiVersion 1.7.0) has no ADD-SUB (needs 1.10.0)',
    },
  });
});
