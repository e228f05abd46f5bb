/**
 * Rebuild the state store and the replay ring from what the event log read back at start. Checkpoint
 * records (the full state written at the start of each segment) come first, then every state record in
 * offset order; the last value per key wins. Only records of the current epoch after the replay floor go
 * into the ring (older ones cannot be resumed from).
 */
import type { LogRecord } from '../protocol/log-record.ts';
import type { Journal } from './journal.ts';
import type { StateEntry, StateStore } from './state-store.ts';

export interface RecoveredLog {
  epoch: string;
  /** Highest offset found in the log (0 if none); the hub continues after it, in any epoch. */
  lastOffset: number;
  /** Offsets at or below this cannot be replayed (before the current epoch, or older than the kept files). */
  floorOffset: number;
  records: LogRecord[];
  /**
   * Wall-time spans (Unix ms) that lost (damaged) stretches of the log may have covered: from the last record
   * read before each one to the first read after it (or the start that found it). Idempotency records in
   * them are unknown (docs/protocol.md "Exactly once").
   */
  lost?: { fromTime: number; toTime: number }[];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function entryOf(raw: unknown, fallbackTime: number): StateEntry | undefined {
  if (!isRecord(raw) || typeof raw['path'] !== 'string' || typeof raw['owner'] !== 'string') return undefined;
  const value = raw['value'] ?? null;
  return {
    path: raw['path'],
    value,
    valueJson: JSON.stringify(value),
    owner: raw['owner'],
    version: typeof raw['version'] === 'number' ? raw['version'] : 1,
    stale: raw['stale'] === true,
    offset: typeof raw['offset'] === 'number' ? raw['offset'] : 0,
    updatedAt: typeof raw['updatedAt'] === 'number' ? raw['updatedAt'] : fallbackTime,
  };
}

/** Apply recovered records; returns the owners of restored keys (to be marked stale until they return). */
export function restore(rec: RecoveredLog, store: StateStore, journal: Journal): Set<string> {
  for (const r of rec.records) {
    if (r.k === 'checkpoint') {
      const entries = isRecord(r.m) && Array.isArray(r.m['entries']) ? r.m['entries'] : [];
      for (const raw of entries) {
        const e = entryOf(raw, r.t);
        if (e) store.restore(e);
      }
      continue;
    }
    if ((r.k !== 'state' && r.k !== 'event') || !isRecord(r.m)) continue;
    const m = r.m;
    const path = typeof m['path'] === 'string' ? m['path'] : undefined;
    if (path === undefined) continue;
    if (r.o > rec.floorOffset) journal.ring.push(r.o, r.k, path, JSON.stringify(m));
    if (r.k === 'state' && isRecord(m['payload'])) {
      const p = m['payload'];
      const e = entryOf(
        {
          path,
          value: p['value'],
          owner: typeof p['owner'] === 'string' ? p['owner'] : m['source'],
          version: p['version'],
          stale: p['stale'],
          offset: r.o,
          updatedAt: r.t,
        },
        r.t,
      );
      if (e) store.restore(e);
    }
  }
  const owners = new Set<string>();
  for (const e of store.entries()) owners.add(e.owner);
  return owners;
}
