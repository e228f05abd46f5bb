/**
 * The playout monitor as core's `Service` (docs/ARCHITECTURE.md "One skeleton"): `PlayoutService` (the
 * inputs, the output view, the one HTTP app with the WebSocket, Ember+, TSL UMD) on the configured ports
 * with the process's clock, the admin token, and with `--with-simulators` one simulator per device on a
 * loopback address (demo).
 */
import { ConfigError, type Service, type ServiceContext } from '@broadcast-ops/core';
import type { DemoDevice, SimulatorHandle } from '@broadcast-ops/simulators/playout';
import { loadMonitorConfig, serverPort, type MonitorConfig } from './config.ts';
import { loadAdminToken, type AdminTokenResult } from './io/access.ts';
import { PlayoutService, type StartedService } from './playout-service.ts';

/** What `runService` loads before anything starts: the configuration and the admin token. */
export interface PlayoutSetup {
  config: MonitorConfig;
  admin: AdminTokenResult;
}

/** A configuration or admin-token problem is the operator's to fix: one line, exit 2. */
export function loadPlayoutSetup(file: string | undefined, env: NodeJS.ProcessEnv): PlayoutSetup {
  const config = loadMonitorConfig(file !== undefined ? { file, environment: env } : {});
  try {
    return { config, admin: loadAdminToken(env) };
  } catch (err) {
    throw new ConfigError(`cannot keep the admin token: ${(err as Error).message}`);
  }
}

/** The configured devices as the demo simulators read them: each one's port, and a CasparCG's frame rate. */
function demoDevices(config: MonitorConfig): DemoDevice[] {
  return config.servers.map((s) => ({
    ...s,
    port: serverPort(s, config.settings),
    framerate: s.type === 'osc_player' ? (s.framerate ?? config.settings.defaultFramerate) : undefined,
  }));
}

const PAGES = ['/dashboard.html', '/gui.html', '/overlay.html', '/control.html'];

export function playoutApp(ctx: ServiceContext<PlayoutSetup>): Service {
  const { config, admin } = ctx.config;
  const service = new PlayoutService({
    config,
    logger: ctx.logger,
    configPath: ctx.configFile,
    adminToken: admin.token,
    clock: ctx.clock,
    env: ctx.env,
  });
  let started: StartedService | undefined;
  let sims: SimulatorHandle[] = [];
  let stops: (() => void)[] = [];
  return {
    start: async () => {
      started = await service.start();
      // Printed once, when generated: the operator's way in (the token is in the fragment, never sent to a server).
      if (admin.source === 'generated' && admin.token !== undefined) {
        process.stdout.write(
          `playout-monitor: admin token generated and saved to ${admin.file ?? ''} (0600). Control page: ` +
            `${started.httpUrl}/control.html#token=${admin.token}\n`,
        );
      }
      if (ctx.values['with-simulators'] === true) {
        // The simulators load only for the demo (docs/at-rest.md at the repository root, "What was cut").
        const { startDemoSimulators } = await import('@broadcast-ops/simulators/playout');
        sims = await startDemoSimulators(demoDevices(config), started.oscPorts);
        stops = sims.map((s) => s.demo());
        for (const s of sims) ctx.logger.info({ simulator: s.describe() }, 'demo simulator running');
      }
    },
    close: async () => {
      for (const stop of stops.splice(0)) stop();
      for (const s of sims.splice(0)) await s.close();
      await service.close();
    },
    health: () => ({ ...service.health() }),
    describe: () => {
      if (!started) return {};
      const http = started.httpUrl;
      return {
        url: `${http}/`,
        pages: PAGES.map((p) => http + p),
        websocket: `${http.replace(/^http/, 'ws')}/ws`,
        emberPlusPort: started.emberPort,
        tslUmdDestinations: config.settings.tslUmdDestinations.length,
        osc: Object.fromEntries(started.oscPorts),
        devices: config.servers.length,
        adminToken:
          admin.source === 'disabled'
            ? 'off (PLAYOUT_MONITOR_AUTH=off)'
            : `required (${admin.source === 'environment' ? 'PLAYOUT_MONITOR_ADMIN_TOKEN' : (admin.file ?? '')})`,
      };
    },
  };
}
