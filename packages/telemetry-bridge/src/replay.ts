/** `telemetry-bridge replay`: read the event log back and filter it (README "Event log"). */
import { readLog } from './io/event-log.ts';
import { patternError } from './protocol/envelope.ts';
import type { LogRecord } from './protocol/log-record.ts';
import { patternMatches } from './domain/topic-trie.ts';

export interface ReplayFilter {
  from?: number;
  to?: number;
  kind?: string;
  path?: string;
  correlationId?: string;
}

export function parseReplayFilter(values: Record<string, unknown>): ReplayFilter {
  const f: ReplayFilter = {};
  const num = (k: string): number | undefined => {
    const v = values[k];
    if (typeof v !== 'string') return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new Error(`--${k} must be a non-negative integer, got "${v}"`);
    return n;
  };
  const from = num('from');
  const to = num('to');
  if (from !== undefined) f.from = from;
  if (to !== undefined) f.to = to;
  if (typeof values['type'] === 'string') f.kind = values['type'];
  if (typeof values['path'] === 'string') {
    const err = patternError(values['path']);
    if (err) throw new Error(`--path: ${err}`);
    f.path = values['path'];
  }
  if (typeof values['correlation-id'] === 'string') f.correlationId = values['correlation-id'];
  return f;
}

export function recordMatches(r: LogRecord, f: ReplayFilter): boolean {
  if (f.from !== undefined && r.o <= f.from) return false;
  if (f.to !== undefined && r.o > f.to) return false;
  if (f.kind !== undefined && r.k !== f.kind) return false;
  const m = (r.m ?? {}) as Record<string, unknown>;
  if (f.path !== undefined && !(typeof m['path'] === 'string' && patternMatches(f.path, m['path'])))
    return false;
  if (f.correlationId !== undefined && m['correlationId'] !== f.correlationId) return false;
  return true;
}

export function formatReplay(dir: string, filter: ReplayFilter, summary: boolean): string[] {
  const { records, torn } = readLog(dir);
  const picked = records.filter((r) => recordMatches(r, filter));
  if (!summary) return picked.map((r) => JSON.stringify(r));
  const kinds: Record<string, number> = {};
  for (const r of picked) kinds[r.k] = (kinds[r.k] ?? 0) + 1;
  const offsets = picked.filter((r) => r.k !== 'meta').map((r) => r.o);
  return [
    JSON.stringify({
      records: picked.length,
      kinds,
      firstOffset: offsets[0] ?? null,
      lastOffset: offsets.at(-1) ?? null,
      damaged: torn,
    }),
  ];
}
