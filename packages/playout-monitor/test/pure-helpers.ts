// Socket-free test helpers: fixtures and config builders, for the quick tiers and the rest (helpers.ts
// re-exports them beside the helpers that start a service).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ManualClock, silentLogger } from '@broadcast-ops/core';
import { configSchema, type MonitorConfig } from '../src/config.ts';
import { PlayoutService } from '../src/playout-service.ts';
import type { OscArg } from '../src/protocol/osc.ts';

export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), 'fixtures');

/** A .hex fixture: `#` comment lines, then hex digits. */
export function readHex(name: string): Uint8Array {
  const text = readFileSync(join(FIXTURES, 'osc', name), 'utf8');
  const hex = text
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .join('')
    .replace(/\s+/g, '');
  return new Uint8Array(Buffer.from(hex, 'hex'));
}

export function readFixture(...parts: string[]): string {
  return readFileSync(join(FIXTURES, ...parts), 'utf8');
}

export function makeConfig(servers: unknown[], settings: Record<string, unknown> = {}): MonitorConfig {
  return configSchema.parse({
    settings: { webSocketPort: 0, bindAddress: '127.0.0.1', ...settings },
    servers,
  });
}

/**
 * A monitor with one deck (on port 1, never reached), built on a ManualClock and never started: its one HTTP
 * app answers fastify `inject` (docs/ARCHITECTURE.md "Tests mirror the layers").
 */
export function unstartedService(adminToken: string): PlayoutService {
  return new PlayoutService({
    config: makeConfig([deckEntry(1, 1)], { emberPlusPort: 0 }),
    logger: silentLogger(),
    adminToken,
    clock: new ManualClock(),
  });
}

/** A control API call's headers: JSON when it has a body, the bearer token when one is given. */
export function apiHeaders(body: unknown, token: string | null): Record<string, string> {
  return {
    ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    ...(token !== null ? { authorization: `Bearer ${token}` } : {}),
  };
}

/** A HyperDeck (`tcp_recorder`) entry on 127.0.0.1:`port`, polled and reconnected quickly. */
export function deckEntry(id: number, port: number, name = `Deck ${id}`): Record<string, unknown> {
  return {
    id,
    name,
    type: 'tcp_recorder',
    ip: '127.0.0.1',
    port,
    pollIntervalMs: 100,
    pingIntervalMs: 500,
    timeoutMs: 1500,
    reconnectMinMs: 100,
    reconnectMaxMs: 400,
  };
}

/** An `http_mixer` entry for a vMix simulator speaking both APIs (HTTP on `port`, TCP on `tcpPort`). */
export function vmixEntry(
  id: number,
  sim: { port: number; tcpPort: number },
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    id,
    name: 'vMix',
    type: 'http_mixer',
    ip: '127.0.0.1',
    port: sim.port,
    tcpPort: sim.tcpPort,
    pollIntervalMs: 100,
    timeoutMs: 400,
    ...extra,
  };
}

/** The captured CasparCG OSC datagrams under fixtures/osc (their README names the releases). */
export const OSC_FIXTURES = [
  'casparcg-2.0.7-play-1.hex',
  'casparcg-2.0.7-play-2.hex',
  'casparcg-2.0.7-paused.hex',
  'casparcg-2.0.7-stopped.hex',
  'casparcg-2.0.7-frame-hhT.hex',
  'casparcg-2.1-play-1.hex',
  'casparcg-2.1-play-2.hex',
  'casparcg-2.2-1080i50.hex',
  'casparcg-2.3-paused.hex',
  'casparcg-2.3-playing.hex',
  'casparcg-2.3-playing-next.hex',
  'casparcg-2.3-stopped.hex',
  'casparcg-2.3-nested.hex',
  'casparcg-2.4-1080i50.hex',
];

/** An OSC argument as text, the way the independent decoders print it. */
export function oscArgText(a: OscArg): string {
  switch (a.type) {
    case 'T':
    case 'F':
    case 'N':
    case 'I':
      return a.type;
    case 'b':
      return Buffer.from(a.value).toString('hex');
    case 'f':
      return String(Math.fround(a.value));
    default:
      return String(a.value);
  }
}

/** Every mutating route of the control API (method, path, a body it accepts when authorised). */
export const MUTATIONS: [string, string, unknown][] = [
  ['PUT', '/api/config', {}],
  ['PUT', '/api/settings', { updateIntervalMs: 200 }],
  ['POST', '/api/devices', { name: 'X', type: 'tcp_recorder', ip: '127.0.0.1' }],
  ['PUT', '/api/devices/1', { name: 'X', type: 'tcp_recorder', ip: '127.0.0.1' }],
  ['PATCH', '/api/devices/1', { name: 'Renamed' }],
  ['DELETE', '/api/devices/1', undefined],
  ['POST', '/api/devices/1/test', undefined],
  ['POST', '/api/test', { type: 'tcp_recorder', ip: '127.0.0.1' }],
  ['POST', '/api/devices/1/simulate', { state: 'play' }],
  ['DELETE', '/api/devices/1/simulate', undefined],
];
