/**
 * Child process of the playout-inputs bench: runs the device simulators so their CPU is not counted as
 * the monitor's. Protocol on stdio (JSON lines):
 *   out {"ready": {"vmix": [ports], "hyperdeck": [ports]}}
 *   in  {"osc": <monitor OSC port>}            -> starts 4 CasparCG senders (2.0.7, 2.3 and 2.4 traffic), out {"osc": "started"}
 *   in  {"report": true}                       -> out {"cpu": {"user", "system"}, "datagrams": n}
 *   in  {"quit": true}                         -> closes everything and exits 0
 */
import { createInterface } from 'node:readline';
import { CasparcgSimulator, HyperdeckSimulator, VmixSimulator } from '@broadcast-ops/simulators/playout';

const send = (o: unknown): void => {
  process.stdout.write(JSON.stringify(o) + '\n');
};

// A large show: 400 inputs per vMix (397 title inputs with their text fields beside camera, clip, colour).
const vmix = [0, 1, 2, 3].map(() => new VmixSimulator({ host: '127.0.0.1', port: 0, titleInputs: 397 }));
// Protocol 1.11 decks push their display timecode every frame once asked.
const decks = [0, 1, 2, 3].map(
  () => new HyperdeckSimulator({ host: '127.0.0.1', port: 0, videoFormat: '1080i50', fps: 25 }),
);
const caspar: CasparcgSimulator[] = [];
const vmixPorts: number[] = [];
const deckPorts: number[] = [];
for (const v of vmix) {
  vmixPorts.push(await v.start());
  v.play('opener.mp4', { durationSec: 3600 });
  v.previewInput(7);
  v.overlay(1, 12);
}
for (const d of decks) {
  deckPorts.push(await d.start());
  d.play(1);
}
send({ ready: { vmix: vmixPorts, hyperdeck: deckPorts } });

const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  void (async () => {
    const msg = JSON.parse(line) as { osc?: number; report?: boolean; quit?: boolean };
    if (msg.osc !== undefined) {
      // What each version sends: 2.0.7 and 2.3 at 1080p5000 (50 ticks/s), 2.3 at 1080i5000 (50 ticks/s, one
      // per field), 2.4 at 1080i5000 (25 ticks/s).
      const setups = [
        { layout: '2.0', videoFormat: '1080p5000' },
        { layout: '2.3', videoFormat: '1080p5000' },
        { layout: '2.3', videoFormat: '1080i5000' },
        { layout: '2.4', videoFormat: '1080i5000' },
      ] as const;
      for (let i = 0; i < 4; i++) {
        const sim = new CasparcgSimulator({
          targetHost: '127.0.0.1',
          targetPort: msg.osc,
          sourceAddress: `127.0.0.${i + 2}`,
          layout: setups[i]?.layout ?? '2.3',
          videoFormat: setups[i]?.videoFormat ?? '1080p5000',
        });
        await sim.start();
        sim.play(`clip${i}.mov`, { durationSec: 3600 });
        caspar.push(sim);
      }
      send({ osc: 'started' });
    } else if (msg.report) {
      send({ cpu: process.cpuUsage(), datagrams: caspar.reduce((n, s) => n + s.datagramsSent, 0) });
    } else if (msg.quit) {
      for (const s of caspar) await s.close();
      for (const v of vmix) await v.close();
      for (const d of decks) await d.close();
      rl.close();
      process.exit(0);
    }
  })();
});
