/**
 * Start-up bound: timesvc and `chronyd -x` with their default polls follow the same upstream (+20 ms, with
 * path noise), side by side, three pairs at once (noise 0, ±25 µs, ±100 µs). Prints per pair each server's
 * median advertised root dispersion over the run, its largest after the first 10 s, replies outside their
 * bound (|error| > root delay / 2 + root dispersion + the probe's half round trip) and, for timesvc, the
 * largest update age.
 *
 *   npx tsx bench/timesvc-discipline/startup.ts [--seconds 360]
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { tempDir } from '@broadcast-ops/core/testing';
import { startupPair, startupFigures } from '@broadcast-ops/timesvc/testing';

const { values } = parseArgs({ options: { seconds: { type: 'string' } } });
const SECONDS = Number(values.seconds ?? 360);
const dir = tempDir('timesvc-startup-bench-');
const pairs = await Promise.all(
  [0, 25e-6, 100e-6].map((noise, i) => startupPair(join(dir.path, `p${i}`), noise)),
);
const t0 = performance.now();
while (performance.now() - t0 < SECONDS * 1000) await new Promise((r) => setTimeout(r, 5000));
for (const p of pairs) {
  const f = startupFigures(p);
  console.log(JSON.stringify({ noiseUs: p.noiseS * 1e6, ...f }));
}
await Promise.all(pairs.map((p) => p.stop()));
dir.remove();
