/**
 * One handle over the three simulators, driven by text commands (the `simulate` CLI reads them from
 * stdin; the demo runs a script of them). Commands:
 *   play <name> [durationSec] [startFrame]   pause   resume   stop   clear   record [on|off]   stream [on|off]
 *   preview <input>   ftb [on|off]   overlay <n> <input|off>   (vMix)
 *   eject   lose-reply <command>   (HyperDeck)
 *   offline   online   malformed [kind]   mode <ok|hang|error500|garbage|truncated>   status
 */
import { CasparcgSimulator, type CasparLayout, type CasparMalformedKind } from './casparcg-sim.ts';
import { HyperdeckSimulator } from './hyperdeck-sim.ts';
import { VmixSimulator, type VmixSimMode } from './vmix-sim.ts';

export type SimulatorKind = 'casparcg' | 'vmix' | 'hyperdeck';

export function simulatorKind(type: string): SimulatorKind | undefined {
  switch (type) {
    case 'casparcg':
    case 'osc_player':
      return 'casparcg';
    case 'vmix':
    case 'http_mixer':
      return 'vmix';
    case 'hyperdeck':
    case 'tcp_recorder':
      return 'hyperdeck';
    default:
      return undefined;
  }
}

export interface SimulatorOptions {
  /** vMix/HyperDeck: address to listen on. CasparCG: address of the monitor to send to. */
  host: string;
  /** vMix/HyperDeck: port to listen on. CasparCG: the monitor's OSC port. */
  port: number;
  /** CasparCG only: source address to send from. */
  from?: string | undefined;
  layout?: CasparLayout | undefined;
  fps?: number | undefined;
  videoFormat?: string | undefined;
  channel?: number | undefined;
  layer?: number | undefined;
  splitWrites?: boolean | undefined;
}

export interface SimulatorHandle {
  kind: SimulatorKind;
  /** Where it listens or sends to, for people. */
  describe(): string;
  command(line: string): Promise<string>;
  /** Loop through states forever (the `npm start` demo); returns a stop function. */
  demo(): () => void;
  close(): Promise<void>;
}

const USAGE =
  'commands: play <name> [durationSec] [startFrame] | pause | resume | stop | clear | record [on|off] | ' +
  'stream [on|off] | preview <input> | ftb [on|off] | overlay <n> <input|off> | eject | lose-reply <command> | ' +
  'offline | online | freeze [on|off] | malformed [kind] | mode <ok|hang|error500|garbage|truncated> | status';

export async function startSimulator(kind: SimulatorKind, o: SimulatorOptions): Promise<SimulatorHandle> {
  if (kind === 'casparcg') {
    const sim = new CasparcgSimulator({
      targetHost: o.host,
      targetPort: o.port,
      ...(o.from !== undefined ? { sourceAddress: o.from } : {}),
      ...(o.layout !== undefined ? { layout: o.layout } : {}),
      ...(o.fps !== undefined ? { fps: o.fps } : {}),
      ...(o.videoFormat !== undefined ? { videoFormat: o.videoFormat } : {}),
      ...(o.channel !== undefined ? { channel: o.channel } : {}),
      ...(o.layer !== undefined ? { layer: o.layer } : {}),
    });
    await sim.start();
    return {
      kind,
      describe: () =>
        `CasparCG ${sim.layout} OSC at ${sim.fps} fps, channel ${sim.channel} layer ${sim.layer}, from ${o.from ?? 'any'} to ${o.host}:${o.port}`,
      command: (line) => Promise.resolve(casparCommand(sim, line)),
      demo: () =>
        loop([
          [() => sim.play('AMB.mp4', { durationSec: 20, loop: false }), 12_000],
          [() => sim.pause(), 3000],
          [() => sim.resume(), 4000],
          [() => sim.stop(), 4000],
          [() => sim.play('GO1080P25.mp4', { durationSec: 15, loop: true }), 10_000],
          [() => sim.clear(), 4000],
        ]),
      close: () => sim.close(),
    };
  }
  if (kind === 'vmix') {
    const sim = new VmixSimulator({ host: o.host, port: o.port });
    await sim.start();
    return {
      kind,
      describe: () => `vMix ${sim.version} API on http://${o.host}:${sim.port}/api`,
      command: (line) => vmixCommand(sim, line),
      demo: () =>
        loop([
          [() => sim.play('opener.mp4', { durationSec: 20 }), 10_000],
          [() => sim.record(true), 8000],
          [() => sim.record(false), 1000],
          [() => sim.pause(), 4000],
          [() => sim.stop(), 5000],
        ]),
      close: () => sim.close(),
    };
  }
  const sim = new HyperdeckSimulator({
    host: o.host,
    port: o.port,
    ...(o.splitWrites !== undefined ? { splitWrites: o.splitWrites } : {}),
  });
  await sim.start();
  return {
    kind,
    describe: () => `HyperDeck on ${o.host}:${sim.port}`,
    command: (line) => Promise.resolve(hyperdeckCommand(sim, line)),
    demo: () =>
      loop([
        [() => sim.play(1), 10_000],
        [() => sim.stop(), 4000],
        [() => sim.record(), 10_000],
        [() => sim.stop(), 4000],
        [() => sim.play(2), 8000],
      ]),
    close: () => sim.close(),
  };
}

