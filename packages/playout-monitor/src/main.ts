// Entry point of `npx playout-monitor`: the only module that reads the environment and opens ports.
import { createInterface } from 'node:readline';
import { ConfigError, createLogger, runCli, Shutdown } from '@broadcast-ops/core';
import { DEFAULT_PORTS, loadMonitorConfig, serverPort, type MonitorConfig } from './config.ts';
import { loadAdminToken, type AdminTokenResult } from './io/access.ts';
import { PlayoutService } from './playout-service.ts';
import { simulatorKind, startSimulator, type SimulatorHandle } from './simulators/index.ts';
import { CASPAR_LAYOUTS } from './simulators/casparcg-sim.ts';

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

function logger(): ReturnType<typeof createLogger> {
  return createLogger({
    service: 'playout-monitor',
    level: process.env['LOG_LEVEL'] ?? 'info',
    pretty: process.env['LOG_PRETTY'] === '1',
  });
}

/** `--with-simulators`: one simulator per configured device on a loopback address (demo only). */
async function startDemoSimulators(
  config: MonitorConfig,
  oscPorts: Map<number, number>,
): Promise<SimulatorHandle[]> {
  const sims: SimulatorHandle[] = [];
  for (const s of config.servers) {
    if (!LOOPBACK.test(s.ip)) continue;
    const port = serverPort(s, config.settings);
    const kind = simulatorKind(s.type);
    if (!kind) continue;
    const sim =
      s.type === 'osc_player'
        ? await startSimulator(kind, {
            host: '127.0.0.1',
            port: oscPorts.get(port) ?? port,
            from: s.ip === 'localhost' ? '127.0.0.1' : s.ip,
            channel: s.channel,
            layer: s.layer,
            fps: s.framerate ?? config.settings.defaultFramerate,
            videoFormat: s.videoFormat,
            layout: '2.3',
          })
        : await startSimulator(kind, { host: s.ip, port });
    sims.push(sim);
  }
  return sims;
}

async function run(values: Record<string, unknown>): Promise<void> {
  const log = logger();
  const file =
    typeof values['config'] === 'string' ? values['config'] : process.env['PLAYOUT_MONITOR_CONFIG'];
  let config: MonitorConfig;
  try {
    config = loadMonitorConfig(file !== undefined ? { file } : {});
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`playout-monitor: ${err.message}\n`);
      process.exitCode = 2;
      return;
    }
    throw err;
  }
  // The whole monitor: inputs, pages, WebSocket, control API, Ember+ and TSL UMD (playout-service.ts).
  let admin: AdminTokenResult;
  try {
    admin = loadAdminToken(process.env);
  } catch (err) {
    process.stderr.write(`playout-monitor: cannot keep the admin token: ${(err as Error).message}\n`);
    process.exitCode = 2;
    return;
  }
  const service = new PlayoutService({ config, logger: log, configPath: file, adminToken: admin.token });
  const shutdown = new Shutdown({ logger: log }).install();
  shutdown.add('monitor', () => service.close());
  const started = await service.start();
  log.info(
    {
      url: `${started.httpUrl}/`,
      pages: ['/dashboard.html', '/gui.html', '/overlay.html', '/control.html'].map(
        (p) => started.httpUrl + p,
      ),
      websocket: `${started.httpUrl.replace(/^http/, 'ws')}/ws`,
      emberPlusPort: started.emberPort,
      tslUmdDestinations: config.settings.tslUmdDestinations.length,
      osc: Object.fromEntries(started.oscPorts),
      devices: config.servers.length,
      adminToken:
        admin.source === 'disabled'
          ? 'off (PLAYOUT_MONITOR_AUTH=off)'
          : `required (${admin.source === 'environment' ? 'PLAYOUT_MONITOR_ADMIN_TOKEN' : (admin.file ?? '')})`,
    },
    'playout monitor listening',
  );
  // Printed once, when generated: the operator's way in (the token is in the fragment, never sent to a server).
  if (admin.source === 'generated' && admin.token !== undefined) {
    process.stdout.write(
      `playout-monitor: admin token generated and saved to ${admin.file ?? ''} (0600). Control page: ` +
        `${started.httpUrl}/control.html#token=${admin.token}\n`,
    );
  }
  if (values['with-simulators'] === true) {
    const sims = await startDemoSimulators(config, started.oscPorts);
    const stops = sims.map((s) => s.demo());
    for (const s of sims) log.info({ simulator: s.describe() }, 'demo simulator running');
    shutdown.add('simulators', async () => {
      for (const stop of stops) stop();
      for (const s of sims) await s.close();
    });
  }
}

