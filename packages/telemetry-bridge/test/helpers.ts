/** Shared test fixtures: a strict fake adapter and an in-process bridge on port 0. */
import { silentLogger, type Logger } from '@broadcast-ops/core';
import { tempDir } from '@broadcast-ops/core/testing';
import { startBridge, type RunningBridge } from '../src/app.ts';
import { BridgeClient, type BridgeClientOptions } from '@broadcast-ops/bridge-client';
import { FakeAdapter, testConfig } from './quick-fixtures.ts';

export { FakeAdapter, deepMerge, openSession, testConfig } from './quick-fixtures.ts';

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