function loop(steps: [() => void, number][]): () => void {
  let i = 0;
  let timer: NodeJS.Timeout | undefined;
  const next = (): void => {
    const step = steps[i % steps.length];
    i++;
    if (!step) return;
    step[0]();
    timer = setTimeout(next, step[1]);
  };
  next();
  return () => clearTimeout(timer);
}

function words(line: string): string[] {
  return line.trim().split(/\s+/).filter(Boolean);
}

function num(s: string | undefined): number | undefined {
  if (s === undefined) return undefined;
  const n = Number(s);
  return Number.isFinite(n) ? n : undefined;
}

function casparCommand(sim: CasparcgSimulator, line: string): string {
  const [cmd, a, b, c] = words(line);
  switch (cmd) {
    case 'play': {
      const d = num(b);
      const f = num(c);
      sim.play(a ?? 'AMB.mp4', {
        ...(d !== undefined ? { durationSec: d } : {}),
        ...(f !== undefined ? { startFrame: f } : {}),
      });
      return 'ok';
    }
    case 'pause':
      sim.pause();
      return 'ok';
    case 'resume':
      sim.resume();
      return 'ok';
    case 'stop':
      sim.stop();
      return 'ok';
    case 'clear':
      sim.clear();
      return 'ok';
    case 'offline':
      sim.offline();
      return 'ok';
    case 'online':
      sim.online();
      return 'ok';
    case 'malformed':
      sim.sendMalformed((a ?? 'garbage') as CasparMalformedKind);
      return 'ok';
    case 'status':
      return `frame ${sim.frame}, ${sim.datagramsSent} datagrams sent`;
    default:
      return USAGE;
  }
}

async function vmixCommand(sim: VmixSimulator, line: string): Promise<string> {
  const [cmd, a, b, c] = words(line);
  switch (cmd) {
    case 'play': {
      const d = num(b);
      const p = num(c);
      sim.play(a ?? 'opener.mp4', {
        ...(d !== undefined ? { durationSec: d } : {}),
        ...(p !== undefined ? { positionMs: p } : {}),
      });
      return 'ok';
    }
    case 'pause':
      sim.pause(num(a));
      return 'ok';
    case 'stop':
      sim.stop();
      return 'ok';
    case 'record':
      sim.record(a !== 'off');
      return 'ok';
    case 'stream':
      sim.stream(a !== 'off');
      return 'ok';
    case 'preview':
      sim.previewInput(num(a) ?? 1);
      return 'ok';
    case 'ftb':
      sim.fadeToBlack(a !== 'off');
      return 'ok';
    case 'overlay':
      sim.overlay(num(a) ?? 1, b === 'off' ? undefined : (num(b) ?? 1));
      return 'ok';
    case 'offline':
      await sim.offline();
      return 'ok';
    case 'online':
      await sim.online();
      return 'ok';
    case 'mode':
    case 'malformed':
      sim.setMode((cmd === 'malformed' ? (a ?? 'garbage') : (a ?? 'ok')) as VmixSimMode);
      return 'ok';
    case 'status':
      return `${sim.requests} requests served`;
    default:
      return USAGE;
  }
}

function hyperdeckCommand(sim: HyperdeckSimulator, line: string): string {
  const [cmd, a, b] = words(line);
  switch (cmd) {
    case 'play':
      sim.play(num(a) ?? 1, num(b) ?? 0);
      return 'ok';
    case 'stop':
      sim.stop(num(a));
      return 'ok';
    case 'record':
      sim.record(a);
      return 'ok';
    case 'offline':
      void sim.offline();
      return 'ok';
    case 'online':
      void sim.online();
      return 'ok';
    case 'freeze':
      sim.freeze(a !== 'off');
      return 'ok';
    case 'eject':
      sim.swapMedia([]);
      return 'ok';
    case 'lose-reply':
      sim.dropNextReply(words(line).slice(1).join(' ') || 'transport info');
      return 'ok';
    case 'malformed':
      sim.sendMalformed((a ?? 'unknown-line') as 'unknown-line');
      return 'ok';
    case 'status':
      return `client ${sim.hasClient ? 'connected' : 'none'}, ${sim.commands.length} commands received`;
    default:
      return USAGE;
  }
}
