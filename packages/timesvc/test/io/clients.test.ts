// The client log (chronyc `clients`, docs/cli.md "clients") on real traffic: GET /api/clients and
// `timesvc clients` against requests from UDP sockets on 127.0.0.1, with both responders (the arithmetic and
// the native log against the JavaScript one: test/app/client-log.test.ts).
import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { freePort, requireTool, tempDir } from '@broadcast-ops/core/testing';
import type { ClientLogRecord } from '../../src/domain/client-log.ts';
import { startChronyServer } from '../helpers/chrony.ts';
import { run } from '../helpers/cli.ts';
import { PASSWORDS, startWebRig, type WebRig } from '../helpers/web.ts';

const closers: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const c of closers.reverse()) await c();
});

// ---- Real traffic: GET /api/clients and `timesvc clients` ----

/** A client-mode NTPv4 request with a distinct transmit timestamp. */
function request(i: number): Buffer {
  const b = Buffer.alloc(48);
  b[0] = (4 << 3) | 3;
  b.writeUInt32BE(0x1000 + i, 40);
  return b;
}

interface Tally {
  replies: number;
  rate: number;
}

/** A UDP socket bound to `address` that counts replies and RATE kisses from the server. */
async function clientSocket(address: string): Promise<{ socket: Socket; tally: Tally }> {
  const socket = createSocket('udp4');
  const tally: Tally = { replies: 0, rate: 0 };
  socket.on('message', (m) => {
    if (m.length >= 48 && m[1] === 0 && m.toString('latin1', 12, 16) === 'RATE') tally.rate++;
    else if (m.length >= 48) tally.replies++;
  });
  await new Promise<void>((resolve) => socket.bind(0, address, resolve));
  closers.push(() => {
    socket.close();
  });
  return { socket, tally };
}

