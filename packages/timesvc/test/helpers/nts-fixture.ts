import { after, before } from 'node:test';
import { tempDir } from '@broadcast-ops/core/testing';
import type { TimesvcService } from '../../src/io/service.ts';
import { makeCertificate, startNtsService } from './nts.ts';

/**
 * A shared NTS timesvc for a test file (`startNtsService` with a fresh certificate), started in `before` and
 * closed in `after`; read its fields inside the tests.
 */
export function ntsServiceFixture(prefix: string): {
  service: TimesvcService;
  ntpPort: number;
  kePort: number;
  cert: string;
} {
  const dir = tempDir(prefix);
  const fx = {} as { service: TimesvcService; ntpPort: number; kePort: number; cert: string };
  before(async () => {
    const pair = makeCertificate(dir.path);
    fx.cert = pair.cert;
    const started = await startNtsService(pair);
    fx.service = started.service;
    fx.ntpPort = started.ntpPort;
    fx.kePort = started.kePort;
  });
  after(async () => {
    await fx.service.close();
    dir.remove();
  });
  return fx;
}
