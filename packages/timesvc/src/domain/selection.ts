import { MAXDIST, MAXSTRAT, MINDISP, PHI } from '../protocol/ntp-packet.ts';

/**
 * Reference selection (RFC 5905 §11.2): the fit test, the intersection algorithm (§11.2.1) over the fit
 * NTP sources, and the choice of the system reference among the truechimers (README "Selection").
 */

/** What selection needs to know about one reference source. */
export interface SelectionInput {
  id: string;
  kind: 'gpsdo' | 'ntp' | 'local';
  prefer: boolean;
  /** Reachable, synchronised, not denied (the source's own view). */
  usable: boolean;
  stratum: number;
  leap: number;
  /** The source's own root delay and dispersion, seconds. */
  rootDelayS: number;
  rootDispersionS: number;
  /** Our measurement of it: offset, delay, dispersion and jitter of the clock filter, seconds. */
  offsetS: number;
  delayS: number;
  dispersionS: number;
  jitterS: number;
  /** Monotonic ms of the newest sample. */
  atMs: number;
  /** Consecutive samples since the source was last silent (see `SelectionOptions.minSamples`). */
  runSamples: number;
  /** The source's poll interval, log2 s. */
  pollLog2: number;
  /**
   * Held back at a level beyond the step threshold from the served clock until its stepout or a
   * confirmation (docs/clock-discipline.md): judged against the intersection, never chosen, no vote.
   */
  held?: boolean;
}

export interface SelectionOptions {
  /** Samples a source needs before it may be selected (an iburst's four, like chrony). */
  minSamples: number;
  nowMs: number;
  /** The currently selected reference, kept while it stays a truechimer of the best rank. */
  current: string | undefined;
  /**
   * Choosing a reference from none: wait while another NTP source is still in its initial samples (it has
   * answered but holds fewer than `minSamples`), so the first source to finish its burst does not win by
   * being first — a falseticker among truechimers could otherwise be selected during warm-up.
   */
  waitForBursts: boolean;
  /**
   * At start-up (no reference chosen yet) also wait for NTP sources that have not answered at all: they
   * were all asked at the same time, so a missing answer is more likely late than absent.
   */
  waitForSilent: boolean;
}

export type Verdict =
  'selected' | 'candidate' | 'falseticker' | 'held' | 'unfit' | 'too_few_samples' | 'unusable';

export interface SelectionResult {
  selected: string | undefined;
  /**
   * Selection jitter (after RFC 5905 §11.2.3 ψ_s): the largest distance of another truechimer's offset
   * from the selected one, plus that truechimer's jitter. Part of the advertised dispersion, so the bound
   * also covers the truechimers' disagreement.
   */
  selectionJitterS: number;
  /** Selection is waiting for sources in their initial burst. */
  waiting: boolean;
  verdicts: Map<string, Verdict>;
  rootDistances: Map<string, number>;
}

/**
 * RFC 5905 §11.2 (A.5.5.2 root_dist): λ = max(MINDISP, root delay + delay)/2 + root dispersion +
 * dispersion + PHI·age + jitter.
 */
export function rootDistance(s: SelectionInput, nowMs: number): number {
  const age = Math.max(0, nowMs - s.atMs) / 1000;
  return (
    Math.max(MINDISP, s.rootDelayS + s.delayS) / 2 + s.rootDispersionS + s.dispersionS + PHI * age + s.jitterS
  );
}

/**
 * Selection rank (lower wins) among the truechimers: GPSDO 0, preferred peer 1, other peers stratum + 10,
 * local stratum last.
 */
function rank(s: SelectionInput): number {
  if (s.kind === 'gpsdo') return 0;
  if (s.kind === 'local') return 1000;
  return s.prefer ? 1 : s.stratum + 10;
}

