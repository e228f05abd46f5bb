import type { ClockState } from './clock-state.ts';
import type { Disagreement } from './reference-source.ts';

/**
 * Health that means accuracy (docs/clock-discipline.md "Health"): what `/api/health` and the
 * `timesvc_clock_health` gauge say, from the clock's state, the error it advertises and the references
 * it holds back.
 */
export const HEALTH_STATUSES = ['healthy', 'degraded', 'unhealthy', 'unsynchronised'] as const;
export type HealthStatus = (typeof HEALTH_STATUSES)[number];

export interface ClockHealthFacts {
  state: ClockState;
  /** Root delay / 2 + root dispersion advertised now; ∞ while unsynchronised. */
  estimatedErrorS: number;
  /** References held back at a level beyond the step threshold from the served clock. */
  disagreements?: readonly Disagreement[];
  /** Monotonic ms now (for the time left to a stepout). */
  nowMs?: number;
}

export interface HealthLimits {
  /** Healthy (LOCKED, SYNCING) while the advertised error is within this, seconds. */
  maxErrorS: number;
  /** Healthy in HOLDOVER while the advertised error is within this, seconds. */
  holdoverMaxErrorS: number;
}

const ms = (s: number): string => `${(s * 1e3).toFixed(3)} ms`;

/**
 * unsynchronised: replies carry LI 3. unhealthy: a reference disagrees with the served clock beyond the
 * step threshold and is held back (one of the two is wrong by that much). degraded: time is served with an
 * advertised error beyond the limit (or while slewing to a new estimate). healthy otherwise.
 */
export function assessHealth(
  c: ClockHealthFacts,
  limits: HealthLimits,
): { status: HealthStatus; reason: string } {
  const state = c.state.toLowerCase();
  if (!Number.isFinite(c.estimatedErrorS)) {
    return { status: 'unsynchronised', reason: `clock ${state}: replies say unsynchronised (LI 3)` };
  }
  const d = [...(c.disagreements ?? [])].sort((a, b) => Math.abs(b.offsetS) - Math.abs(a.offsetS))[0];
  if (d !== undefined) {
    const left =
      c.nowMs === undefined ? '' : ` in ${Math.max(0, (d.stepoutEndsMs - c.nowMs) / 1000).toFixed(0)} s`;
    return {
      status: 'unhealthy',
      reason:
        `references disagree: ${d.source} is ${d.offsetS.toFixed(6)} s from the served clock; held back ` +
        `(followed after its stepout${left} unless it returns or another source confirms it)`,
    };
  }
  const limit = c.state === 'HOLDOVER' ? limits.holdoverMaxErrorS : limits.maxErrorS;
  if (c.estimatedErrorS > limit) {
    return {
      status: 'degraded',
      reason: `clock ${state}: estimated error ${ms(c.estimatedErrorS)} exceeds ${ms(limit)}`,
    };
  }
  if (c.state === 'LOCKED' || c.state === 'HOLDOVER') {
    return { status: 'healthy', reason: `clock ${state}: estimated error ${ms(c.estimatedErrorS)}` };
  }
  return { status: 'degraded', reason: `clock ${state}: slewing to a new estimate` };
}
