/** The load sweep shared by the timesvc NTP and NTS benches: one step per offered rate, in order. */
import { cpus, loadavg } from 'node:os';

export interface SweepStep {
  rate: number;
  loss: number;
  achievedRate: number;
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
   * Steps per server at each rate (default 1), interleaved round by round; the step kept is the one with
   * the median `key` (a single disturbance of the shared machine in one 2-second step then does not decide
   * the rate's figure).
   */
  repeat: { times: number; key: (r: R) => number } = { times: 1, key: () => 0 },
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
    for (let round = 0; round < Math.max(1, repeat.times); round++) {
      for (let s = 0; s < servers.length; s++) {
        if (failures[s]! >= 2) continue;
        const { name, step } = servers[s]!;
        let r = await step(rate);
        if (r.loss >= lossLimit) {
          await new Promise((res) => setTimeout(res, 500));
          const again = await step(rate);
          if (again.loss < r.loss) r = again;
        }
        steps[s]!.push(r);
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
      const r = [...all].sort((a, b) => repeat.key(a) - repeat.key(b))[Math.floor((all.length - 1) / 2)]!;
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
