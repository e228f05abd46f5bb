/**
 * The clock state machine (README "Clock states"), as a pure function of what the manager knows. The
 * manager owns the facts (selection, estimate, served correction); this module owns the rules.
 */

export type ClockState = 'INIT' | 'SYNCING' | 'LOCKED' | 'HOLDOVER' | 'FAULT';
export const CLOCK_STATES: readonly ClockState[] = ['INIT', 'SYNCING', 'LOCKED', 'HOLDOVER', 'FAULT'];

export interface StateFacts {
  /** A reference is selected. */
  selected: boolean;
  /** The served clock has been set onto a usable estimate since the last INIT/FAULT. */
  synced: boolean;
  /** |estimate − served correction| now, seconds: how far the served clock still has to slew. */
  remainingS: number;
  /** The last sample of the selected reference was held back as a possible spike. */
  suspect: boolean;
  /** Below this |remaining| the clock is on its estimate (max(100 µs, 3·jitter)). */
  lockThresholdS: number;
  /**
   * The error advertised before the latest correction (root delay / 2 + root dispersion), seconds: a
   * correction within it does not leave LOCKED (hysteresis; the bound already covered it).
   */
  advertisedBoundS?: number;
  /** The clock was in HOLDOVER for longer than the holdover timeout. */
  holdoverExpired: boolean;
}

export interface Transition {
  to: ClockState;
  reason: string;
}

/**
 * The next state, or undefined to stay. `sampleOrTick` distinguishes a sample (which may not lose the
 * reference) from the periodic tick.
 */
export function nextState(state: ClockState, f: StateFacts): Transition | undefined {
  const onEstimate = f.synced && f.remainingS <= f.lockThresholdS && !f.suspect;
  switch (state) {
    case 'INIT':
      return f.selected ? { to: 'SYNCING', reason: 'reference selected' } : undefined;
    case 'SYNCING':
      if (!f.selected) {
        return f.synced
          ? { to: 'HOLDOVER', reason: 'reference lost while slewing' }
          : { to: 'FAULT', reason: 'reference lost while syncing' };
      }
      return onEstimate ? { to: 'LOCKED', reason: 'served clock on the estimate' } : undefined;
    case 'LOCKED':
      if (!f.selected) return { to: 'HOLDOVER', reason: 'all references lost' };
      // Leave LOCKED when the served clock is off its estimate by more than 4× the lock threshold and by
      // more than the error it was advertising (a level change being slewed out); a correction within
      // the advertised bound does not flap the state. A single suspect sample only raises the dispersion.
      if (f.remainingS > Math.max(4 * f.lockThresholdS, f.advertisedBoundS ?? 0)) {
        return { to: 'SYNCING', reason: 'served clock slewing to a new estimate' };
      }
      return undefined;
    case 'HOLDOVER':
      if (f.holdoverExpired) return { to: 'FAULT', reason: 'holdover expired' };
      return undefined; // leaving HOLDOVER is decided on the returning estimate (ClockManager)
    case 'FAULT':
      return f.selected ? { to: 'SYNCING', reason: 'reference available' } : undefined;
  }
}

/** Whether replies in this state tell clients they are synchronised (LI ≠ 3). */
export function servesSynchronised(state: ClockState, synced: boolean): boolean {
  if (state === 'LOCKED' || state === 'HOLDOVER') return true;
  return state === 'SYNCING' && synced;
}
