/**
 * HTTP surface: the status page (`/`, one script and one stylesheet, CSP to this origin only),
 * `GET /api/fleet` (the same as JSON), `/health`, `/health/ready` and `/metrics`. Read-only: nothing here
 * changes state, so no credential is asked.
 */
import { readFileSync } from 'node:fs';
import {
  createHttpApp,
  type Clock,
  type Logger,
  type Registry,
  type ServiceHealth,
} from '@broadcast-ops/core';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Fleet } from '../domain/fleet.ts';

const PAGE_DIR = new URL('./page/', import.meta.url);
const ASSETS: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'status.js': 'text/javascript; charset=utf-8',
  'status.css': 'text/css; charset=utf-8',
};
const CSP =
  "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

export interface AppDeps {
  fleet: Fleet;
  registry: Registry;
  clock: Clock;
  logger: Logger;
  version: string;
  pollIntervalMs: number;
  /** The service's summary (app.ts), answered on `/health` with the version. */
  health: () => ServiceHealth;
  /** Notes shown above the cards (config `notes`). */
  notes?: readonly { id: string; title: string; text: string }[];
}

export function buildStatusApp(d: AppDeps): FastifyInstance {
  const app = createHttpApp({ logger: d.logger });
  const files = Object.fromEntries(Object.keys(ASSETS).map((f) => [f, readFileSync(new URL(f, PAGE_DIR))]));
  const serve = (file: string) => (_req: unknown, reply: FastifyReply) =>
    reply
      .type(ASSETS[file] ?? 'application/octet-stream')
      .header('content-security-policy', CSP)
      .header('x-content-type-options', 'nosniff')
      .header('cache-control', 'no-cache')
      .send(files[file]);
  app.get('/', serve('index.html'));
  app.get('/status.js', serve('status.js'));
  app.get('/status.css', serve('status.css'));
  app.get('/api/fleet', (_req, reply) =>
    reply.header('cache-control', 'no-store').send({
      generatedAt: new Date(d.clock.now()).toISOString(),
      pollIntervalMs: d.pollIntervalMs,
      overall: d.fleet.overall(),
      notes: d.notes ?? [],
      services: d.fleet.list(),
    }),
  );
  app.get('/health', () => {
    const { status, ...rest } = d.health();
    return { status, version: d.version, ...rest };
  });
  app.get('/health/ready', () => ({ ready: true }));
  app.get('/metrics', async (_req, reply) =>
    reply.type(d.registry.contentType).send(await d.registry.metrics()),
  );
  return app;
}
