/**
 * Scripted activity for the Companion simulator in demos (`npm start`, `companion-sim --demo`): a labelled
 * page, a clock on the `internal:time_hms` output, a programme tally that alternates, brightness changes.
 */
import type { Logger, Service } from '@broadcast-ops/core';
import type { BridgeConfig } from '../config.ts';
import { CompanionSimulator } from './companion-sim.ts';

export const DEMO_VARIABLES = [
  { id: 'internal:time_hms', type: 'output', name: 'Clock', description: 'map to $(internal:time_hms)' },
  {
    id: 'custom:tally_pgm',
    type: 'output',
    name: 'Programme tally',
    description: 'map to $(custom:tally_pgm)',
  },
  { id: 'custom:cue', type: 'input', name: 'Cue text', description: 'writes custom variable cue' },
] as const;

export function runCompanionSimDemo(sim: CompanionSimulator, periodMs = 1000): () => void {
  const labels = ['CAM 1', 'CAM 2', 'CAM 3', 'VT 1', 'GFX', 'MIC', 'REC', 'TAKE'];
  labels.forEach((text, i) =>
    sim.setButton(1, Math.floor(i / 8), i % 8, { text, color: '#202020', textColor: '#ffffff' }),
  );
  let tick = 0;
  const step = (): void => {
    tick++;
    sim.setOutput('internal:time_hms', new Date().toISOString().slice(11, 19));
    const live = tick % 3;
    sim.setOutput('custom:tally_pgm', String(live + 1));
    for (let i = 0; i < 3; i++)
      sim.setButton(1, 0, i, {
        text: labels[i] ?? '',
        color: i === live ? '#ff0000' : '#202020',
        textColor: '#ffffff',
      });
    if (tick % 10 === 0) sim.setBrightness(tick % 20 === 0 ? 100 : 60);
  };
  step();
  const timer = setInterval(step, periodMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** The configuration pointed at a simulator on `port` (WebSocket), with the demo's variables if none are set. */
export function demoCompanionConfig(config: BridgeConfig, port: number): BridgeConfig {
  const device = config.companion.device;
  return {
    ...config,
    companion: {
      ...config.companion,
      enabled: true,
      host: '127.0.0.1',
      port,
      transport: 'ws' as const,
      device: {
        ...device,
        variables: device.variables.length > 0 ? device.variables : DEMO_VARIABLES.map((v) => ({ ...v })),
      },
    },
  };
}

/**
 * `telemetry-bridge --companion-sim` with no Companion configured: the demo talks to a scripted simulator
 * over the real Satellite protocol. `start` opens the simulator first, then the bridge built for it;
 * `close` closes the bridge, then the simulator.
 */
export function withCompanionSimulator(
  config: BridgeConfig,
  logger: Logger,
  build: (config: BridgeConfig) => Service,
): Service {
  let sim: CompanionSimulator | undefined;
  let stopDemo: (() => void) | undefined;
  let bridge: Service | undefined;
  return {
    start: async () => {
      sim = new CompanionSimulator({ companionVersion: 'telemetry-bridge companion-sim' });
      const ports = await sim.listen({ tcp: null, ws: 0 });
      stopDemo = runCompanionSimDemo(sim);
      logger.info({ port: ports.ws }, 'no Companion configured: using the Companion simulator (demo)');
      bridge = build(demoCompanionConfig(config, ports.ws ?? 0));
      await bridge.start();
    },
    close: async () => {
      await bridge?.close();
      stopDemo?.();
      await sim?.close();
      bridge = stopDemo = sim = undefined;
    },
    health: () => bridge?.health() ?? { status: 'unhealthy', reason: 'not running' },
    describe: () => bridge?.describe() ?? {},
  };
}
