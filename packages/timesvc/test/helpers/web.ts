import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, listeningUrl, type Logger } from '@broadcast-ops/core';
import { stringify } from 'yaml';
import { loadTimesvcConfig } from '../../src/config.ts';
import { createTimesvc, type TimesvcOptions, type TimesvcService } from '../../src/io/service.ts';
import { LogRing } from '../../src/io/web/log-ring.ts';
import { waitFor } from '@broadcast-ops/core/testing';
import { loginWith, PASSWORDS, rigConfigDoc } from './web-app.ts';

export { JWT_SECRET, PASSWORDS, testUsers } from './web-app.ts';

export interface WebRig {
  service: TimesvcService;
  url: string;
  ntpPort: number;
  dir: string;
  configFile: string;
  logs: LogRing;
  logger: Logger;
  login(role: keyof typeof PASSWORDS): Promise<string>;
  close(): Promise<void>;
}

/**
 * A timesvc with three users (admin, operator, viewer), its config in a temp file (so PUT /api/config has
 * a file to write), NTP and web on loopback ephemeral ports, the log ring fed by its logger.
 */
export async function startWebRig(
  doc: Record<string, unknown> = {},
  options: TimesvcOptions & { environment?: NodeJS.ProcessEnv } = {},
): Promise<WebRig> {
  const dir = mkdtempSync(join(tmpdir(), 'timesvc-web-'));
  const configFile = join(dir, 'timesvc.yaml');
  writeFileSync(configFile, stringify(await rigConfigDoc(doc)), { mode: 0o600 });
  const environment = options.environment ?? {};
  const config = loadTimesvcConfig(configFile, environment);
  const logs = new LogRing();
  const logger = createLogger({ service: 'timesvc', level: 'debug', destination: logs.stream(undefined) });
  const service = await createTimesvc(config, logger, { configFile, logRing: logs, environment, ...options });
  await service.start();
  await service.app.listen({ port: 0, host: '127.0.0.1' });
  const url = listeningUrl(service.app);
  return {
    service,
    url,
    ntpPort: service.server()?.addresses[0]?.port ?? 0,
    dir,
    configFile,
    logs,
    logger,
    login: loginWith(service),
    async close() {
      await service.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function until<T>(
  f: () => T | undefined | Promise<T | undefined>,
  ms: number,
  what: string,
): Promise<T> {
  // core's waitFor: one polling loop, its bound scaled by the machine's load
  return (
    await waitFor(
      async () => {
        const v = await f();
        return v === undefined || v === false ? undefined : { v };
      },
      { timeoutMs: ms, intervalMs: 50, what },
    )
  ).v;
}
