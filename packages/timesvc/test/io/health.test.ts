import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startService } from '../helpers/service.ts';

test('/api/health answers 503 while unsynchronised (an upstream that never answers), 200 in local stratum', async () => {
  const dead = await startService({ upstream_peers: [{ address: '127.0.0.1:9', minpoll: 0, maxpoll: 0 }] });
  const local = await startService({ local_stratum: true });
  try {
    const res = await dead.service.app.inject({ method: 'GET', url: '/api/health' });
    assert.equal(res.statusCode, 503);
    const body = res.json<{ status: string; clock_state: string; estimated_error_s: number | null }>();
    assert.equal(body.status, 'unsynchronised');
    assert.equal(body.clock_state, 'init');
    assert.equal(body.estimated_error_s, null);
    await new Promise((r) => setTimeout(r, 1200));
    const ok = await local.service.app.inject({ method: 'GET', url: '/api/health' });
    assert.equal(ok.statusCode, 200, ok.body);
    const b = ok.json<{ status: string; clock_state: string; estimated_error_s: number }>();
    assert.equal(b.status, 'healthy');
    assert.equal(b.clock_state, 'locked');
    assert.ok(b.estimated_error_s >= 0 && b.estimated_error_s < 0.0005, ok.body);
  } finally {
    await dead.service.close();
    await local.service.close();
  }
});
