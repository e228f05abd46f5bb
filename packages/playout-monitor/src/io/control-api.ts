/**
 * Control API behind control.html (README "Control API"). Reads are open; every mutating endpoint
 * needs the admin token when one is configured. Every configuration change is validated against the
 * same schema as the file, saved atomically, and applied without a restart before it is acknowledged.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import * as z from '@broadcast-ops/core/zod';
import {
  addressInUse,
  deviceAddressKey,
  MAX_DEVICES,
  serverSchema,
  type MonitorConfig,
  type ServerConfig,
} from '../config.ts';
import { fail } from '../errors.ts';
import type { SimulationRequest } from '../domain/output-view.ts';
import { normaliseTimecode } from '../domain/timecode.ts';
import { restoreSecrets } from './config-file.ts';
import { testConnection, type ConnectionTarget } from './connection-test.ts';
import type { OutputView } from '../domain/output-view.ts';

const simulateSchema = z.strictObject({
  state: z.enum(['play', 'rec', 'stop', 'offline']),
  timecode: z.optional(z.string().check(z.maxLength(16))),
  filename: z.optional(z.string().check(z.maxLength(256))),
  durationSec: z.optional(z.number().check(z.positive(), z.maximum(86_400))),
});

const testSchema = z.strictObject({
  type: z.optional(z.enum(['osc_player', 'http_mixer', 'tcp_recorder'])),
  ip: z.optional(z.textRange(1, 253)),
  port: z.optional(z.intRange(1, 65535)),
  username: z.optional(z.string().check(z.maxLength(256))),
  password: z.optional(z.string().check(z.maxLength(256))),
});

function parse<T>(schema: z.ZodMiniType<T>, body: unknown): T {
  const r = schema.safeParse(body ?? {});
  if (!r.success) {
    const i = r.error.issues[0];
    throw fail('INVALID_REQUEST', `${i?.path.join('.') || 'body'}: ${i?.message ?? 'invalid'}`);
  }
  return r.data;
}

function deviceId(raw: string): number {
  const id = Number(raw);
  if (!Number.isInteger(id)) throw fail('DEVICE_NOT_FOUND', `no device with id ${raw}`);
  return id;
}

/** A second device on an address already in use is a conflict (409), named before anything is applied. */
function refuseUsedAddress(entry: ServerConfig, cfg: MonitorConfig): void {
  const key = deviceAddressKey(entry, cfg.settings);
  if (key === undefined) return;
  const other = cfg.servers.find((s) => s.id !== entry.id && deviceAddressKey(s, cfg.settings) === key);
  if (other) throw fail('DEVICE_CONFLICT', addressInUse(entry, other.id, cfg.settings));
}

/** What applying a configuration did: the configuration now in force and the changes that need a restart. */
export type ApplyResult = { config: MonitorConfig; restartRequired: string[] };

/**
 * The narrow port the control API drives (PlayoutService implements it): the configuration, the outputs'
 * view, applying a candidate configuration and the admin token check. Declared here, so this module does not
 * import the service that registers it (the repository's docs/ARCHITECTURE.md "No import cycles").
 */
export interface ControlPort {
  readonly config: MonitorConfig;
  readonly view: OutputView;
  publicConfig(): MonitorConfig;
  applyConfig(candidate: unknown): Promise<ApplyResult>;
  /** Throws the 401 error unless the request carries the admin token (when one is configured). */
  authorize(req: FastifyRequest): void;
}

