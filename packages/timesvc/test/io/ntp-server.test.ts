import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { metricValue } from '@broadcast-ops/core';
import { waitFor } from '@broadcast-ops/core/testing';
import { queryServer } from '../../src/io/query.ts';
import { timestampDiffSeconds } from '../../src/protocol/ntp-packet.ts';
import type { TimesvcService } from '../../src/io/service.ts';
import { startService } from '../helpers/service.ts';

let svc: TimesvcService;
let port: number;

before(async () => {
  ({ service: svc, port } = await startService({
    local_stratum: true,
    stratum: 7,
    rate_limit: { enabled: true, average_interval: 1, burst: 10, kod_interval: 60 },
  }));
  await waitFor(() => svc.manager.state === 'LOCKED', {
    timeoutMs: 10_000,
    what: 'LOCKED on the local stratum',
  });
});

after(async () => {
  await svc.close();
});

test('serves time on IPv4 and IPv6 with the clock state, sub-ms against the host clock', async () => {
  assert.deepEqual(
    svc
      .server()!
      .addresses.map((a) => a.family)
      .sort(),
    ['IPv4', 'IPv6'],
  );
  for (const host of ['127.0.0.1', '::1']) {
    const r = await queryServer(host, port, 2000, { localAddress: host === '::1' ? '::1' : '127.0.0.2' });
    assert.equal(r.stratum, 7);
    assert.equal(r.leap, 0);
    assert.equal(r.version, 4);
    assert.equal(r.kiss, undefined);
    assert.ok(r.precision <= -10, `precision ${r.precision}`);
    // The served clock in local mode is the host clock, so the true offset is 0, and the measured one is
    // within half the round trip (θ and δ as RFC 5905 §8 defines them: the true offset is within θ ± δ/2).
    // A reply that waits in this loaded test process before it is read moves θ by half that wait.
    assert.ok(
      Math.abs(r.offsetS) <= r.delayS / 2 + 0.001,
      `offset ${r.offsetS} s beyond half the delay ${r.delayS} s`,
    );
    assert.ok(r.delayS < 0.1, `delay ${r.delayS} s`);
  }
});

test('a flooding client gets a RATE kiss, then silence; another client is unaffected', async () => {
  const sock = createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.3', r));
  const replies: Buffer[] = [];
  sock.on('message', (m) => replies.push(m));
  const req = Buffer.alloc(48);
  req[0] = 0x23;
  for (let i = 0; i < 40; i++) {
    req.writeUInt32BE(i, 44);
    sock.send(req, port, '127.0.0.1');
  }
  await waitFor(() => replies.length >= 11, { timeoutMs: 3000, what: 'replies' });
  await new Promise((r) => setTimeout(r, 200));
  sock.close();
  const kods = replies.filter((m) => m[1] === 0 && m.subarray(12, 16).toString() === 'RATE');
  assert.equal(kods.length, 1, 'one RATE kiss per kod interval');
  assert.ok(replies.length <= 12, `the rest is dropped (${replies.length} replies)`);
  const other = await queryServer('127.0.0.1', port, 2000, { localAddress: '127.0.0.4' });
  assert.equal(other.kiss, undefined);
  assert.equal(await metricValue(svc.registry, 'timesvc_ntp_responses_total', { type: 'kod_rate' }), 1);
  assert.ok(
    (await metricValue(svc.registry, 'timesvc_ntp_dropped_total', { reason: 'rate_limited' }))! >= 20,
  );
});

