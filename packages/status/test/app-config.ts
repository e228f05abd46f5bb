// The config both app.ts tests build the status service from (test/app and test/io; no socket here).
import { statusConfigSchema, type StatusConfig } from '../src/config.ts';

/**
 * Loopback on an ephemeral port, one slow poll, and one service on port 9 (discard) of loopback: nothing
 * answers, so a poll that runs ends quickly as "no answer".
 */
export function appTestConfig(): StatusConfig {
  return statusConfigSchema.parse({
    listen: { host: '127.0.0.1', port: 0 },
    pollIntervalMs: 60_000,
    timeoutMs: 500,
    services: [{ name: 'punch', kind: 'punch', health: 'http://127.0.0.1:9/health' }],
  });
}