async function simulate(values: Record<string, unknown>, positionals: string[]): Promise<void> {
  const kind = simulatorKind(positionals[0] ?? '');
  if (!kind) {
    process.stderr.write(
      'playout-monitor simulate: give a type: casparcg|vmix|hyperdeck (or osc_player|http_mixer|tcp_recorder)\n',
    );
    process.exitCode = 2;
    return;
  }
  const str = (k: string): string | undefined => (typeof values[k] === 'string' ? values[k] : undefined);
  const n = (k: string): number | undefined => (str(k) === undefined ? undefined : Number(str(k)));
  const defaults = {
    casparcg: DEFAULT_PORTS.osc_player,
    vmix: DEFAULT_PORTS.http_mixer,
    hyperdeck: DEFAULT_PORTS.tcp_recorder,
  } as const;
  const layout = str('layout');
  const sim = await startSimulator(kind, {
    host: str('host') ?? '127.0.0.1',
    port: n('port') ?? defaults[kind],
    from: str('from'),
    layout: CASPAR_LAYOUTS.find((l) => l === layout),
    fps: n('fps'),
    videoFormat: str('video-format'),
    channel: n('channel'),
    layer: n('layer'),
    splitWrites: values['split-writes'] === true,
  });
  process.stdout.write(`simulating ${sim.describe()}\n`);
  const stopDemo = values['demo'] === true ? sim.demo() : undefined;
  const rl = createInterface({ input: process.stdin });
  let closing = false;
  const close = async (): Promise<void> => {
    if (closing) return;
    closing = true;
    stopDemo?.();
    rl.close();
    await sim.close();
    process.exit(0);
  };
  rl.on('line', (line) => {
    if (line.trim() === 'quit') {
      void close();
      return;
    }
    // A bad command (e.g. `play 9` on a deck with two clips) is answered with an error, not a crash.
    Promise.resolve()
      .then(() => sim.command(line))
      .then(
        (answer) => process.stdout.write(answer + '\n'),
        (err: unknown) =>
          process.stdout.write(`error: ${err instanceof Error ? err.message : String(err)}\n`),
      );
  });
  process.once('SIGINT', () => void close());
  process.once('SIGTERM', () => void close());
}

await runCli(
  'playout-monitor',
  'playout monitor: CasparCG (OSC), vMix (HTTP) and HyperDeck (TCP) state, normalised',
  {
    run: {
      summary: 'run the monitor (default command)',
      options: {
        config: { type: 'string', description: 'configuration file (JSON/YAML); env PLAYOUT_MONITOR_CONFIG' },
        'with-simulators': {
          type: 'boolean',
          description: 'demo: also simulate every device configured on a loopback address',
        },
      },
      run: ({ values }) => run(values),
    },
    simulate: {
      summary: 'run one device simulator; commands on stdin',
      positionals: '<casparcg|vmix|hyperdeck>',
      options: {
        host: {
          type: 'string',
          description: 'listen address (vMix, HyperDeck) or monitor address (CasparCG)',
        },
        port: { type: 'string', description: 'listen port, or the monitor OSC port (CasparCG)' },
        from: { type: 'string', description: 'CasparCG: source address to send from, e.g. 127.0.0.2' },
        layout: {
          type: 'string',
          description:
            'CasparCG: server version whose OSC it sends: 2.0 (2.0.7), 2.1, 2.2, 2.3 or 2.4 (default 2.3)',
        },
        fps: {
          type: 'string',
          description: 'CasparCG: frames per second of a progressive channel (default 50)',
        },
        'video-format': { type: 'string', description: 'CasparCG: the channel video-mode, e.g. 1080i5000' },
        channel: { type: 'string', description: 'CasparCG: channel (default 1)' },
        layer: { type: 'string', description: 'CasparCG: layer (default 10)' },
        'split-writes': { type: 'boolean', description: 'HyperDeck: split every write in two' },
        demo: { type: 'boolean', description: 'cycle through play/stop/record states' },
      },
      run: ({ values, positionals }) => simulate(values, positionals),
    },
  },
  process.argv.slice(2),
  'run',
);
