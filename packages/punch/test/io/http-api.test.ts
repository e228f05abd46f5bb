/**
 * What of the HTTP API needs a real socket: the client address a rate limit keys on comes from the
 * connection, and X-Forwarded-For counts only behind a trusted proxy. The rest of the API is tested through
 * `inject` in test/app/http-api.test.ts.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertError, startTestServer } from '../helpers.ts';

describe('rate limits (per client IP, before any session state)', () => {
  test('X-Forwarded-For is ignored unless a proxy is trusted', async () => {
    const off = await startTestServer({ limits: { createPerMinute: 1 } });
    try {
      const xff = (ip: string) => ({ 'x-forwarded-for': ip });
      assert.equal(
        (await off.call('POST', '/api/session', { body: { name: 'p1' }, headers: xff('192.0.2.1') })).status,
        201,
      );
      assertError(
        await off.call('POST', '/api/session', { body: { name: 'p2' }, headers: xff('192.0.2.2') }),
        429,
        'RATE_LIMITED',
      );
    } finally {
      await off.close();
    }
  });

  test('behind one trusted hop, a forged left-most X-Forwarded-For is limited by the real address', async () => {
    // The test client plays an appending reverse proxy on 127.0.0.1: "<whatever the client sent>, <client>".
    for (const trustProxy of ['1', '127.0.0.1/8']) {
      const t = await startTestServer({ limits: { createPerMinute: 10 }, config: { trustProxy } });
      try {
        const statuses: number[] = [];
        for (let i = 0; i < 15; i++) {
          const r = await t.call('POST', '/api/session', {
            body: { name: `fx-${i}` },
            headers: { 'x-forwarded-for': `198.51.100.${i}, 203.0.113.7` },
          });
          statuses.push(r.status);
        }
        assert.deepEqual(
          statuses,
          [...Array<number>(10).fill(201), ...Array<number>(5).fill(429)],
          trustProxy,
        );
        // Another real client behind the same proxy has its own limit.
        const other = await t.call('POST', '/api/session', {
          body: { name: 'fx-other' },
          headers: { 'x-forwarded-for': '203.0.113.8' },
        });
        assert.equal(other.status, 201);
      } finally {
        await t.close();
      }
    }
  });
});
