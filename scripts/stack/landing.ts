/**
 * The landing page of `npm start` is the status service (packages/status) on the landing port. This module
 * writes nothing: it builds that service's configuration from the (moved) services, the figures' URLs of
 * config/status.demo.json and the notes (landing-notes.ts); the launcher writes it to
 * data/stack/status-landing.json.
 */
import { existsSync } from 'node:fs';
import { readConfigFile } from '@broadcast-ops/core';
import { landingNotes } from './landing-notes.ts';
import { STATUS_BIN, shiftConfigPorts, type StackService } from './services.ts';

/** The services the status service knows by kind (their health bodies and figures); others are plain HTTP. */
const STATUS_KINDS = new Set(['punch', 'telemetry-bridge', 'playout-monitor', 'timesvc']);

/** The demo config's entry per service (its metrics and devices URLs), ports moved by the offset. */
export function demoStatusEntries(file: string, offset: number): Map<string, Record<string, unknown>> {
  if (!existsSync(file)) return new Map();
  const demo = shiftConfigPorts(readConfigFile(file), offset) as { services?: Record<string, unknown>[] };
  return new Map((demo.services ?? []).map((s) => [String(s['name']), s]));
}

/** The status service's config for the landing page: every other service with a health URL, links and ports. */
export function landingConfig(
  list: readonly StackService[],
  landingPort: number,
  demo: ReadonlyMap<string, Record<string, unknown>>,
): Record<string, unknown> {
  return {
    listen: { host: '127.0.0.1', port: landingPort },
    pollIntervalMs: 2000,
    timeoutMs: 1500,
    notes: landingNotes(),
    services: list
      .filter((s) => s.name !== STATUS_BIN && s.start.ready)
      .map((s) => {
        const urls = s.start.urls ?? [];
        const page = urls.find((u) => u.page && !u.template)?.url;
        return {
          name: s.name,
          kind: STATUS_KINDS.has(s.name) ? s.name : 'http',
          health: s.start.ready,
          ...(page ? { page } : {}),
          // config/status.demo.json knows the URLs that give the figures (health body, metrics, devices).
          ...(demo.get(s.name) ?? {}),
          ...(s.start.title ? { title: s.start.title } : {}),
          links: urls.map((u) => ({
            label: u.label,
            url: u.url,
            ...(u.page ? { page: true } : {}),
            ...(u.template ? { template: true } : {}),
          })),
          ports: (s.start.ports ?? []).map((p) => ({
            label: p.label,
            ...(p.proto ? { proto: p.proto } : {}),
            ...(p.port !== undefined ? { port: Number(p.port) } : {}),
            ...(p.outbound ? { outbound: true } : {}),
            use: p.use,
          })),
          ...(s.start.docs ? { docs: s.start.docs } : {}),
        };
      }),
  };
}