export function registerControlApi(app: FastifyInstance, svc: ControlPort): void {
  app.get('/api/config', () => svc.publicConfig());

  app.put('/api/config', async (req) => {
    svc.authorize(req);
    return svc.applyConfig(restoreSecrets(req.body, svc.config));
  });

  app.put('/api/settings', async (req) => {
    svc.authorize(req);
    if (typeof req.body !== 'object' || req.body === null)
      throw fail('INVALID_REQUEST', 'body: an object of settings');
    const settings = { ...svc.config.settings, ...(req.body as Record<string, unknown>) };
    return svc.applyConfig({ ...svc.config, settings });
  });

  app.post('/api/devices', async (req, reply) => {
    svc.authorize(req);
    const cfg = svc.config;
    if (cfg.servers.length >= MAX_DEVICES) throw fail('DEVICE_CONFLICT', `at most ${MAX_DEVICES} devices`);
    const body = (typeof req.body === 'object' && req.body !== null ? req.body : {}) as Record<
      string,
      unknown
    >;
    const id = body['id'] ?? Math.max(0, ...cfg.servers.map((s) => s.id)) + 1;
    if (cfg.servers.some((s) => s.id === id))
      throw fail('DEVICE_CONFLICT', `a device with id ${JSON.stringify(id)} exists`);
    const entry = parse(serverSchema, { ...body, id });
    refuseUsedAddress(entry, cfg);
    const result = await svc.applyConfig({ ...cfg, servers: [...cfg.servers, entry] });
    void reply.status(201);
    return result.config.servers.find((s) => s.id === entry.id);
  });

  const replace = async (rawId: string, body: unknown, partial: boolean): Promise<unknown> => {
    const id = deviceId(rawId);
    const cfg = svc.config;
    const current = cfg.servers.find((s) => s.id === id);
    if (!current) throw fail('DEVICE_NOT_FOUND', `no device with id ${id}`);
    const given = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
    if (given['id'] !== undefined && given['id'] !== id)
      throw fail('INVALID_REQUEST', 'id: cannot change a device id');
    const merged = restoreSecrets({ servers: [{ ...(partial ? current : {}), ...given, id }] }, cfg) as {
      servers: unknown[];
    };
    const entry = parse(serverSchema, merged.servers[0]);
    refuseUsedAddress(entry, cfg);
    const result = await svc.applyConfig({
      ...cfg,
      servers: cfg.servers.map((s) => (s.id === id ? entry : s)),
    });
    return result.config.servers.find((s) => s.id === id);
  };
  app.put<{ Params: { id: string } }>('/api/devices/:id', async (req) => {
    svc.authorize(req);
    return replace(req.params.id, req.body, false);
  });
  app.patch<{ Params: { id: string } }>('/api/devices/:id', async (req) => {
    svc.authorize(req);
    return replace(req.params.id, req.body, true);
  });

  app.delete<{ Params: { id: string } }>('/api/devices/:id', async (req, reply) => {
    svc.authorize(req);
    const id = deviceId(req.params.id);
    const cfg = svc.config;
    if (!cfg.servers.some((s) => s.id === id)) throw fail('DEVICE_NOT_FOUND', `no device with id ${id}`);
    if (cfg.servers.length === 1)
      throw fail('DEVICE_CONFLICT', 'the configuration needs at least one device');
    await svc.applyConfig({ ...cfg, servers: cfg.servers.filter((s) => s.id !== id) });
    return reply.status(204).send();
  });

  // Test a saved device (optionally with another ip/port before saving it) or an unsaved one.
  app.post<{ Params: { id: string } }>('/api/devices/:id/test', async (req) => {
    svc.authorize(req);
    const id = deviceId(req.params.id);
    const current = svc.config.servers.find((s) => s.id === id);
    if (!current) throw fail('DEVICE_NOT_FOUND', `no device with id ${id}`);
    const o = parse(testSchema, req.body);
    const port = o.port ?? current.port ?? svc.config.settings.defaultPorts[current.type];
    const target: ConnectionTarget = {
      id,
      type: o.type ?? current.type,
      ip: o.ip ?? current.ip,
      port,
      username: o.username ?? (current.type === 'http_mixer' ? current.username : undefined),
      password: o.password ?? (current.type === 'http_mixer' ? current.password : undefined),
    };
    return testConnection(target, svc.view);
  });
  app.post('/api/test', async (req) => {
    svc.authorize(req);
    const o = parse(testSchema, req.body);
    if (!o.type || !o.ip) throw fail('INVALID_REQUEST', 'type and ip are required');
    return testConnection(
      { ...o, type: o.type, ip: o.ip, port: o.port ?? svc.config.settings.defaultPorts[o.type] },
      svc.view,
    );
  });

  app.post<{ Params: { id: string } }>('/api/devices/:id/simulate', (req) => {
    svc.authorize(req);
    const id = deviceId(req.params.id);
    const o = parse(simulateSchema, req.body);
    let timecode: string | undefined;
    if (o.timecode !== undefined) {
      timecode = normaliseTimecode(o.timecode);
      if (timecode === undefined) throw fail('INVALID_REQUEST', 'timecode: HH:MM:SS:FF');
    }
    const request: SimulationRequest = { ...o, timecode };
    const shown = svc.view.simulate(id, request);
    if (!shown) throw fail('DEVICE_NOT_FOUND', `no device with id ${id}`);
    return shown;
  });
  app.delete<{ Params: { id: string } }>('/api/devices/:id/simulate', async (req, reply) => {
    svc.authorize(req);
    const id = deviceId(req.params.id);
    if (!svc.view.get(id)) throw fail('DEVICE_NOT_FOUND', `no device with id ${id}`);
    svc.view.endSimulation(id);
    return reply.status(204).send();
  });
}
