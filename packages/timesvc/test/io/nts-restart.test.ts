import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { tempDir } from '@broadcast-ops/core/testing';
import { loadTimesvcConfig } from '../../src/config.ts';
import { NtsClientSession } from '../../src/domain/nts-client-session.ts';
import { ntsKeyExchange } from '../../src/io/nts-ke-client.ts';
import { createTimesvc, type TimesvcService } from '../../src/io/service.ts';
import { makeCertificate, udpExchange as exchange, writeNtsConfig } from '../helpers/nts.ts';

const header = (): Buffer => {
  const h = Buffer.alloc(48);
  h[0] = 0x23;
  return h;
};

test('cookies survive a restart when TIMESVC_NTS_COOKIE_KEY is set, and not without it', async () => {
  const dir = tempDir('timesvc-nts-restart-');
  const pair = makeCertificate(dir.path);
  const file = join(dir.path, 'timesvc.yaml');
  writeNtsConfig(file, pair);
  const start = async (env: NodeJS.ProcessEnv): Promise<TimesvcService> => {
    const s = await createTimesvc(loadTimesvcConfig(file, env), silentLogger());
    await s.start();
    return s;
  };
  const env = { TIMESVC_NTS_COOKIE_KEY: '0f'.repeat(32) };
  const first = await start(env);
  const ke = await ntsKeyExchange({ host: '127.0.0.1', port: first.nts()?.ke.port ?? 0, caFile: pair.cert });
  await first.close();
  const session = new NtsClientSession(ke, ke.cookies);
  try {
    // Same key from the environment: the restarted server opens the cookies it handed out before.
    const second = await start(env);
    try {
      const port = second.server()?.addresses[0]?.port ?? 0;
      const reply = await exchange(session.wrap(header())!, port);
      assert.equal(reply && session.unwrap(reply).kind, 'authentic');
    } finally {
      await second.close();
    }
    // No key configured: a random one per process, so the old cookies get NTSN (the client re-keys).
    const third = await start({});
    try {
      const port = third.server()?.addresses[0]?.port ?? 0;
      const reply = await exchange(session.wrap(header())!, port);
      assert.ok(reply);
      assert.equal(session.unwrap(reply).kind, 'nak');
      assert.equal(third.nts()?.cookies.persistent, false);
    } finally {
      await third.close();
    }
  } finally {
    dir.remove();
  }
});