function send(s: Socket, port: number, i: number): Promise<void> {
  return new Promise((resolve, reject) =>
    s.send(request(i), port, '127.0.0.1', (err) => (err ? reject(err) : resolve())),
  );
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function clientsOf(rig: WebRig): Promise<{ responder: string; clients: ClientLogRecord[] }> {
  const token = await rig.login('viewer');
  const res = await fetch(`${rig.url}/api/clients?limit=10`, {
    headers: { authorization: `Bearer ${token}` },
  });
  assert.equal(res.status, 200);
  return (await res.json()) as { responder: string; clients: ClientLogRecord[] };
}

for (const nativeResponder of [true, false]) {
  test(`clients over real requests (${nativeResponder ? 'native' : 'JavaScript'} responder): counts, drops, Int, Last, the CLI`, async () => {
    const rig = await startWebRig({
      ntp: {
        native_responder: nativeResponder,
        rate_limit: { average_interval: 1, burst: 4, kod_interval: 3600 },
      },
    });
    closers.push(() => rig.close());
    const unauth = await fetch(`${rig.url}/api/clients`);
    assert.equal(unauth.status, 401);
    const bad = await rig.service.app.inject({
      method: 'GET',
      url: '/api/clients?limit=1001',
      headers: { authorization: `Bearer ${await rig.login('viewer')}` },
    });
    assert.equal(bad.statusCode, 400);

    // A burst of 20 from 127.0.0.2: 4 (and what refills meanwhile) answered, one RATE kiss, the rest dropped.
    const burst = await clientSocket('127.0.0.2');
    for (let i = 0; i < 20; i++) await send(burst.socket, rig.ntpPort, i);
    // A steady client on 127.0.0.3: 6 requests about 500 ms apart (the limiter allows them all).
    const steady = await clientSocket('127.0.0.3');
    const sentAt: number[] = [];
    for (let i = 0; i < 6; i++) {
      sentAt.push(performance.now());
      await send(steady.socket, rig.ntpPort, i);
      await sleep(500);
    }
    const body = await clientsOf(rig);
    assert.equal(body.responder, nativeResponder ? 'native' : 'javascript');
    const b = body.clients.find((c) => c.address === '127.0.0.2');
    const s = body.clients.find((c) => c.address === '127.0.0.3');
    assert.ok(b && s, JSON.stringify(body));
    assert.equal(body.clients[0]?.address, '127.0.0.3', 'most recently seen first');
    assert.equal(b.ntp_packets, 20);
    assert.equal(b.kod_rate, burst.tally.rate);
    assert.equal(b.kod_rate, 1);
    assert.equal(b.dropped, 20 - burst.tally.replies - burst.tally.rate);
    assert.ok(burst.tally.replies >= 4 && burst.tally.replies <= 6, `answered ${burst.tally.replies}`);
    assert.equal(s.ntp_packets, 6);
    assert.equal(s.dropped, 0);
    assert.equal(steady.tally.replies, 6);
    const spacing = (sentAt.at(-1)! - sentAt[0]!) / 5 / 1000;
    assert.ok(
      s.interval_log2 !== null && Math.abs(s.interval_log2 - Math.log2(spacing)) <= 1,
      `Int ${s.interval_log2} for ${spacing} s`,
    );
    assert.equal(s.interval_limited_log2, null);
    assert.ok(s.last_rx_ago_s <= 2, `Last ${s.last_rx_ago_s}`);
    assert.ok(b.last_rx_ago_s >= 2, `Last ${b.last_rx_ago_s}`);

    const env = { TIMESVC_URL: rig.url, TIMESVC_PASSWORD: PASSWORDS.viewer };
    const r = await run(['clients', '--user', 'viewer'], env);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.split('\n');
    assert.match(lines[0] ?? '', /^Hostname {22}NTP {3}Drop Int IntL Last {5}Cmd {3}Drop Int {2}Last$/);
    assert.equal(lines[1], '='.repeat((lines[0] ?? '').length));
    const row = lines.find((l) => l.startsWith('127.0.0.2 '));
    assert.ok(row, r.stdout);
    const cols = row.trim().split(/\s+/);
    assert.deepEqual(cols.slice(0, 3), ['127.0.0.2', '20', String(b.dropped)]);
    assert.deepEqual(cols.slice(6), ['-', '-', '-', '-']);
  });
}

test('with rate limiting off every request is answered and still logged', async () => {
  const rig = await startWebRig({ ntp: { rate_limit: { enabled: false, burst: 1 } } });
  closers.push(() => rig.close());
  const c = await clientSocket('127.0.0.4');
  for (let i = 0; i < 30; i++) await send(c.socket, rig.ntpPort, i);
  await sleep(300);
  const body = await clientsOf(rig);
  const row = body.clients.find((x) => x.address === '127.0.0.4');
  assert.ok(row, JSON.stringify(body));
  assert.equal(row.ntp_packets, 30);
  assert.equal(row.dropped, 0);
  assert.equal(row.kod_rate, 0);
  assert.equal(c.tally.replies, 30);
});

test('the same client seen by chronyd -x and by timesvc: chronyc clients and timesvc clients print the same row', async () => {
  const chronyc = requireTool('chronyc');
  const dir = tempDir('timesvc-clients-chronyc-');
  closers.push(() => dir.remove());
  const port = await freePort('udp');
  const chrony = await startChronyServer(join(dir.path, 'server'), port, {
    stratum: 8,
    extra: ['allow 127.0.0.0/8'],
  });
  closers.push(() => chrony.stop());
  const rig = await startWebRig({ ntp: { rate_limit: { average_interval: 1, burst: 16 } } });
  closers.push(() => rig.close());
  // One socket on 127.0.0.5 asks both servers at the same moments: 8 requests, 1 s apart.
  const c = await clientSocket('127.0.0.5');
  for (let i = 0; i < 8; i++) {
    await send(c.socket, rig.ntpPort, i);
    await new Promise<void>((resolve, reject) =>
      c.socket.send(request(i), port, '127.0.0.1', (err) => (err ? reject(err) : resolve())),
    );
    if (i < 7) await sleep(1000);
  }
  await sleep(300);
  const socket = join(dir.path, 'server', 'run', 'chronyd.sock');
  const asked = performance.now();
  const theirs = await new Promise<string>((resolve, reject) =>
    execFile(chronyc, ['-h', socket, '-n', 'clients'], { timeout: 10_000 }, (err, out, stderr) =>
      err ? reject(new Error(`chronyc clients: ${err.message} ${stderr}`)) : resolve(out),
    ),
  );
  const ours = await run(['clients', '--user', 'viewer'], {
    TIMESVC_URL: rig.url,
    TIMESVC_PASSWORD: PASSWORDS.viewer,
  });
  const elapsedS = (performance.now() - asked) / 1000;
  assert.equal(ours.code, 0, ours.stderr);
  const header = (t: string): string => t.split('\n')[0] ?? '';
  assert.equal(header(ours.stdout), header(theirs), 'the header as chronyc prints it');
  const row = (t: string): string[] => {
    const line = t.split('\n').find((l) => l.startsWith('127.0.0.5 '));
    assert.ok(line, t);
    return line.trim().split(/\s+/);
  };
  const a = row(theirs);
  const b = row(ours.stdout);
  // Hostname, NTP, Drop, Int, IntL the same; Last as chronyc's plus the time our CLI took to start and
  // ask (a second of rounding either way).
  assert.deepEqual(b.slice(0, 5), a.slice(0, 5), `chronyc:\n${theirs}\ntimesvc:\n${ours.stdout}`);
  const last = [Number(a[5]), Number(b[5])] as const;
  assert.ok(
    last[1] >= last[0] - 1 && last[1] <= last[0] + elapsedS + 1,
    `Last ${last[0]} / ${last[1]} after ${elapsedS} s`,
  );
});