test('fast-check over the socket: garbage never gets a reply and never stops the server', async () => {
  const sock = createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.5', r));
  let replies = 0;
  sock.on('message', () => replies++);
  const samples = fc.sample(
    fc
      .uint8Array({ minLength: 0, maxLength: 200, size: 'max' })
      .filter((b) => !(b.length >= 48 && (b[0]! & 7) === 3)),
    { numRuns: 300, seed: 42 },
  );
  const before = (await metricValue(svc.registry, 'timesvc_ntp_requests_total')) ?? 0;
  for (const s of samples) sock.send(s, port, '127.0.0.1');
  await waitFor(
    async () =>
      ((await metricValue(svc.registry, 'timesvc_ntp_requests_total')) ?? 0) >= before + samples.length,
    {
      timeoutMs: 5000,
      what: 'all datagrams counted',
    },
  );
  sock.close();
  assert.equal(replies, 0);
  assert.ok(
    ((await metricValue(svc.registry, 'timesvc_ntp_dropped_total', { reason: 'not_client' })) ?? 0) > 0,
  );
  const ok = await queryServer('127.0.0.1', port, 2000, { localAddress: '127.0.0.6' });
  assert.equal(ok.stratum, 7);
});

test('an address outside allowed_networks gets DENY over the wire', async () => {
  const { service, port: p } = await startService({
    local_stratum: true,
    allowed_networks: ['10.0.0.0/8', '::1/128'],
  });
  try {
    await waitFor(() => service.manager.state === 'LOCKED', { timeoutMs: 10_000 });
    const denied = await queryServer('127.0.0.1', p);
    assert.equal(denied.kiss, 'DENY');
    assert.equal(denied.stratum, 0);
    const allowed = await queryServer('::1', p);
    assert.equal(allowed.kiss, undefined);
    assert.equal(await metricValue(service.registry, 'timesvc_ntp_responses_total', { type: 'kod_deny' }), 1);
  } finally {
    await service.close();
  }
});

test('/api/health and /metrics: clock_state has exactly one series at 1', async () => {
  const health = await svc.app.inject({ method: 'GET', url: '/api/health' });
  assert.equal(health.statusCode, 200);
  const body = health.json<{ status: string; version: string; time: string }>();
  assert.equal(body.status, 'healthy');
  assert.match(body.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/);
  const metrics = await svc.app.inject({ method: 'GET', url: '/metrics' });
  const lines = metrics.body.split('\n').filter((l) => l.startsWith('timesvc_clock_state{'));
  assert.equal(lines.length, 5);
  assert.deepEqual(
    lines.filter((l) => l.endsWith(' 1')),
    ['timesvc_clock_state{state="locked"} 1'],
  );
  for (const name of [
    'timesvc_ntp_requests_total',
    'timesvc_ntp_responses_total',
    'timesvc_ntp_offset_seconds',
    'timesvc_ntp_jitter_seconds',
    'timesvc_ntp_stratum',
    'timesvc_clock_offset_nanoseconds',
    'timesvc_uptime_seconds',
  ]) {
    assert.match(metrics.body, new RegExp(`^${name}`, 'm'));
  }
  assert.equal(await metricValue(svc.registry, 'timesvc_ntp_stratum'), 7);
  assert.ok(((await metricValue(svc.registry, 'timesvc_uptime_seconds')) ?? 0) > 0);
  const missing = await svc.app.inject({ method: 'GET', url: '/nope' });
  assert.equal(missing.statusCode, 404);
  assert.equal(missing.json<{ error: string }>().error, 'NOT_FOUND');
});

test('without kernel timestamps, rx_timestamp_correction_us moves the receive timestamp back by that much', async () => {
  const { service, port: p } = await startService({
    local_stratum: true,
    kernel_rx_timestamps: false,
    rx_timestamp_correction_us: 2000,
  });
  try {
    await waitFor(() => service.manager.state === 'LOCKED', { timeoutMs: 10_000 });
    const r = await queryServer('127.0.0.1', p);
    assert.equal(service.server()!.rxTimestamps, 'userspace');
    const turnaround = timestampDiffSeconds(r.packet.transmitTimestamp, r.packet.receiveTimestamp);
    assert.ok(turnaround >= 0.002, `transmit - receive = ${turnaround} s includes the 2 ms correction`);
  } finally {
    await service.close();
  }
});
