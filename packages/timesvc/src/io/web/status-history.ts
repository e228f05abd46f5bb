/**
 * The dashboard chart's history, kept by the server so a reload (or a second operator) sees the last five
 * minutes at once (README "Web API: streams"): one point per status tick, at most `maxPoints` and none
 * older than `windowMs`. Points carry wall-clock ms of the served clock (what the chart's axis shows).
 */
export interface HistoryPoint {
  /** Served-clock Unix ms of the point. */
  t: number;
  /** Reference − served clock, seconds (the status's clock.offset_ns). */
  offset_s: number;
  jitter_s: number;
  /** Advertised error (root delay / 2 + root dispersion), seconds; null while unsynchronised. */
  error_s: number | null;
  state: string;
}

export class StatusHistory {
  readonly #points: HistoryPoint[] = [];
  readonly #windowMs: number;
  readonly #max: number;

  constructor(windowMs = 5 * 60_000, maxPoints = 600) {
    this.#windowMs = windowMs;
    this.#max = maxPoints;
  }

  add(p: HistoryPoint): void {
    const last = this.#points[this.#points.length - 1];
    if (last && p.t <= last.t) return;
    this.#points.push(p);
    while (this.#points.length > this.#max) this.#points.shift();
    this.#trim(p.t);
  }

  /** The points of the last window before `nowMs`, oldest first (a copy). */
  points(nowMs: number): HistoryPoint[] {
    this.#trim(nowMs);
    return [...this.#points];
  }

  #trim(nowMs: number): void {
    while (this.#points.length && (this.#points[0]?.t ?? 0) < nowMs - this.#windowMs) this.#points.shift();
  }
}

/** A history point from a status body's clock (status.ts clockStatus). */
export function historyPoint(
  t: number,
  clock: {
    offset_ns: number;
    jitter_ns: number;
    estimated_error_ns: number | null;
    state: string;
  },
): HistoryPoint {
  return {
    t,
    offset_s: clock.offset_ns / 1e9,
    jitter_s: clock.jitter_ns / 1e9,
    error_s: clock.estimated_error_ns === null ? null : clock.estimated_error_ns / 1e9,
    state: clock.state,
  };
}
