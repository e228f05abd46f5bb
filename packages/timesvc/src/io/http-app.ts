import type { FastifyInstance } from 'fastify';
import { createHttpApp, type Logger, type Registry } from '@broadcast-ops/core';
import type { ClockState } from '../domain/clock-state.ts';
import { assessHealth, type HealthLimits, type HealthStatus } from '../domain/health.ts';
import type { Disagreement } from '../domain/reference-source.ts';

/**
 * The web app: `GET /api/health` and `GET /metrics` (both public); the rest of the web API, the streams and
 * the dashboard are added by io/web/web-layer.ts (README "Web API").
 */
export function buildHttpApp(options: {
  logger: Logger;
  registry: Registry;
  version: string;
  servedNowMs: () => number;
  /** How NTP receive timestamps are taken: 'kernel', 'userspace', or 'off' while NTP is not serving. */
  rxTimestamps?: () => string;
  /** Where plain NTP requests are answered: 'native' (the addon's thread), 'javascript', or 'off'. */
  ntpResponder?: () => string;
  /** The clock's state for /api/health. */
  clock?: () => ClockHealth;
  /** HOLDOVER stays healthy while the advertised error is below this, seconds. */
  holdoverMaxErrorS?: number;
  /** LOCKED (and SYNCING) stay healthy while the advertised error is below this, seconds. */
  maxErrorS?: number;
  /** TLS for the web port (`web.tls_enabled`): PEM certificate chain and key. */
  https?: { cert: Buffer; key: Buffer } | undefined;
}): FastifyInstance {
  const app = createHttpApp({
    logger: options.logger,
    bodyLimit: 64 * 1024,
    // Timeouts against slow clients (15 s to send a request, 60 s idle keep-alive).
    fastify: {
      requestTimeout: 15_000,
      keepAliveTimeout: 60_000,
      ...(options.https ? { https: { ...options.https, minVersion: 'TLSv1.2' as const } } : {}),
    },
  });
  app.get('/api/health', (_request, reply) => {
    const clock = options.clock?.();
    const limits = {
      holdoverMaxErrorS: options.holdoverMaxErrorS ?? 0.01,
      maxErrorS: options.maxErrorS ?? 0.01,
    };
    const h = clock ? assessHealth(clock, limits) : { status: 'healthy' as const, reason: 'no clock' };
    // Load balancers and monitors read the status code: anything but healthy is 503.
    return reply.code(h.status === 'healthy' ? 200 : 503).send({
      status: h.status,
      reason: h.reason,
      version: options.version,
      time: rfc3339Nano(options.servedNowMs()),
      rx_timestamps: options.rxTimestamps?.() ?? 'off',
      ntp_responder: options.ntpResponder?.() ?? 'off',
      ...(clock
        ? {
            clock_state: clock.state.toLowerCase(),
            estimated_error_s: Number.isFinite(clock.estimatedErrorS) ? clock.estimatedErrorS : null,
            reference: clock.selected ?? null,
            host_clock_steps: clock.hostClockSteps,
            kernel_timestamps_replaced: clock.kernelStampsReplaced,
            disagreements: (clock.disagreements ?? []).map((d) => ({
              source: d.source,
              offset_s: d.offsetS,
              stepout_remaining_s:
                clock.nowMs === undefined ? null : Math.max(0, (d.stepoutEndsMs - clock.nowMs) / 1000),
            })),
          }
        : {}),
    });
  });
  app.get('/metrics', async (_request, reply) => {
    const text = await options.registry.metrics();
    return reply.header('content-type', options.registry.contentType).send(text);
  });
  return app;
}

export interface ClockHealth {
  state: ClockState;
  /** Root delay / 2 + root dispersion advertised now; ∞ while unsynchronised. */
  estimatedErrorS: number;
  selected: string | undefined;
  hostClockSteps: number;
  /** Kernel timestamps outside their window, replaced by the handler's reading (kernel-rx-timestamp.ts). */
  kernelStampsReplaced: number;
  /** References held back at a level beyond the step threshold (domain/health.ts). */
  disagreements?: readonly Disagreement[];
  /** Monotonic ms now. */
  nowMs?: number;
}

/** The status of domain/health.ts `assessHealth` (`maxErrorS` defaults to the holdover limit). */
export function healthStatus(
  clock: ClockHealth,
  holdoverMaxErrorS: number,
  maxErrorS: number = holdoverMaxErrorS,
): HealthStatus {
  const limits: HealthLimits = { holdoverMaxErrorS, maxErrorS };
  return assessHealth(clock, limits).status;
}

/** RFC 3339 UTC with nanosecond digits, from Unix ms with a fractional part. */
export function rfc3339Nano(unixMs: number): string {
  const ms = Math.floor(unixMs);
  const base = new Date(ms).toISOString().slice(0, 19);
  const ns = Math.floor((unixMs - Math.floor(unixMs / 1000) * 1000) * 1e6);
  return `${base}.${String(Math.min(999_999_999, ns)).padStart(9, '0')}Z`;
}
