// The WebSocket streams: status on connect, every second and on a state change; each log line exactly
// once; a slow reader dropped without slowing the others; a reference-health event when an upstream stops.
// The chart history's bounds: test/app/status-history.test.ts.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import WebSocket from 'ws';
import { startService } from '../helpers/service.ts';
import { startWebRig, until, type WebRig } from '../helpers/web.ts';

interface Msg {
  type: string;
  data?: { clock?: { state: string }; type?: string; source?: string };
  entries?: { seq: number; message: string; level: string; component: string }[];
}

const closers: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const c of closers.reverse()) await c();
});

function connect(rig: WebRig, path: string, token: string | undefined, via: 'query' | 'header' = 'query') {
  const url =
    rig.url.replace('http', 'ws') +
    path +
    (token && via === 'query' ? `${path.includes('?') ? '&' : '?'}token=${token}` : '');
  const ws = new WebSocket(url, {
    perMessageDeflate: false,
    ...(token && via === 'header' ? { headers: { authorization: `Bearer ${token}` } } : {}),
  });
  const messages: { at: number; msg: Msg }[] = [];
  ws.on('message', (data) =>
    messages.push({ at: Date.now(), msg: JSON.parse((data as Buffer).toString()) as Msg }),
  );
  closers.push(() => ws.terminate());
  return {
    ws,
    messages,
    open: new Promise<void>(
      (resolve, reject) => (ws.once('open', () => resolve()), ws.once('error', reject)),
    ),
  };
}

test('streams refuse a missing or bad token (401), a cross-origin browser (403) and a foreign Host (421); a header token works', async () => {
  const rig = await startWebRig();
  closers.push(() => rig.close());
  const status = (path: string, token?: string, headers: Record<string, string> = {}) =>
    new Promise<number>((resolve) => {
      const q = token ? `${path.includes('?') ? '&' : '?'}token=${token}` : '';
      const ws = new WebSocket(rig.url.replace('http', 'ws') + path + q, { headers });
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.on('open', () => {
        ws.close();
        resolve(101);
      });
      ws.on('error', () => undefined);
    });
  assert.equal(await status('/api/ws/status'), 401);
  assert.equal(await status('/api/ws/logs', 'bad'), 401);
  const viewer = await rig.login('viewer');
  assert.equal(await status('/api/ws/logs', viewer, { origin: 'http://evil.example' }), 403);
  assert.equal(await status('/api/ws/logs?level=loud', viewer), 400);
  assert.equal(await status('/api/ws/nothing', viewer), 404);
  assert.equal(await status('/api/ws/status', viewer, { host: 'rebind.evil.example' }), 421);
  // The stream path over plain HTTP: told to upgrade, in the one error shape.
  const plain = await rig.service.app.inject({
    url: '/api/ws/status',
    headers: { authorization: `Bearer ${viewer}` },
  });
  assert.equal(plain.statusCode, 426);
  assert.equal(plain.headers['upgrade'], 'websocket');
  assert.deepEqual(plain.json(), { error: 'UPGRADE_REQUIRED', message: 'this is a WebSocket endpoint' });
  const byHeader = connect(rig, '/api/ws/status', viewer, 'header');
  await byHeader.open;
  await until(() => byHeader.messages.length > 0 || undefined, 5000, 'status by header token');
});

