/** The load sweep shared by the timesvc NTP and NTS benches: one step per offered rate, in order. */
import { cpus, loadavg } from 'node:os';

export interface SweepStep {
  rate: number;
  loss: number;
  achievedRate: number;
  /**
   * With several steps per rate (`sweepTogether`'s `repeat`): each round's `key`, in round order (NaN for
   * a round the server sat out), so two servers' steps of the same round can be paired.
   */
  roundKeys?: readonly number[];
}

/**
 * Runs `step` for each rate and prints one line per step (`detail` gives the figures after the rate).
 * A step at or above `lossLimit` is retried once; the sweep ends after the second failed step.
 */
export async function sweep<R extends SweepStep>(
  name: string,
  rates: readonly number[],
  lossLimit: number,
  step: (rate: number) => Promise<R>,
  detail: (r: R) => string,
): Promise<R[]> {
  const results: R[] = [];
  let failures = 0;
  for (const rate of rates) {
    let r = await step(rate);
    if (r.loss >= lossLimit) {
      // The 2-core machine is shared: retry a failed step once so a transient stall does not end the sweep.
      await new Promise((res) => setTimeout(res, 500));
      const again = await step(rate);
      if (again.loss < r.loss) r = again;
    }
    results.push(r);
    console.log(
      `  ${name.padEnd(8)} offered ${String(rate).padStart(6)}/s (generator achieved ${r.achievedRate.toFixed(0)}/s): ` +
        detail(r),
    );
    if (r.loss >= lossLimit && ++failures >= 2) break;
    await new Promise((res) => setTimeout(res, 300));
  }
  return results;
}

/** Highest step under `lossLimit`, and only if the generator actually delivered that rate (±3 %). */
export function best<R extends SweepStep>(results: readonly R[], lossLimit: number): R | undefined {
  return results
    .filter((r) => r.loss < lossLimit && r.achievedRate >= r.rate * 0.97)
    .sort((a, b) => b.rate - a.rate)[0];
}

/**
 * Several servers swept together: at each rate every server still in the sweep gets its step before the
 * next rate, in turn, so the load of a shared machine weighs on all of them alike (a separate sweep per
 * server lets the machine's load drift between them). A server leaves the sweep after its second failed
 * step (each failed step is retried once, as in `sweep`). Each server first gets one unmeasured warm-up
 * step at the first rate. Results in the order of `servers`.
 */
