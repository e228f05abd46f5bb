/**
 * Quick-tier fixtures (docs/ARCHITECTURE.md "Tests mirror the layers"): the strict fake adapter, the test
 * configuration, a client session on an in-memory hub, and the console and state API as app.ts wires them (docs/console.md), built on a hub on a
 * `ManualClock` and driven with fastify's `inject`: no socket, no event log. helpers.ts re-exports the
 * fixtures for the tests that start a whole bridge.
 */
import { ManualClock, silentLogger, type Clock } from '@broadcast-ops/core';
import type { FastifyInstance } from 'fastify';
import { SERVER_VERSION } from '../src/app.ts';
import { configSchema, type BridgeConfig } from '../src/config.ts';
import type { Adapter, AdapterCommand, AdapterContext, AdapterResult } from '../src/domain/adapter.ts';
import { Hub } from '../src/domain/hub.ts';
import { ClientSession, type SessionTransport } from '../src/io/client-session.ts';
import { CommandTap } from '../src/io/command-tap.ts';
import { buildConsoleApp } from '../src/io/console-http.ts';

/**
 * Strict fake device adapter. Actions: `ok` (completed, echoes params), `fail`, `reject`, `throw`,
 * `set` (writes fake.<params.key> = params.value with the command's correlation id, then completes),
 * `hang` (never answers; records the abort), `deferred` (answers when the test calls resolveDeferred).
 * Any other action is an unplanned call and fails the test through `unexpected`.
 */
export class FakeAdapter implements Adapter {
  readonly name = 'fake.device';
  readonly targets = ['fake'];
  readonly owns = ['fake'];
  ctx: AdapterContext | undefined;
  executed: AdapterCommand[] = [];
  aborted: string[] = [];
  unexpected: string[] = [];
  #deferred: ((r: AdapterResult) => void)[] = [];

  capabilities(): Record<string, boolean> {
    return { press: true, rotate: false };
  }
  start(ctx: AdapterContext): void {
    this.ctx = ctx;
    ctx.setConnected(true);
  }
  stop(): void {
    this.ctx?.setConnected(false);
  }
  set(path: string, value: unknown): void {
    if (!this.ctx) throw new Error('fake adapter not started');
    this.ctx.setState(path, value);
  }
  resolveDeferred(r: AdapterResult): void {
    for (const d of this.#deferred.splice(0)) d(r);
  }
  execute(cmd: AdapterCommand, signal: AbortSignal): Promise<AdapterResult> {
    this.executed.push(cmd);
    switch (cmd.action) {
      case 'ok':
        return Promise.resolve({ status: 'completed', result: { echoed: cmd.params } });
      case 'fail':
        return Promise.resolve({
          status: 'failed',
          error: { code: 'ADAPTER_ERROR', message: 'device said no' },
        });
      case 'reject':
        return Promise.resolve({
          status: 'rejected',
          error: { code: 'FORBIDDEN', message: 'not supported' },
        });
      case 'throw':
        return Promise.reject(new Error('adapter exploded'));
      case 'set':
        this.ctx?.setState(`fake.${String(cmd.params['key'])}`, cmd.params['value'], {
          correlationId: cmd.correlationId,
        });
        return Promise.resolve({ status: 'completed' });
      case 'hang':
        return new Promise<AdapterResult>(() => {
          signal.addEventListener('abort', () => this.aborted.push(cmd.id));
        });
      case 'deferred':
        return new Promise<AdapterResult>((resolve) => this.#deferred.push(resolve));
      default:
        this.unexpected.push(cmd.action);
        return Promise.reject(new Error(`unplanned action ${cmd.action}`));
    }
  }
}

export function testConfig(overrides: Record<string, unknown> = {}, logDir?: string): BridgeConfig {
  const base = {
    clientTransport: { host: '127.0.0.1', port: 0 },
    metrics: { host: '127.0.0.1', port: 0 },
    health: { host: '127.0.0.1', port: 0 },
    eventLog: logDir === undefined ? { enabled: false } : { enabled: true, path: logDir },
    logging: { level: 'silent' },
  };
  const merged = deepMerge(base, overrides);
  return configSchema.parse(merged);
}

export function deepMerge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    out[k] =
      v !== null && typeof v === 'object' && !Array.isArray(v) && prev !== null && typeof prev === 'object'
        ? deepMerge(prev as Record<string, unknown>, v as Record<string, unknown>)
        : v;
  }
  return out;
}

export interface InjectedConsole {
  app: FastifyInstance;
  hub: Hub;
  adapter: FakeAdapter;
  clock: ManualClock;
  close(): Promise<void>;
}

/** The hub with the fake adapter started, and the console app on it as app.ts builds it (config overrides merged). */
export async function injectConsole(overrides: Record<string, unknown> = {}): Promise<InjectedConsole> {
  const config = testConfig(overrides);
  const ct = config.clientTransport;
  const clock = new ManualClock();
  const logger = silentLogger();
  const commands = new CommandTap(undefined);
  const hub = new Hub({ clock, logger, log: commands });
  const adapter = new FakeAdapter();
  hub.registerAdapter(adapter);
  await hub.startAdapters();
  hub.markRecovered();
  const app = buildConsoleApp({
    logger,
    hub,
    requireAuth: ct.requireAuth,
    authTokens: ct.authTokens,
    allowedHosts: config.console.allowedHosts,
    eventLog: undefined,
    commands,
    serverVersion: SERVER_VERSION,
  });
  await app.ready();
  return {
    app,
    hub,
    adapter,
    clock,
    async close() {
      await app.close();
      hub.abortAll();
      await hub.stopAdapters();
    },
  };
}

/** A client session on an in-memory hub, handshaken as `name` (no authentication, long idle timeout). */
export function openSession(hub: Hub, clock: Clock, t: SessionTransport, name: string): ClientSession {
  const s = new ClientSession(
    hub,
    t,
    clock,
    silentLogger(),
    {
      requireAuth: false,
      authTokens: [],
      handshakeTimeoutMs: 10_000,
      idleTimeoutMs: 3_600_000,
      serverVersion: 't',
    },
    undefined,
  );
  s.receive(JSON.stringify({ type: 'handshake', name, version: '1' }));
  return s;
}
