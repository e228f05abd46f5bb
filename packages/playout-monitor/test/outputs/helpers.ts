// Helpers of the output tests (not a test file itself): the whole service on port 0, fed by a HyperDeck
// simulator (a real TCP peer speaking the HyperDeck protocol).
import { createSocket, type Socket } from 'node:dgram';
import { silentLogger } from '@broadcast-ops/core';
import { freePort, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { HyperdeckSimulator } from '@broadcast-ops/simulators/playout';
import { PlayoutService, type PlayoutServiceOptions } from '../../src/playout-service.ts';
import { deckEntry, makeConfig } from '../pure-helpers.ts';

export { deckEntry } from '../pure-helpers.ts';

export interface Rig {
  service: PlayoutService;
  url: string;
  emberPort: number;
  sims: HyperdeckSimulator[];
  configPath: string;
  close(): Promise<void>;
}

/** A service with `decks` HyperDeck simulators (ids 1…n), HTTP and Ember+ on free ports. */
export async function startRig(
  decks: number,
  settings: Record<string, unknown> = {},
  options: Partial<PlayoutServiceOptions> = {},
): Promise<Rig> {
  const sims: HyperdeckSimulator[] = [];
  const servers: Record<string, unknown>[] = [];
  for (let i = 1; i <= decks; i++) {
    const sim = new HyperdeckSimulator({ port: 0 });
    servers.push(deckEntry(i, await sim.start()));
    sims.push(sim);
  }
  // A CasparCG device added without a port receives OSC on settings.defaultPorts.osc_player, which the
  // monitor binds: a free port per rig, not CasparCG's 6250 that another suite's monitor may hold.
  const defaultPorts = { osc_player: await freePort('udp') };
  const config = makeConfig(servers, { emberPlusPort: 0, defaultPorts, ...settings });
  const dir = tempDir('playout-outputs-');
  const configPath = join(dir.path, 'config.json');
  writeFileSync(configPath, JSON.stringify(config, null, 2));
  const service = new PlayoutService({ config, logger: silentLogger(), configPath, ...options });
  const started = await service.start({ http: 0, ember: 0 });
  return {
    service,
    url: started.httpUrl,
    emberPort: started.emberPort,
    sims,
    configPath,
    close: async () => {
      await service.close();
      for (const s of sims) await s.close();
      dir.remove();
    },
  };
}

/** A UDP receiver on 127.0.0.1:0 that keeps every datagram with its arrival time. */
export async function udpReceiver(): Promise<{
  socket: Socket;
  port: number;
  packets: { data: Buffer; atMs: number }[];
  close(): Promise<void>;
}> {
  const socket = createSocket('udp4');
  const packets: { data: Buffer; atMs: number }[] = [];
  socket.on('message', (data) => packets.push({ data, atMs: performance.now() }));
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', () => resolve()));
  return {
    socket,
    port: socket.address().port,
    packets,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}

export async function until<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 5000,
  what = 'condition',
): Promise<T> {
  // core's waitFor: one polling loop, its bound scaled by the machine's load
  return (
    await waitFor(
      async () => {
        const v = await check();
        return v === undefined || v === false ? undefined : { v };
      },
      { timeoutMs, intervalMs: 20, what },
    )
  ).v;
}
