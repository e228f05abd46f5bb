import type { FastifyInstance } from 'fastify';
import { createHttpApp, type Logger, type Registry } from '@broadcast-ops/core';
import { fail } from '../errors.ts';

/**
 * The web app of this issue: `GET /api/health` and `GET /metrics` (both public, reference §1.3). The rest
 * of the web API (auth, status, config, WebSockets) comes with its own issue.
 */
export function buildHttpApp(options: {
  logger: Logger;
  registry: Registry;
  version: string;
  servedNowMs: () => number;
  /** How NTP receive timestamps are taken: 'kernel', 'userspace', or 'off' while NTP is not serving. */
  rxTimestamps?: () => string;
}): FastifyInstance {
  const app = createHttpApp({ logger: options.logger, bodyLimit: 64 * 1024 });
  app.get('/api/health', () => ({
    status: 'healthy',
    version: options.version,
    time: rfc3339Nano(options.servedNowMs()),
    rx_timestamps: options.rxTimestamps?.() ?? 'off',
  }));
  app.get('/metrics', async (_request, reply) => {
    const text = await options.registry.metrics();
    return reply.header('content-type', options.registry.contentType).send(text);
  });
  app.setNotFoundHandler((request) => {
    throw fail('NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0] ?? ''}`);
  });
  return app;
}

/** RFC 3339 UTC with nanosecond digits, from Unix ms with a fractional part. */
export function rfc3339Nano(unixMs: number): string {
  const ms = Math.floor(unixMs);
  const base = new Date(ms).toISOString().slice(0, 19);
  const ns = Math.floor((unixMs - Math.floor(unixMs / 1000) * 1000) * 1e6);
  return `${base}.${String(Math.min(999_999_999, ns)).padStart(9, '0')}Z`;
}