export async function sweepTogether<R extends SweepStep>(
  servers: readonly { name: string; step: (rate: number) => Promise<R> }[],
  rates: readonly number[],
  lossLimit: number,
  detail: (r: R) => string,
  /**
   * Steps per server at each rate (default 1; a function of the rate gives a rate more rounds), interleaved
   * round by round; the step kept is the one with the median `key` (a single disturbance of the shared
   * machine in one 2-second step then does not decide the rate's figure). The servers' order is reversed in
   * every second round (A B C, C B A, ...), so no server always follows another: each round's steps of two
   * servers lie seconds apart, in either order, which `compareToAnchors` pairs.
   */
  repeat: { times: number | ((rate: number) => number); key: (r: R) => number } = {
    times: 1,
    key: () => 0,
  },
): Promise<R[][]> {
  const results: R[][] = servers.map(() => []);
  const failures = servers.map(() => 0);
  // One unmeasured step per server at the first rate: a Node server's request path is compiled by the JIT
  // in its first seconds under load, which is start-up, not the cost per request (chronyd gets it too).
  for (const { name, step } of servers) {
    const r = await step(rates[0] ?? 1000);
    console.log(`  ${name.padEnd(8)} warm-up at ${rates[0]}/s (not counted): ${detail(r)}`);
    await new Promise((res) => setTimeout(res, 300));
  }
  for (const rate of rates) {
    const steps: R[][] = servers.map(() => []);
    const roundKeys: number[][] = servers.map(() => []);
    const rounds = Math.max(1, typeof repeat.times === 'number' ? repeat.times : repeat.times(rate));
    for (let round = 0; round < rounds; round++) {
      for (let turn = 0; turn < servers.length; turn++) {
        const s = round % 2 === 0 ? turn : servers.length - 1 - turn;
        roundKeys[s]![round] = Number.NaN;
        if (failures[s]! >= 2) continue;
        const { name, step } = servers[s]!;
        let r = await step(rate);
        if (r.loss >= lossLimit) {
          await new Promise((res) => setTimeout(res, 500));
          const again = await step(rate);
          if (again.loss < r.loss) r = again;
        }
        steps[s]!.push(r);
        roundKeys[s]![round] = repeat.key(r);
        console.log(
          `  ${name.padEnd(8)} offered ${String(rate).padStart(6)}/s (generator achieved ${r.achievedRate.toFixed(0)}/s): ` +
            detail(r),
        );
        await new Promise((res) => setTimeout(res, 300));
      }
    }
    for (let s = 0; s < servers.length; s++) {
      const all = steps[s]!;
      if (all.length === 0) continue;
      const mid = Math.floor((all.length - 1) / 2);
      // The median step by `key`, with the median loss of the steps (the step chosen by CPU may be the one
      // round that lost nothing, or the one that lost).
      const r = {
        ...[...all].sort((a, b) => repeat.key(a) - repeat.key(b))[mid]!,
        loss: [...all].map((x) => x.loss).sort((a, b) => a - b)[mid]!,
        roundKeys: roundKeys[s]!,
      };
      if (all.length > 1)
        console.log(`  ${servers[s]!.name.padEnd(8)} median of ${all.length} at ${rate}/s: ${detail(r)}`);
      results[s]!.push(r);
      if (r.loss >= lossLimit) failures[s]!++;
    }
    if (failures.every((f) => f >= 2)) break;
  }
  return results;
}

/** The machine's load average, for the bench's header and closing line. */
export function loadLine(): string {
  return `load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')} (${cpus().length} cores)`;
}

/** A step with the server's CPU per answered request and the generator's own figures. */
export interface CpuStep extends SweepStep {
  cpuUsPerReq: number;
  /** The generator's CPU time per second of sending (ms/s; 1000 = a whole core). */
  genCpuMsPerS: number;
}

/**
 * Side by side at each offered rate: the subject's loss and CPU per request against each anchor's, the
 * ratio subject/anchor, and the worst such ratio over the rates where both lost < `lossLimit` (what each
 * target counts), marked against the anchor's target. Returns the worst ratio per anchor.
 */
export function compareToAnchors<R extends CpuStep>(
  subject: { name: string; results: readonly R[] },
  anchors: readonly { name: string; results: readonly R[]; target: number }[],
  lossLimit: number,
): (number | undefined)[] {
  console.log(
    `Same offered rate, side by side (loss, server CPU µs per answered request; ratio ${subject.name}/anchor, ` +
      `the median of the rounds' paired ratios where a rate had three rounds or more):`,
  );
  const ratios: number[][] = anchors.map(() => []);
  const pct = (r: R): string => `${(r.loss * 100).toFixed(3)} %`;
  for (const r of subject.results) {
    const parts = [
      `  ${String(r.rate).padStart(6)}/s  ${subject.name} ${pct(r)} ${r.cpuUsPerReq.toFixed(1)}`,
    ];
    anchors.forEach((a, i) => {
      const c = a.results.find((x) => x.rate === r.rate);
      if (!c) {
        parts.push(`${a.name} -`);
        return;
      }
      const ofMedians = r.cpuUsPerReq / c.cpuUsPerReq;
      const paired = pairedRatios(r.roundKeys, c.roundKeys);
      // With three or more rounds the paired median is the figure ("Measuring a start here" in
      // docs/at-rest.md: this VM's speed changes for seconds at a time, and each pair shares one phase).
      const ratio = paired.length >= 3 ? median(paired) : ofMedians;
      const both = r.loss < lossLimit && c.loss < lossLimit;
      if (both) ratios[i]!.push(ratio);
      parts.push(
        `${a.name} ${pct(c)} ${c.cpuUsPerReq.toFixed(1)}: ${ratio.toFixed(2)}×` +
          (paired.length >= 3
            ? ` (paired, ${paired.length} rounds ${paired.map((x) => x.toFixed(2)).join(' ')}; of medians ${ofMedians.toFixed(2)}×)`
            : '') +
          (both ? (ratio <= a.target ? '' : ` (above ${a.target}×)`) : ' (not counted: a server lost)'),
      );
    });
    console.log(parts.join('  |  '));
  }
  return anchors.map((a, i) => {
    const rs = ratios[i]!;
    if (rs.length === 0) {
      console.log(`  ${subject.name}/${a.name}: no rate where both lost < ${lossLimit * 100} %`);
      return undefined;
    }
    const worst = Math.max(...rs);
    console.log(
      `  CPU per request ${subject.name}/${a.name} at every rate both served with < ${lossLimit * 100} % loss ` +
        `(${rs.length} rates): worst ${worst.toFixed(2)}×, best ${Math.min(...rs).toFixed(2)}× ` +
        `(target ≤ ${a.target}× at every rate: ${worst <= a.target ? 'met' : 'NOT met'})`,
    );
    return worst;
  });
}

