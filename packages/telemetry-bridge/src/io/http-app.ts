/**
 * The one way the bridge builds an HTTP app: core's `createHttpApp` (error bodies, 404, body limit) with
 * core's Host guard (421 `HOST_NOT_ALLOWED`, `console.allowedHosts` besides this machine's names). The
 * console and state API (on the client WebSocket's port), `/metrics` and `/health` are separate listeners
 * because the spec gives them separate ports (docs/ARCHITECTURE.md "The HTTP edge"); all three come from here.
 */
import { createHttpApp, installHostGuard, type Logger } from '@broadcast-ops/core';
import type { FastifyInstance } from 'fastify';

export function bridgeHttpApp(logger: Logger, allowedHosts: readonly string[] = []): FastifyInstance {
  const app = createHttpApp({ logger });
  // DNS rebinding: every request, reads included, answers only to this host's names.
  installHostGuard(app, () => allowedHosts);
  return app;
}