test('status: on connect, on every clock-state change at once, and every second', async () => {
  const upstream = await startService({ local_stratum: true, interface: '127.0.0.1' });
  closers.push(() => upstream.service.close());
  // A status period of a minute: every message after the first within the test is an on-change push.
  const rig = await startWebRig(
    {
      ntp: {
        local_stratum: false,
        upstream_peers: [{ address: `127.0.0.1:${upstream.port}`, minpoll: 0, maxpoll: 0 }],
      },
    },
    { statusIntervalMs: 60_000 },
  );
  closers.push(() => rig.close());
  const token = await rig.login('viewer');
  const changes: { at: number; to: string }[] = [];
  rig.service.manager.on((e) => {
    if (e.type === 'state') changes.push({ at: Date.now(), to: e.to.toLowerCase() });
  });
  const c = connect(rig, '/api/ws/status', token);
  await c.open;
  const first = await until(() => c.messages[1], 1000, 'history and status within a second of connecting');
  // The chart's history first (kept by the server, README "Web API: streams"), then the status.
  assert.equal(c.messages[0]?.msg.type, 'history');
  assert.equal(first.msg.type, 'status');
  const initial = first.msg.data?.clock?.state;
  await until(() => rig.service.manager.state === 'LOCKED' || undefined, 30_000, 'locked on the upstream');
  await until(
    () =>
      c.messages.some((m) => m.msg.type === 'status' && m.msg.data?.clock?.state === 'locked') || undefined,
    2000,
    'the LOCKED state pushed',
  );
  const states = c.messages.filter((m) => m.msg.type === 'status').map((m) => m.msg.data?.clock?.state);
  assert.ok(changes.length >= 1, 'the state changed');
  for (const ch of changes.filter((x) => x.to !== initial)) {
    assert.ok(states.includes(ch.to), `state ${ch.to} pushed (${states.join(',')})`);
  }
  // The periodic push, with the default period.
  const rig2 = await startWebRig();
  closers.push(() => rig2.close());
  const c2 = connect(rig2, '/api/ws/status', await rig2.login('viewer'));
  await c2.open;
  await until(() => c2.messages.length >= 5 || undefined, 6000, 'a status every second');
  // A reconnecting dashboard gets the points gathered meanwhile, one per second, oldest first.
  const c3 = connect(rig2, '/api/ws/status', await rig2.login('viewer'));
  await c3.open;
  const h = await until(() => c3.messages[0], 2000, 'history on connect');
  const points = h.msg.data as unknown as { t: number; offset_s: number; error_s: number | null }[];
  assert.equal(h.msg.type, 'history');
  assert.ok(points.length >= 3, `${points.length} points`);
  for (let i = 1; i < points.length; i++)
    assert.ok(points[i]!.t > points[i - 1]!.t, 'oldest first, no repeats');
  assert.equal(typeof points[0]?.offset_s, 'number');
});

test('logs: the backlog on connect, then each new line exactly once; ?level= filters', async () => {
  const rig = await startWebRig();
  closers.push(() => rig.close());
  const token = await rig.login('viewer');
  const all = connect(rig, '/api/ws/logs', token);
  const warn = connect(rig, '/api/ws/logs?level=warning', token);
  await Promise.all([all.open, warn.open]);
  await until(() => (all.messages.length && warn.messages.length ? true : undefined), 5000, 'backlogs');
  const backlog = all.messages[0]?.msg.entries ?? [];
  assert.ok(backlog.length > 0 && backlog.length <= 50, String(backlog.length));
  const log = rig.logger.child({ component: 'test' });
  for (let i = 0; i < 300; i++) {
    if (i % 10 === 0) log.warn({ i }, `line ${i}`);
    else log.info({ i }, `line ${i}`);
    if (i % 50 === 0) await new Promise((r) => setTimeout(r, 20));
  }
  const seen = (c: typeof all) =>
    c.messages
      .flatMap((m) => m.msg.entries ?? [])
      .filter((e) => e.component === 'test')
      .map((e) => e.message);
  await until(() => seen(all).length >= 300 || undefined, 10_000, 'all 300 lines');
  await new Promise((r) => setTimeout(r, 500));
  assert.deepEqual(
    seen(all),
    Array.from({ length: 300 }, (_, i) => `line ${i}`),
    'each line once, in order',
  );
  assert.deepEqual(
    seen(warn),
    Array.from({ length: 30 }, (_, i) => `line ${i * 10}`),
    'warnings only',
  );
  const seqs = all.messages.flatMap((m) => m.msg.entries ?? []).map((e) => e.seq);
  assert.equal(new Set(seqs).size, seqs.length, 'no entry twice');
});