/** Per round, subject / anchor, for the rounds both served (NaN where either sat out). */
export function pairedRatios(
  subject: readonly number[] | undefined,
  anchor: readonly number[] | undefined,
): number[] {
  if (!subject || !anchor) return [];
  const out: number[] = [];
  for (let i = 0; i < Math.min(subject.length, anchor.length); i++) {
    const q = subject[i]! / anchor[i]!;
    if (Number.isFinite(q)) out.push(q);
  }
  return out;
}

/** The median (the mean of the middle two for an even count). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/**
 * Each server's highest rate answered with < `lossLimit` loss, stated with the generator's limit: whether
 * the generator delivered the next rate up (else the server's figure is the generator's, not its own), and
 * the generator's own CPU at that rate beside its measured ceiling.
 */
export function highestRates(
  servers: readonly { name: string; results: readonly CpuStep[] }[],
  rates: readonly number[],
  lossLimit: number,
  ceiling: { rate: number },
): void {
  console.log(
    `Highest rate at < ${lossLimit * 100} % loss (generator ceiling ${ceiling.rate.toFixed(0)}/s with nothing answering):`,
  );
  for (const s of servers) {
    const b = best(s.results, lossLimit);
    const delivered = s.results.filter((r) => r.achievedRate >= r.rate * 0.97);
    const above = s.results.find((r) => b !== undefined && r.rate > b.rate);
    let why: string;
    if (!b) why = 'none';
    else if (above && above.achievedRate >= above.rate * 0.97)
      why = `lost ${(above.loss * 100).toFixed(3)} % at ${above.rate}/s, which the generator delivered (${above.achievedRate.toFixed(0)}/s, its CPU ${above.genCpuMsPerS.toFixed(0)} ms/s): the server's limit`;
    else if (above)
      // A generator below most of a core that fell short was descheduled (the machine's load), not at its
      // own ceiling; either way the rate above is not the server's limit.
      why =
        `the generator fell short at ${above.rate}/s (${above.achievedRate.toFixed(0)}/s, its CPU ` +
        `${above.genCpuMsPerS.toFixed(0)} ms/s: ${above.genCpuMsPerS >= 800 ? 'at its own limit' : 'descheduled, the machine was busy'}): ` +
        `not the server's limit`;
    else if (b.rate === Math.max(...rates)) why = 'the highest rate of the sweep: not saturated';
    else why = 'the sweep ended';
    console.log(
      `  ${s.name.padEnd(8)} ${b ? `${b.rate}/s (${b.cpuUsPerReq.toFixed(1)} µs CPU/req)` : '-'}: ${why}` +
        (delivered.length
          ? `; generator's highest delivered ${Math.max(...delivered.map((r) => r.achievedRate)).toFixed(0)}/s`
          : ''),
    );
  }
}
