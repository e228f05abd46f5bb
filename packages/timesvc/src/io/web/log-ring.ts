/**
 * The recent-log ring behind `/api/logs` and `/api/ws/logs` (README "Web API: logs"): the service's own
 * pino lines, parsed once, kept in a ring of `capacity` entries with a sequence number each, and handed
 * to subscribers as they arrive. Every entry is bounded (message 2 KiB, fields 4 KiB of JSON).
 */
export type LogLevel = 'debug' | 'info' | 'warning' | 'error';
export const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warning', 'error'];

export interface LogEntry {
  seq: number;
  timestamp: string;
  level: LogLevel;
  component: string;
  message: string;
  fields?: Record<string, unknown>;
}

const MAX_MESSAGE = 2048;
const MAX_FIELDS_JSON = 4096;
const DROP = new Set(['level', 'time', 'msg', 'service', 'component', 'pid', 'hostname']);

export function pinoLevel(n: unknown): LogLevel {
  const v = typeof n === 'number' ? n : 30;
  return v < 30 ? 'debug' : v < 40 ? 'info' : v < 50 ? 'warning' : 'error';
}

export function levelAtLeast(level: LogLevel, min: LogLevel): boolean {
  return LOG_LEVELS.indexOf(level) >= LOG_LEVELS.indexOf(min);
}

export class LogRing {
  readonly capacity: number;
  readonly #entries: LogEntry[] = [];
  readonly #listeners = new Set<(e: LogEntry) => void>();
  #seq = 0;

  constructor(capacity = 1000) {
    this.capacity = capacity;
  }

  /** A pino destination: every line goes to `next` (stdout by default) and into the ring. */
  stream(next: { write(line: string): unknown } | undefined = process.stdout): { write(line: string): void } {
    return {
      write: (line: string) => {
        next?.write(line);
        this.pushLine(line);
      },
    };
  }

  pushLine(line: string): void {
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    const fields: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(o)) if (!DROP.has(k)) fields[k] = v;
    let fieldsJson = Object.keys(fields).length ? JSON.stringify(fields) : '';
    if (fieldsJson.length > MAX_FIELDS_JSON)
      fieldsJson = JSON.stringify({ truncated: fieldsJson.slice(0, 1024) });
    this.push({
      timestamp: typeof o['time'] === 'string' ? o['time'] : new Date().toISOString(),
      level: pinoLevel(o['level']),
      component: typeof o['component'] === 'string' ? o['component'] : 'timesvc',
      message: (typeof o['msg'] === 'string' ? o['msg'] : JSON.stringify(o['msg'] ?? '')).slice(
        0,
        MAX_MESSAGE,
      ),
      ...(fieldsJson ? { fields: JSON.parse(fieldsJson) as Record<string, unknown> } : {}),
    });
  }

  push(entry: Omit<LogEntry, 'seq'>): LogEntry {
    const e: LogEntry = { seq: ++this.#seq, ...entry };
    this.#entries.push(e);
    if (this.#entries.length > this.capacity) this.#entries.shift();
    for (const l of this.#listeners) l(e);
    return e;
  }

  /** Entries oldest → newest: the last `limit` matching `level` (exact) and newer than `since`. */
  query(
    options: { limit?: number; level?: LogLevel; minLevel?: LogLevel; sinceMs?: number } = {},
  ): LogEntry[] {
    const out = this.#entries.filter(
      (e) =>
        (options.level === undefined || e.level === options.level) &&
        (options.minLevel === undefined || levelAtLeast(e.level, options.minLevel)) &&
        (options.sinceMs === undefined || Date.parse(e.timestamp) > options.sinceMs),
    );
    return options.limit === undefined ? out : out.slice(-options.limit);
  }

  subscribe(listener: (e: LogEntry) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}
