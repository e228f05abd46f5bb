import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { waitFor } from '@broadcast-ops/core/testing';
import type { HealthAlarm } from '../../src/domain/health-monitor.ts';
import { AlarmWebhook } from '../../src/io/alarm-webhook.ts';
import { startTestServer } from '../helpers.ts';
import { connect } from '../ws-helpers.ts';

/**
 * Health alarms (README "Health", docs/health.md "Alarms"): the webhook against a real HTTP receiver on
 * 127.0.0.1 (retries bounded, no retry on a 4xx, the body signed), and the whole path: agent-style `health`
 * reports with drops → `health_alarm` to the admin connection and a POST to the webhook;
 * `GET /api/session/:name/health` with its access rules. The webhook's strict config (no secret in the
 * URL): test/app/config.test.ts.
 */
interface Received {
  body: string;
  headers: IncomingMessage['headers'];
}

async function receiver(statuses: number[]): Promise<{ url: string; got: Received[]; server: Server }> {
  const got: Received[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      got.push({ body, headers: req.headers });
      res.statusCode = statuses[got.length - 1] ?? 200;
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, got, server };
}

const logs: string[] = [];
const logger = {
  warn: (_o: object, m: string): void => {
    logs.push(m);
  },
};
const alarm: HealthAlarm = {
  session: 's1',
  stream: 'cam',
  alarm: 'drops',
  active: true,
  message: '3 packets arrived too late to play',
  at: Date.UTC(2026, 10, 28),
};
const SECRET = 'webhook-secret-0123456789';

describe('alarm webhook', () => {
  test('retries a 503 until it is taken, signs the body, and sends it once', async () => {
    const r = await receiver([503, 503, 200]);
    try {
      const hook = new AlarmWebhook({
        url: r.url,
        secret: SECRET,
        retries: 3,
        timeoutMs: 2000,
        logger,
        backoffMs: () => 20,
      });
      hook.send(alarm);
      await waitFor(() => hook.delivered === 1, { timeoutMs: 10_000, what: 'delivery' });
      assert.equal(r.got.length, 3);
      const last = r.got[2] as Received;
      const body = JSON.parse(last.body) as Record<string, unknown>;
      assert.deepEqual(body, {
        type: 'health_alarm',
        session: 's1',
        stream: 'cam',
        alarm: 'drops',
        active: true,
        message: '3 packets arrived too late to play',
        at: '2026-11-28T00:00:00.000Z',
      });
      const sig = createHmac('sha256', SECRET).update(last.body).digest('hex');
      assert.equal(last.headers['punch-signature'], `sha256=${sig}`);
      assert.equal(last.headers['content-type'], 'application/json');
      assert.equal(hook.failed, 0);
    } finally {
      r.server.close();
    }
  });

  test('a 400 is not retried; an unreachable receiver costs retries + 1 attempts, then one log line without the URL', async () => {
    const r = await receiver([400]);
    try {
      const hook = new AlarmWebhook({
        url: r.url,
        secret: undefined,
        retries: 3,
        timeoutMs: 2000,
        logger,
        backoffMs: () => 20,
      });
      hook.send(alarm);
      await waitFor(() => hook.failed === 1, { timeoutMs: 10_000, what: 'give up' });
      assert.equal(r.got.length, 1);
      assert.equal(r.got[0]?.headers['punch-signature'], undefined);
    } finally {
      r.server.close();
    }
    const closed = await receiver([]);
    const url = closed.url;
    await new Promise((res) => closed.server.close(res));
    logs.length = 0;
    const hook = new AlarmWebhook({
      url,
      secret: SECRET,
      retries: 2,
      timeoutMs: 500,
      logger,
      backoffMs: () => 10,
    });
    hook.send(alarm);
    hook.send({ ...alarm, active: false });
    await waitFor(() => hook.failed === 2, { timeoutMs: 10_000, what: 'both given up' });
    assert.deepEqual(logs, ['alarm webhook: not delivered', 'alarm webhook: not delivered']);
  });
});

describe('alarms and the health API on a running broker', () => {
  test('drops in agent reports → health_alarm to the admin and a webhook POST; GET …/health by role; peer tokens see their stream only', async () => {
    const r = await receiver([]);
    const t = await startTestServer({
      config: { alarms: { webhook: { url: r.url, secret: SECRET, retries: 1, timeoutMs: 2000 } } },
      signalling: { healthReportMs: 0 },
    });
    try {
      const created = await t.call('POST', '/api/session', {
        body: { name: 'al', streams: ['cam', 'two'], latency: 200 },
      });
      const admin = created.json.token as string;
      const peer = async (stream: string) =>
        (await t.call('POST', '/api/session/al/token', { token: admin, body: { stream } })).json
          .token as string;
      const [tS, tR, tOther] = [await peer('cam'), await peer('cam'), await peer('two')];
      const obs = await connect(t.url, 'al', { token: admin });
      const s = await connect(t.url, 'al', { token: tS });
      const rcv = await connect(t.url, 'al', { token: tR });
      s.send({ type: 'register', stream: 'cam', port: 9000, role: 'sender' });
      rcv.send({ type: 'register', stream: 'cam', port: 9000, role: 'receiver' });
      await rcv.next('peer');
      const report = (dropped: number) => ({
        type: 'health',
        stream: 'cam',
        rtt: 2,
        retransmit: 0,
        bitrate: 4e6,
        dropped,
        role: 'receiver',
        counts: { packets: 400, unique: 400, lost: 0, retransmitted: 0 },
        latency: 200,
      });
      rcv.send(report(0));
      s.send({ ...report(0), role: 'sender', latency: undefined });
      await obs.next('health_report'); // the receiver's report alone; the next one has both ends
      const first = await obs.next('health_report');
      assert.equal(first['streams']['cam']['status'], 'healthy');
      assert.deepEqual(Object.keys(first['streams']['cam']['figures']).sort(), ['receiver', 'sender']);
      assert.equal(first['streams']['cam']['ends']['b']['role'], 'receiver');
      rcv.send(report(7));
      const raised = await obs.next('health_alarm');
      assert.equal(raised['alarm'], 'drops');
      assert.equal(raised['active'], true);
      await waitFor(() => r.got.length === 1, { timeoutMs: 10_000, what: 'the webhook POST' });
      const posted = JSON.parse(r.got[0]?.body ?? '{}') as Record<string, unknown>;
      assert.equal(posted['session'], 'al');
      assert.equal(posted['alarm'], 'drops');
      assert.equal(
        r.got[0]?.headers['punch-signature'],
        `sha256=${createHmac('sha256', SECRET)
          .update(r.got[0]?.body ?? '')
          .digest('hex')}`,
      );

      const view = await t.call('GET', '/api/session/al/health?stream=cam', { token: tR });
      assert.equal(view.status, 200, view.text);
      assert.equal(view.json.assessment.alarms.drops, true);
      assert.equal(view.json.assessment.ends.receiver.w10.dropped, 7);
      assert.equal(view.json.history.receiver.length, 2);
      assert.equal(view.json.history.sender.length, 1);
      assert.equal((await t.call('GET', '/api/session/al/health?stream=cam', { token: tOther })).status, 403);
      assert.equal((await t.call('GET', '/api/session/al/health?stream=nope', { token: admin })).status, 400);
      assert.equal(
        (await t.call('GET', '/api/session/al/health?stream=a%20b', { token: admin })).status,
        400,
      );
      assert.equal((await t.call('GET', '/api/session/al/health')).status, 401);
      for (const c of [obs, s, rcv]) c.close();
    } finally {
      await t.close();
      r.server.close();
    }
  });
});