test('a slow reader is dropped; another client still gets every line; the server keeps no backlog for it', async () => {
  const rig = await startWebRig();
  closers.push(() => rig.close());
  const token = await rig.login('viewer');
  const fast = connect(rig, '/api/ws/logs', token);
  const slow = connect(rig, '/api/ws/logs', token);
  await Promise.all([fast.open, slow.open]);
  await until(() => (fast.messages.length && slow.messages.length ? true : undefined), 5000, 'backlogs');
  // The slow reader stops reading: its TCP window and then the server's buffer fill up.
  (slow.ws as unknown as { _socket: { pause(): void } })._socket.pause();
  let closedAt: number | undefined;
  slow.ws.on('close', () => (closedAt = Date.now()));
  const log = rig.logger.child({ component: 'flood' });
  const pad = 'x'.repeat(1500);
  const N = 8000;
  for (let i = 0; i < N; i++) {
    log.info({ pad }, `flood ${i}`);
    if (i % 100 === 99) await new Promise((r) => setTimeout(r, 10));
  }
  const got = () =>
    fast.messages
      .flatMap((m) => m.msg.entries ?? [])
      .filter((e) => e.component === 'flood')
      .map((e) => e.message);
  await until(() => got().length >= N || undefined, 60_000, 'the fast client got every line');
  assert.deepEqual(
    got(),
    Array.from({ length: N }, (_, i) => `flood ${i}`),
  );
  await until(() => rig.service.web.streams.dropped >= 1 || undefined, 10_000, 'the slow reader dropped');
  await until(
    () => rig.service.web.streams.clients.logs === 1 || undefined,
    5000,
    'only the fast client left',
  );
  const drop = fast.messages.flatMap((m) => m.msg.entries ?? []).find((e) => e.message.includes('too slow'));
  assert.ok(drop, 'the drop is logged (and streamed to the others)');
  (slow.ws as unknown as { _socket: { resume(): void } })._socket.resume();
  await until(() => closedAt, 5000, 'the slow client sees its connection end');
});

test('a reference-health event when an upstream stops answering: status stream, log stream, counter', async () => {
  const upstream = await startService({ local_stratum: true, interface: '127.0.0.1' });
  let upstreamClosed = false;
  closers.push(async () => {
    if (!upstreamClosed) await upstream.service.close();
  });
  const rig = await startWebRig({
    ntp: {
      local_stratum: false,
      upstream_peers: [{ address: `127.0.0.1:${upstream.port}`, minpoll: 0, maxpoll: 0 }],
    },
  });
  closers.push(() => rig.close());
  const token = await rig.login('viewer');
  const status = connect(rig, '/api/ws/status', token);
  const logs = connect(rig, '/api/ws/logs?level=warning', token);
  await Promise.all([status.open, logs.open]);
  const id = `NTP:127.0.0.1:${upstream.port}`;
  await until(() => rig.service.manager.snapshot().selected === id || undefined, 30_000, 'upstream selected');
  await until(
    () =>
      status.messages.some((m) => m.msg.type === 'event' && m.msg.data?.type === 'selection_changed') ||
      undefined,
    5000,
    'selection event',
  );
  await upstream.service.close();
  upstreamClosed = true;
  await until(
    () =>
      status.messages.some(
        (m) => m.msg.type === 'event' && m.msg.data?.type === 'source_lost' && m.msg.data.source === id,
      ) || undefined,
    60_000,
    'source_lost on the status stream',
  );
  await until(
    () =>
      logs.messages.some((m) =>
        (m.msg.entries ?? []).some((e) => e.component === 'reference' && /lost/.test(e.message)),
      ) || undefined,
    5000,
    'source_lost on the log stream',
  );
  const metrics = await rig.service.app.inject({ url: '/metrics' });
  assert.match(metrics.body, /timesvc_reference_events_total\{event="source_lost"\} 1/);
  assert.match(metrics.body, /timesvc_reference_events_total\{event="selection_changed"\} [1-9]/);
});
