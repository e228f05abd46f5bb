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
