/**
 * `playout-monitor simulate <casparcg|vmix|hyperdeck>`: one device simulator, commands on stdin (the
 * monitor's README "Simulators"). A tool for tests and demos, beside the simulators it runs; the monitor's CLI
 * mounts it with its own default ports (the port a CasparCG sends OSC to is the monitor's, not the device's).
 */
import type { CliCommand } from '@broadcast-ops/core';

/** Default port per device type: the monitor's `settings.defaultPorts`. */
export type SimulatorDefaultPorts = Readonly<Record<'osc_player' | 'http_mixer' | 'tcp_recorder', number>>;

async function simulate(
  defaultPorts: SimulatorDefaultPorts,
  values: Record<string, unknown>,
  positionals: string[],
): Promise<void> {
  // The simulators load when the sub-command runs: the monitor names this command at every start
  // (docs/at-rest.md at the repository root, "What was cut").
  const [{ createInterface }, { CASPAR_LAYOUTS }, { simulatorKind, startSimulator }] = await Promise.all([
    import('node:readline'),
    import('./casparcg-sim.ts'),
    import('./handle.ts'),
  ]);
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
    casparcg: defaultPorts.osc_player,
    vmix: defaultPorts.http_mixer,
    hyperdeck: defaultPorts.tcp_recorder,
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

export const simulateCommand = (defaultPorts: SimulatorDefaultPorts): CliCommand => ({
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
  run: ({ values, positionals }) => simulate(defaultPorts, values, positionals),
});
