/**
 * `playout-monitor --with-simulators`: one simulator per device configured on a loopback address, for
 * demos (`npm start`); the monitor connects to them as to real devices.
 */
import { serverPort, type MonitorConfig } from '../config.ts';
import { simulatorKind, startSimulator, type SimulatorHandle } from './index.ts';

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

/** `--with-simulators`: one simulator per configured device on a loopback address (demo only). */
export async function startDemoSimulators(
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
