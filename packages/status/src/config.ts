/**
 * The status service's configuration (JSON or YAML, strict: an unknown key is an error). Credentials are
 * never in the file: a service that needs one names the environment variable holding it (`tokenEnv`).
 */
import { loadConfig } from '@broadcast-ops/core';
import * as z from '@broadcast-ops/core/zod';
import { SERVICE_KINDS } from './domain/service.ts';

export { SERVICE_KINDS, type ServiceKind } from './domain/service.ts';

const httpUrl = z.url({ protocol: /^https?$/ });

const serviceSchema = z.strictObject({
  /** Shown on the page and used as the `service` label of the metrics. */
  name: z.string().check(z.regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'lower-case letters, digits, . _ -')),
  /** How the health body and figures are read (packages/status/README.md "Verdicts"). */
  kind: z.enum(SERVICE_KINDS),
  /** The health URL polled every interval. */
  health: httpUrl,
  /** Prometheus text, read for a few figures (optional). */
  metrics: z.optional(httpUrl),
  /** playout-monitor's device list (optional; gives the reason a device is offline). */
  devices: z.optional(httpUrl),
  /** The service's own page, linked from the status page. */
  page: z.optional(httpUrl),
  /** A title shown above the name (e.g. "punch: SRT session broker"). */
  title: z.optional(z.string().check(z.maxLength(200))),
  /** Links shown on the card (a `template` one, e.g. `.../s/<name>`, is shown as text, not linked). */
  links: z._default(
    z
      .array(
        z.strictObject({
          label: z.textRange(1, 200),
          url: z.textRange(1, 2000),
          page: z.optional(z.boolean()),
          template: z.optional(z.boolean()),
        }),
      )
      .check(z.maxLength(32)),
    [],
  ),
  /** Ports to point equipment at, shown on the card. */
  ports: z._default(
    z
      .array(
        z.strictObject({
          label: z.textRange(1, 200),
          proto: z.optional(z.enum(['tcp', 'udp'])),
          port: z.optional(z.intRange(1, 65_535)),
          outbound: z.optional(z.boolean()),
          use: z._default(z.string().check(z.maxLength(1000)), ''),
        }),
      )
      .check(z.maxLength(32)),
    [],
  ),
  /** Where the service's docs are (a path in the repository), shown on the card. */
  docs: z.optional(z.string().check(z.maxLength(300))),
  /** Name of an environment variable holding a bearer token sent to this service's URLs. */
  tokenEnv: z.optional(z.string().check(z.regex(/^[A-Z_][A-Z0-9_]*$/))),
});

export const statusConfigSchema = z
  .strictObject({
    listen: z.prefault(
      z.strictObject({
        host: z._default(z.string().check(z.minLength(1)), '127.0.0.1'),
        port: z._default(z.intRange(0, 65_535), 8700),
      }),
      {},
    ),
    /** Each service is polled this often (ms). */
    pollIntervalMs: z._default(z.intRange(250, 600_000), 2000),
    /** A poll that takes longer is abandoned and counts as "no answer"; below the interval, so polls never pile up. */
    timeoutMs: z._default(z.intRange(100, 60_000), 1500),
    /** Largest health or metrics body read (bytes); the rest is refused as an error. */
    maxBodyBytes: z._default(z.intRange(1024, 16 * 1024 * 1024), 1024 * 1024),
    services: z.array(serviceSchema).check(z.minLength(1), z.maxLength(64)),
    /** Notes shown above the cards as text (e.g. the demo's lab credential; `npm start` writes them). */
    notes: z._default(
      z
        .array(
          z.strictObject({
            id: z.string().check(z.regex(/^[a-z][a-z0-9-]{0,62}$/)),
            title: z.textRange(1, 200),
            text: z.textRange(1, 2000),
          }),
        )
        .check(z.maxLength(16)),
      [],
    ),
    logging: z.prefault(
      z.strictObject({
        level: z._default(z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace']), 'info'),
      }),
      {},
    ),
  })
  .check(
    z.refine((c) => c.timeoutMs < c.pollIntervalMs, {
      message: 'timeoutMs must be below pollIntervalMs',
      path: ['timeoutMs'],
    }),
    z.refine((c) => new Set(c.services.map((s) => s.name)).size === c.services.length, {
      message: 'service names must be unique',
      path: ['services'],
    }),
  );

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
