/**
 * `playout-monitor --with-simulators`: one simulator per device configured on a loopback address, for
 * demos (`npm start`); the monitor connects to them as to real devices.
 */
import { simulatorKind, startSimulator, type SimulatorHandle } from './handle.ts';

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

/** A configured device, as the monitor reads it: type, address, port and, for CasparCG, what it plays. */
export interface DemoDevice {
  /** The monitor's device type (`osc_player`, `http_mixer`, `tcp_recorder`) or a simulator kind. */
  type: string;
  ip: string;
  /** vMix/HyperDeck: the port the monitor connects to. CasparCG: the monitor's configured OSC port. */
  port: number;
  channel?: number | undefined;
  layer?: number | undefined;
  framerate?: number | undefined;
  videoFormat?: string | undefined;
}

/**
 * One simulator per device on a loopback address (demo only); other devices are real and left alone.
 * `oscPorts` maps a configured OSC port to the one the monitor bound (port 0, or moved by `npm start`).
 */
export async function startDemoSimulators(
  devices: readonly DemoDevice[],
  oscPorts: ReadonlyMap<number, number>,
): Promise<SimulatorHandle[]> {
  const sims: SimulatorHandle[] = [];
  for (const d of devices) {
    if (!LOOPBACK.test(d.ip)) continue;
    const kind = simulatorKind(d.type);
    if (!kind) continue;
    const sim =
      kind === 'casparcg'
        ? await startSimulator(kind, {
            host: '127.0.0.1',
            port: oscPorts.get(d.port) ?? d.port,
            from: d.ip === 'localhost' ? '127.0.0.1' : d.ip,
            channel: d.channel,
            layer: d.layer,
            fps: d.framerate,
            videoFormat: d.videoFormat,
            layout: '2.3',
          })
        : await startSimulator(kind, { host: d.ip, port: d.port });
    sims.push(sim);
  }
  return sims;
}
