// The documented lab credential (config/timesvc.demo.yaml): works, warns at start, banner flag; production refuses it.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { createLogger } from '@broadcast-ops/core';
import { repoRoot } from '@broadcast-ops/core/testing';
import { configSchema, loadTimesvcConfig } from '../../src/config.ts';
import { createTimesvc } from '../../src/io/service.ts';
import { LAB_PASSWORD } from '../../src/io/web/lab-credential.ts';
import { LogRing } from '../../src/io/web/log-ring.ts';

test('the demo config logs in with the lab credential, warns at start and flags the banner; production refuses to start', async () => {
  const demo = loadTimesvcConfig(join(repoRoot, 'config/timesvc.demo.yaml'), {});
  const config = configSchema.parse({
    ...demo,
    ntp: { ...demo.ntp, port: 0, interface: '127.0.0.1' },
    web: { ...demo.web, port: 0 },
  });
  const logs = new LogRing();
  const logger = createLogger({ service: 'timesvc', destination: logs.stream(undefined) });
  const lab = await createTimesvc(config, logger, { logRing: logs });
  try {
    await lab.start();
    assert.ok(logs.query({ level: 'warning' }).some((e) => /lab credential is in use/.test(e.message)));
    const login = await lab.app.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { username: 'admin', password: LAB_PASSWORD },
    });
    assert.equal(login.statusCode, 200, login.body);
    const token = login.json<{ token: string }>().token;
    const status = await lab.app.inject({
      url: '/api/status',
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(status.json<{ default_credential: boolean }>().default_credential, true, 'dashboard banner');
    // The login page's note (public): the lab user and its documented password, and the lab JWT secret.
    const note = await lab.app.inject({ url: '/api/auth/lab-credential' });
    assert.deepEqual(note.json(), {
      in_use: true,
      users: ['admin'],
      password: LAB_PASSWORD,
      jwt_secret: true,
    });
  } finally {
    await lab.close();
  }
  const prod = await createTimesvc({ ...config, environment: 'production' }, logger, { logRing: logs });
  await assert.rejects(prod.start(), /production but the documented lab credential is in use/);
  await prod.close();
  // The same through the environment: TIMESVC_ENVIRONMENT=production.
  const viaEnv = loadTimesvcConfig(join(repoRoot, 'config/timesvc.demo.yaml'), {
    TIMESVC_ENVIRONMENT: 'production',
  });
  assert.equal(viaEnv.environment, 'production');
});
