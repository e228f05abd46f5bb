/**
 * `telemetry-bridge --companion-sim`: the demo's Companion is the scripted simulator of @broadcast-ops/simulators,
 * reached over the real Satellite protocol; this wiring points the bridge's configuration at it.
 */
import type { Logger, Service } from '@broadcast-ops/core';
import { CompanionSimulator, DEMO_VARIABLES, runCompanionSimDemo } from '@broadcast-ops/simulators/companion';
import type { BridgeConfig } from './config.ts';

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
