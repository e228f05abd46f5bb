/** Shared test fixtures: a strict fake adapter and an in-process bridge on port 0. */
import { silentLogger, type Clock, type Logger } from '@broadcast-ops/core';
import type { Hub } from '../src/domain/hub.ts';
import { ClientSession, type SessionTransport } from '../src/io/client-session.ts';
import { tempDir } from '@broadcast-ops/core/testing';
import type { Adapter, AdapterCommand, AdapterContext, AdapterResult } from '../src/domain/adapter.ts';
import { configSchema, type BridgeConfig } from '../src/config.ts';
import { startBridge, type RunningBridge } from '../src/app.ts';
import { BridgeClient, type BridgeClientOptions } from '@broadcast-ops/bridge-client';

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

export interface TestBridge {
  bridge: RunningBridge;
  adapter: FakeAdapter;
  clients: BridgeClient[];
  client(name: string, extra?: Partial<BridgeClientOptions>): Promise<BridgeClient>;
  close(): Promise<void>;
}

export async function startTestBridge(
  overrides: Record<string, unknown> = {},
  options: { logger?: Logger; withLog?: boolean } = {},
): Promise<TestBridge> {
  const dir = options.withLog ? tempDir('tb-test-') : undefined;
  const adapter = new FakeAdapter();
  const bridge = await startBridge({
    config: testConfig(overrides, dir?.path),
    logger: options.logger ?? silentLogger(),
    adapters: [adapter],
  });
  const clients: BridgeClient[] = [];
  return {
    bridge,
    adapter,
    clients,
    async client(name, extra = {}) {
      const c = new BridgeClient({ url: bridge.clientUrl, name, reconnect: { enabled: false }, ...extra });
      clients.push(c);
      await c.connect();
      return c;
    },
    async close() {
      await Promise.all(clients.map((c) => c.close()));
      await bridge.close();
      dir?.remove();
    },
  };
}

/** Collect every message a client receives, in order. */
export function record(client: BridgeClient): { all: { type: string; m: Record<string, unknown> }[] } {
  const all: { type: string; m: Record<string, unknown> }[] = [];
  client.on('state', (m) => all.push({ type: 'state', m: m as unknown as Record<string, unknown> }));
  client.on('event', (m) => all.push({ type: 'event', m: m as unknown as Record<string, unknown> }));
  client.on('ack', (m) => all.push({ type: 'ack', m: m as unknown as Record<string, unknown> }));
  client.on('error', (m) => all.push({ type: 'error', m: m as unknown as Record<string, unknown> }));
  return { all };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** A port for a bridge that must come back on the same port after a restart (core's, below the ephemeral range). */
export { freePort } from '@broadcast-ops/core/testing';

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
