/**
 * The status service's configuration (JSON or YAML, strict: an unknown key is an error). Credentials are
 * never in the file: a service that needs one names the environment variable holding it (`tokenEnv`).
 */
import { loadConfig } from '@broadcast-ops/core';
import * as z from 'zod';
import { SERVICE_KINDS } from './domain/service.ts';

export { SERVICE_KINDS, type ServiceKind } from './domain/service.ts';

const httpUrl = z.url({ protocol: /^https?$/ });

const serviceSchema = z.strictObject({
  /** Shown on the page and used as the `service` label of the metrics. */
  name: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'lower-case letters, digits, . _ -'),
  /** How the health body and figures are read (packages/status/README.md "Verdicts"). */
  kind: z.enum(SERVICE_KINDS),
  /** The health URL polled every interval. */
  health: httpUrl,
  /** Prometheus text, read for a few figures (optional). */
  metrics: httpUrl.optional(),
  /** playout-monitor's device list (optional; gives the reason a device is offline). */
  devices: httpUrl.optional(),
  /** The service's own page, linked from the status page. */
  page: httpUrl.optional(),
  /** A title shown above the name (e.g. "punch: SRT session broker"). */
  title: z.string().max(200).optional(),
  /** Links shown on the card (a `template` one, e.g. `.../s/<name>`, is shown as text, not linked). */
  links: z
    .array(
      z.strictObject({
        label: z.string().min(1).max(200),
        url: z.string().min(1).max(2000),
        page: z.boolean().optional(),
        template: z.boolean().optional(),
      }),
    )
    .max(32)
    .default([]),
  /** Ports to point equipment at, shown on the card. */
  ports: z
    .array(
      z.strictObject({
        label: z.string().min(1).max(200),
        proto: z.enum(['tcp', 'udp']).optional(),
        port: z.number().int().min(1).max(65_535).optional(),
        outbound: z.boolean().optional(),
        use: z.string().max(1000).default(''),
      }),
    )
    .max(32)
    .default([]),
  /** Where the service's docs are (a path in the repository), shown on the card. */
  docs: z.string().max(300).optional(),
  /** Name of an environment variable holding a bearer token sent to this service's URLs. */
  tokenEnv: z
    .string()
    .regex(/^[A-Z_][A-Z0-9_]*$/)
    .optional(),
});

export const statusConfigSchema = z
  .strictObject({
    listen: z
      .strictObject({
        host: z.string().min(1).default('127.0.0.1'),
        port: z.number().int().min(0).max(65_535).default(8700),
      })
      .prefault({}),
    /** Each service is polled this often (ms). */
    pollIntervalMs: z.number().int().min(250).max(600_000).default(2000),
    /** A poll that takes longer is abandoned and counts as "no answer"; below the interval, so polls never pile up. */
    timeoutMs: z.number().int().min(100).max(60_000).default(1500),
    /** Largest health or metrics body read (bytes); the rest is refused as an error. */
    maxBodyBytes: z
      .number()
      .int()
      .min(1024)
      .max(16 * 1024 * 1024)
      .default(1024 * 1024),
    services: z.array(serviceSchema).min(1).max(64),
    /** Notes shown above the cards as text (e.g. the demo's lab credential; `npm start` writes them). */
    notes: z
      .array(
        z.strictObject({
          id: z.string().regex(/^[a-z][a-z0-9-]{0,62}$/),
          title: z.string().min(1).max(200),
          text: z.string().min(1).max(2000),
        }),
      )
      .max(16)
      .default([]),
    logging: z
      .strictObject({ level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace']).default('info') })
      .prefault({}),
  })
  .refine((c) => c.timeoutMs < c.pollIntervalMs, {
    message: 'timeoutMs must be below pollIntervalMs',
    path: ['timeoutMs'],
  })
  .refine((c) => new Set(c.services.map((s) => s.name)).size === c.services.length, {
    message: 'service names must be unique',
    path: ['services'],
  });

export type StatusConfig = z.output<typeof statusConfigSchema>;
export type ServiceConfig = StatusConfig['services'][number];

export function loadStatusConfig(
  file: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): StatusConfig {
  return loadConfig({
    schema: statusConfigSchema,
    file,
    environment: env,
    substitute: true,
    env: { STATUS_PORT: 'listen.port', STATUS_HOST: 'listen.host' },
  });
}
