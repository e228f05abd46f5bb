// A real punch broker on 127.0.0.1:0 for the tally-to-punch test and bench (not a test file itself). punch is
// imported through its package exports only.
import { join } from 'node:path';
import { silentLogger } from '@broadcast-ops/core';
import { createPunchServer, loadPunchConfig, type PunchServer } from '@broadcast-ops/punch';

export const PUNCH_TEST_SECRET = 'playout-monitor-test-secret-0123456789-abcdefghijklmnopqrstuvwxyz';

/** Start a broker whose store lives in `dir`; returns it with its base URL. */
export async function startPunchBroker(dir: string): Promise<{ broker: PunchServer; url: string }> {
  const broker = createPunchServer({
    config: {
      ...loadPunchConfig({
        environment: {
          PUNCH_SECRET: PUNCH_TEST_SECRET,
          PUNCH_HOST: '127.0.0.1',
          PUNCH_PORT: '0',
          PUNCH_DB: join(dir, 'punch.db'),
        },
      }),
      secret: PUNCH_TEST_SECRET,
    },
    logger: silentLogger(),
  });
  return { broker, url: await broker.listen() };
}
