/**
 * Scripted activity for the Companion simulator in demos (`npm start`, `companion-sim --demo`): a labelled
 * page, a clock on the `internal:time_hms` output, a programme tally that alternates, brightness changes.
 * The bridge's `--companion-sim` wiring (packages/telemetry-bridge/src/companion-demo.ts) runs it.
 */
import type { CompanionSimulator } from './companion-sim.ts';

/** The variables the demo drives, as a bridge configures them (`companion.device.variables`). */
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
