import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type {
  CloseReason,
  PeerClaim,
  SessionRecord,
  SessionState,
  StreamRecord,
  StreamState,
} from '../domain/session.ts';
import type { SessionStore } from '../domain/store.ts';
import { openSqlite, type SqliteDatabase, type SqliteStatement, type SqlValue } from './sqlite-driver.ts';

/**
 * Embedded durable store: one SQLite file in WAL mode (readers never block the writer; a commit is an
 * append to the WAL), all statements prepared once. `synchronous=NORMAL` in WAL mode survives a process
 * crash without losing committed sessions; only an OS crash or power loss can drop the last commits.
 *
 * One row per session; its streams with their peer claims are a JSON column (at most a few KiB), so
 * creating a session is one INSERT and a claim is one UPDATE.
 *
 * Group commit: writes issued in the same event-loop turn are applied in one transaction at the next
 * `setImmediate`, and every caller's promise settles after that commit. The broker answers a request only
 * after its write committed, so durability is unchanged; the commit cost is shared by concurrent requests.
 * The queue is bounded by the requests in flight (each waits for its commit).
 */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS sessions (
  name         TEXT PRIMARY KEY,
  id           TEXT NOT NULL,
  state        TEXT NOT NULL,
  passphrase   TEXT NOT NULL,
  latency      INTEGER NOT NULL,
  ttl          INTEGER NOT NULL,
  created_at   INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL,
  closed_at    INTEGER,
  close_reason TEXT,
  streams      TEXT NOT NULL
) STRICT;
`;

interface SessionRow {
  name: string;
  id: string;
  state: string;
  passphrase: string;
  latency: number;
  ttl: number;
  created_at: number;
  expires_at: number;
  closed_at: number | null;
  close_reason: string | null;
  streams: string;
}

/** Stored shape of a stream (health is not persisted). */
interface StoredStream {
  name: string;
  state: StreamState;
  peerA: PeerClaim | null;
  peerB: PeerClaim | null;
}

function streamsJson(streams: readonly StreamRecord[]): string {
  return JSON.stringify(
    streams.map((s): StoredStream => ({ name: s.name, state: s.state, peerA: s.peerA, peerB: s.peerB })),
  );
}

export class SqliteSessionStore implements SessionStore {
  readonly #db: SqliteDatabase;
  readonly #insertSession: SqliteStatement;
  readonly #updateState: SqliteStatement;
  readonly #updateStreams: SqliteStatement;
  readonly #deleteSession: SqliteStatement;
  #queue: (() => void)[] = [];
  /** The batch being collected: one promise for all its writers, settled by the commit (or its failure). */
  #pending: { promise: Promise<void>; settle: (err?: Error) => void } | undefined;

  constructor(file: string) {
    if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
    this.#db = openSqlite(file);
    this.#db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;');
    this.#db.exec(SCHEMA);
    this.#insertSession = this.#db.prepare(
      `INSERT OR REPLACE INTO sessions
         (name, id, state, passphrase, latency, ttl, created_at, expires_at, closed_at, close_reason, streams)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.#updateState = this.#db.prepare(
      'UPDATE sessions SET state = ?, closed_at = ?, close_reason = ? WHERE name = ?',
    );
    this.#updateStreams = this.#db.prepare('UPDATE sessions SET streams = ? WHERE name = ?');
    this.#deleteSession = this.#db.prepare('DELETE FROM sessions WHERE name = ?');
  }

  /** Queue a write for the next group commit; resolves once it is committed. */
  #enqueue(op: () => void): Promise<void> {
    this.#queue.push(op);
    if (!this.#pending) {
      let settle: (err?: Error) => void = () => undefined;
      const promise = new Promise<void>((resolve, reject) => {
        settle = (err) => (err ? reject(err) : resolve());
      });
      this.#pending = { promise, settle };
      setImmediate(() => this.#flush());
    }
    return this.#pending.promise;
  }

  /**
   * Commit the queued batch and settle its writers' promise, whoever calls (the timer or close()), so a
   * failed commit reaches every writer of the batch. Returns the failure for close(); never throws, because
   * the setImmediate caller has nobody to throw to.
   */
  #flush(): Error | undefined {
    const pending = this.#pending;
    const ops = this.#queue;
    this.#queue = [];
    this.#pending = undefined;
    if (!pending) return undefined;
    try {
      // A write after close() must fail loudly, not vanish.
      if (!this.#db.open) throw new Error('session store is closed');
      this.#db.transaction(() => {
        for (const op of ops) op();
      });
      pending.settle();
      return undefined;
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err));
      pending.settle(error);
      return error;
    }
  }

  loadAll(): SessionRecord[] {
    const rows = this.#db.prepare('SELECT * FROM sessions').all() as SessionRow[];
    return rows.map((r) => ({
      name: r.name,
      id: r.id,
      state: r.state as SessionState,
      passphrase: r.passphrase,
      latency: r.latency,
      ttl: r.ttl,
      createdAt: r.created_at,
      expiresAt: r.expires_at,
      closedAt: r.closed_at,
      closeReason: r.close_reason as CloseReason | null,
      streams: (JSON.parse(r.streams) as StoredStream[]).map((s) => ({ ...s, health: null })),
    }));
  }

  putSession(s: SessionRecord): Promise<void> {
    // Values are taken now: the record may change before the commit runs.
    const args: SqlValue[] = [
      s.name,
      s.id,
      s.state,
      s.passphrase,
      s.latency,
      s.ttl,
      s.createdAt,
      s.expiresAt,
      s.closedAt,
      s.closeReason,
      streamsJson(s.streams),
    ];
    return this.#enqueue(() => this.#insertSession.run(...args));
  }

  updateSessionState(
    name: string,
    change: { state: SessionState; closedAt: number | null; closeReason: CloseReason | null },
  ): Promise<void> {
    return this.#enqueue(() =>
      this.#updateState.run(change.state, change.closedAt, change.closeReason, name),
    );
  }

  putStreams(session: string, streams: readonly StreamRecord[]): Promise<void> {
    const json = streamsJson(streams);
    return this.#enqueue(() => this.#updateStreams.run(json, session));
  }

  deleteSession(name: string): Promise<void> {
    return this.#enqueue(() => this.#deleteSession.run(name));
  }

  /** Commit what is queued, then close the file. */
  close(): void {
    if (!this.#db.open) return;
    const failed = this.#flush();
    this.#db.close();
    if (failed) throw failed;
  }
}
