// sourcestats as chronyc means it: the residual frequency against the served clock as it is corrected now,
// NR (runs of residual signs), and the CLI's rows in chronyc's signs and layout (docs/cli.md).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ZERO_CORRECTION, type Correction } from '../../src/domain/correction.ts';
import { signRuns, sourceStats, SourceStatsTracker } from '../../src/domain/source-stats.ts';
import { fmtAge, formatSourcestats, formatTracking, type PeerRow } from '../../src/io/cli/format.ts';
import { peerRow } from '../helpers/peer-row.ts';

/** A source 10 ppm fast of the host clock, +5 ms, sampled every 16 s; `served` is the served correction then. */
function feed(t: SourceStatsTracker, served: (ms: number) => Correction, n = 20): void {
  for (let i = 0; i < n; i++) {
    const atMs = i * 16_000;
    const raw = 0.005 + 10e-6 * (atMs / 1000) + (i % 2 ? 1e-6 : -1e-6);
    const c = served(atMs);
    const servedNow = c.phaseS + (c.freq * (atMs - c.t0Ms)) / 1000;
    t.update([{ id: 'a', lastSampleMs: atMs, offsetS: raw - servedNow }], c);
  }
}

test('the residual frequency is against the served clock as corrected now (≈ 0 once the frequency is followed)', () => {
  const free = new SourceStatsTracker();
  feed(free, () => ZERO_CORRECTION);
  const a = free.stats('a');
  assert.ok(Math.abs((a.frequencyPpm ?? 0) - 10) < 0.01, `uncorrected: the source's rate, ${a.frequencyPpm}`);
  // The served clock took the source's phase and frequency half-way through: the whole history is compared
  // with the current line (as chronyd slews its samples), so the residual is ~0, not a mix of both.
  const followed = new SourceStatsTracker();
  const locked: Correction = {
    t0Ms: 160_000,
    phaseS: 0.005 + 10e-6 * 160,
    freq: 10e-6,
    slewS: 0,
    slewRate: 0.005,
  };
  feed(followed, (ms) => (ms < 160_000 ? ZERO_CORRECTION : locked));
  const b = followed.stats('a');
  assert.ok(Math.abs(b.frequencyPpm ?? 1) < 0.01, `residual ${b.frequencyPpm} ppm`);
  assert.ok(Math.abs(b.offsetS ?? 1) < 5e-6, `offset ${b.offsetS}`);
  assert.equal(b.samples, 20);
  assert.equal(b.runs, 20, 'alternating ±1 µs residuals: every sample starts a run');
});

test('NR counts runs of residuals of one sign (chrony regress.c)', () => {
  assert.equal(signRuns([]), 0);
  assert.equal(signRuns([1, 2, -1, -2, 3]), 3);
  const trend = sourceStats(
    Array.from({ length: 10 }, (_, i) => ({ atMs: i * 1000, offsetS: 1e-3 * (i - 4.5) ** 2 })),
  );
  assert.equal(trend.runs, 3, 'a parabola through a line: +, −, + (a straight line no longer fits)');
});

const row = (): PeerRow =>
  peerRow(
    { address: '192.0.2.1', selected: true, verdict: 'selected' },
    {
      samples: 11,
      runs: 5,
      span_s: 46 * 60,
      frequency_ppm: 0.001,
      skew_ppm: 0.045,
      offset_us: -1,
      stddev_us: 25,
    },
  );

test("sourcestats and tracking print chronyc's columns and signs", () => {
  const out = formatSourcestats([row()]).split('\n');
  assert.equal(out[0], 'Name/IP Address            NP  NR  Span  Frequency  Freq Skew  Offset  Std Dev');
  // chronyc's own example row (doc/chronyc.adoc), from a source 0.001 ppm and 1 µs ahead of the served clock.
  assert.equal(out[2], '192.0.2.1                  11   5   46m     -0.001      0.045     +1us    25us');
  const t = formatTracking({
    clock: {
      state: 'locked',
      offset_ns: 6747,
      offset_stddev_ns: 0,
      drift_ppb: 3225,
      drift_error_ppb: 129,
      remaining_slew_ns: 0,
      estimated_error_ns: 1000,
      active_reference: '192.0.2.1',
      last_sync: null,
      last_update_age_s: 1,
      leap: 'none',
    },
    ntp: { stratum: 3, ref_id: '192.0.2.1', ref_id_hex: 'C0000201', root_delay_ms: 1, root_dispersion_ms: 1 },
    peers: [row()],
  });
  assert.match(t, /^Last offset\s+: -0\.000006747 seconds$/m, 'served clock behind the source: negative');
  assert.match(t, /^Frequency\s+: 3\.225 ppm slow$/m, 'the served clock runs faster than the host clock');
  assert.match(t, /^Residual freq\s+: -0\.001 ppm$/m);
  assert.equal(fmtAge(1199), '1199');
  assert.equal(fmtAge(1200), '20m');
  assert.equal(fmtAge(36000), '10h');
  assert.equal(fmtAge(4 * 86400), '4d');
});