export function selectReference(inputs: readonly SelectionInput[], o: SelectionOptions): SelectionResult {
  const verdicts = new Map<string, Verdict>();
  const rootDistances = new Map<string, number>();
  const fit: SelectionInput[] = [];
  for (const s of inputs) {
    const lambda = rootDistance(s, o.nowMs);
    rootDistances.set(s.id, lambda);
    if (!s.usable) verdicts.set(s.id, 'unusable');
    else if (s.held !== true && s.kind !== 'local' && s.runSamples < o.minSamples) {
      verdicts.set(s.id, 'too_few_samples');
    } else if (
      // The fit test (A.5.2.3 fit()): synchronised, stratum below MAXSTRAT, λ ≤ MAXDIST + PHI·poll.
      s.leap === 3 ||
      s.stratum >= MAXSTRAT ||
      lambda > MAXDIST + PHI * 2 ** s.pollLog2
    ) {
      verdicts.set(s.id, 'unfit');
    } else fit.push(s);
  }
  const ntp = fit.filter((s) => s.kind === 'ntp' && s.held !== true);
  const ntpResult = intersect(
    ntp.map((s) => ({ id: s.id, offsetS: s.offsetS, rootDistanceS: rootDistances.get(s.id) ?? 0 })),
  );
  const bad = new Set(ntpResult.falsetickers);
  // A GPSDO takes part in the same selection: outside the NTP truechimers' intersection it is a
  // falseticker like a server would be (chrony puts refclocks through the same intersection as its NTP
  // sources; docs/gpsdo.md "Selection"). Its rank decides only among truechimers.
  const interval = ntpResult.interval;
  if (interval !== undefined && ntpResult.truechimers.length > 0) {
    for (const s of fit) {
      if (s.kind !== 'gpsdo' && s.held !== true) continue;
      const lambda = rootDistances.get(s.id) ?? 0;
      if (s.offsetS + lambda < interval.low || s.offsetS - lambda > interval.high) bad.add(s.id);
    }
  }
  for (const id of bad) verdicts.set(id, 'falseticker');
  for (const s of fit) if (s.held === true && !bad.has(s.id)) verdicts.set(s.id, 'held');
  const truechimers = fit.filter((s) => !bad.has(s.id) && s.held !== true);
  let best: SelectionInput | undefined;
  for (const s of truechimers) {
    verdicts.set(s.id, 'candidate');
    if (
      best === undefined ||
      rank(s) < rank(best) ||
      (rank(s) === rank(best) && (rootDistances.get(s.id) ?? 0) < (rootDistances.get(best.id) ?? 0))
    ) {
      best = s;
    }
  }
  // Keep the current reference while it is a truechimer of the best rank: hopping between two agreeing
  // servers would only move the served clock by their difference (ntpd keeps its system peer likewise).
  const current = truechimers.find((s) => s.id === o.current);
  if (best !== undefined && current !== undefined && rank(current) === rank(best)) best = current;
  const waiting =
    o.current === undefined &&
    o.waitForBursts &&
    inputs.some(
      (s) =>
        s.kind === 'ntp' &&
        s.runSamples < o.minSamples &&
        ((s.usable && s.runSamples > 0) || (o.waitForSilent && s.runSamples === 0)),
    );
  if (waiting) best = undefined;
  if (best) verdicts.set(best.id, 'selected');
  // The largest distance to another truechimer plus its jitter (more conservative than the RFC's RMS:
  // the advertised bound must also hold against the truechimer the client happens to compare with). A
  // usable server still in its first samples counts too: it has not been judged a falseticker, and a client
  // may compare with it, so the bound covers it from the first reply served as synchronised.
  let selectionJitterS = 0;
  for (const s of inputs) {
    const v = verdicts.get(s.id);
    const comparable = v === 'candidate' || (v === 'too_few_samples' && s.usable);
    if (best && s !== best && s.kind === 'ntp' && comparable) {
      selectionJitterS = Math.max(selectionJitterS, Math.abs(s.offsetS - best.offsetS) + s.jitterS);
    }
  }
  return { selected: best?.id, selectionJitterS, waiting, verdicts, rootDistances };
}

/**
 * RFC 5905 §11.2.1 selection ("intersection algorithm", a variant of Marzullo's): find the smallest
 * interval that contains the midpoints of a majority of correctness intervals [θ − λ, θ + λ]; candidates
 * whose interval does not overlap it are falsetickers. Meaningful with three or more candidates: with two
 * that disagree there is no majority to side with.
 */
export interface SelectionCandidate {
  id: string;
  offsetS: number;
  /** Root distance λ: half the root delay plus root dispersion, jitter and our own delay/dispersion. */
  rootDistanceS: number;
}

export interface IntersectionResult {
  truechimers: string[];
  falsetickers: string[];
  /** The intersection interval, absent when no majority agrees. */
  interval?: { low: number; high: number };
}

export function intersect(candidates: readonly SelectionCandidate[]): IntersectionResult {
  const n = candidates.length;
  if (n === 0) return { truechimers: [], falsetickers: [] };
  const points: { value: number; type: -1 | 0 | 1 }[] = [];
  for (const c of candidates) {
    const lambda = Math.max(0, c.rootDistanceS);
    points.push({ value: c.offsetS - lambda, type: 1 });
    points.push({ value: c.offsetS, type: 0 });
    points.push({ value: c.offsetS + lambda, type: -1 });
  }
  // Ties: lower endpoints before midpoints before upper ones, so touching intervals count as overlapping.
  points.sort((a, b) => a.value - b.value || b.type - a.type);
  for (let allow = 0; 2 * allow < n; allow++) {
    let found = 0;
    let chime = 0;
    let low = Number.POSITIVE_INFINITY;
    let high = Number.NEGATIVE_INFINITY;
    for (const p of points) {
      chime += p.type;
      if (chime >= n - allow) {
        low = p.value;
        break;
      }
      if (p.type === 0) found++;
    }
    chime = 0;
    for (let i = points.length - 1; i >= 0; i--) {
      const p = points[i];
      if (p === undefined) continue;
      chime -= p.type;
      if (chime >= n - allow) {
        high = p.value;
        break;
      }
      if (p.type === 0) found++;
    }
    if (found > allow) continue;
    if (low <= high) {
      const truechimers: string[] = [];
      const falsetickers: string[] = [];
      for (const c of candidates) {
        const lambda = Math.max(0, c.rootDistanceS);
        if (c.offsetS + lambda < low || c.offsetS - lambda > high) falsetickers.push(c.id);
        else truechimers.push(c.id);
      }
      return { truechimers, falsetickers, interval: { low, high } };
    }
  }
  return { truechimers: [], falsetickers: candidates.map((c) => c.id) };
}
