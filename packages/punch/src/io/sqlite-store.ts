import { chmodSync, closeSync, mkdirSync, openSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { ConfigError } from '@broadcast-ops/core';
import type {
  CloseReason,
  InviteRecord,
  PeerClaim,
  SessionRecord,
  SessionState,
  StreamRecord,
  StreamState,
} from '../domain/session.ts';
import type { SessionStore } from '../domain/store.ts';
import * as z from '@broadcast-ops/core/zod';
import {
  openSqlite,
  sqliteErrorKind,
  type SqliteDatabase,
  type SqliteStatement,
  type SqlValue,
} from './sqlite-driver.ts';

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
 * The queue is bounded by the requests in flight (each waits for its commit). A failed commit rolls the
 * whole batch back and rejects every writer of it (each rolls its own change back in memory).
 *
 * The file holds every passphrase: it is created 0600 (an existing file with wider permissions is
 * narrowed). The connection runs in `locking_mode=EXCLUSIVE` and takes the write lock at open, so a second
 * broker on the same file refuses to start (SQLITE_BUSY after `LOCK_WAIT_MS`) instead of both writing. In
 * exclusive mode SQLite keeps the WAL index in heap memory, so there is no `-shm` file.
 * (https://sqlite.org/pragma.html#pragma_locking_mode, https://sqlite.org/wal.html#noshm)
 */
const LOCK_WAIT_MS = 2_000;
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
  streams      TEXT NOT NULL,
  invites      TEXT NOT NULL DEFAULT '[]'
) STRICT;
CREATE TABLE IF NOT EXISTS probe (k INTEGER PRIMARY KEY, at INTEGER NOT NULL) STRICT;
`;

/**
 * A store that cannot be opened or read: the message names the file and what to do. A `ConfigError`: the
 * operator's to fix, so `punch serve` prints it as one line and exits 2 (core's `runService`).
 */
export class SessionStoreError extends ConfigError {
  readonly file: string;
  constructor(file: string, message: string, options?: { cause?: unknown }) {
    super(message);
    if (options && 'cause' in options) this.cause = options.cause;
    this.name = 'SessionStoreError';
    this.file = file;
  }
}

const peerClaimSchema = z.object({
  ip: z.string(),
  port: z.int(),
  label: z.string(),
  role: z.nullable(z.enum(['sender', 'receiver'])),
  meta: z.record(z.string(), z.unknown()),
  clientId: z.nullable(z.string()),
  holder: z.optional(z.nullable(z.string())),
  claimedAt: z.number(),
});
const storedStreamsSchema = z.array(
  z.object({
    name: z.string(),
    state: z.enum(['waiting', 'ready', 'relaying', 'connected']),
    peerA: z.nullable(peerClaimSchema),
    peerB: z.nullable(peerClaimSchema),
  }),
);
const rowSchema = z.object({
  name: z.string().check(z.minLength(1)),
  id: z.string().check(z.minLength(1)),
  state: z.enum(['WAITING', 'READY', 'CONNECTED', 'RELAYING', 'CLOSED']),
  passphrase: z.string().check(z.minLength(10)),
  latency: z.int(),
  ttl: z.int(),
  created_at: z.int(),
  expires_at: z.int(),
  closed_at: z.nullable(z.int()),
  close_reason: z.nullable(z.enum(['admin_closed', 'ttl_expired', 'error'])),
  streams: z.string(),
  invites: z.string(),
});
const storedInvitesSchema = z.array(
  z.object({
    id: z.string().check(z.minLength(1)),
    stream: z.nullable(z.string()),
    label: z.nullable(z.string()),
    issuedAt: z.number(),
    revokedAt: z.nullable(z.number()),
  }),
);

/** Create the file 0600 before SQLite opens it; narrow an existing file's mode. */
function prepareFile(file: string): void {
  mkdirSync(dirname(file), { recursive: true });
  closeSync(openSync(file, 'a', 0o600));
  if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
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
  readonly #updateExpiry: SqliteStatement;
  readonly #updateStreams: SqliteStatement;
  readonly #updateInvites: SqliteStatement;
  readonly #deleteSession: SqliteStatement;
  #queue: (() => void)[] = [];
  /** The batch being collected: one promise for all its writers, settled by the commit (or its failure). */
  #pending: { promise: Promise<void>; settle: (err?: Error) => void } | undefined;

  readonly #file: string;
  readonly #probe: SqliteStatement;

  constructor(file: string) {
    this.#file = file;
    if (file !== ':memory:') {
      try {
        prepareFile(file);
      } catch (err) {
        throw new SessionStoreError(
          file,
          `session store ${file}: cannot create or open the file (${(err as Error).message}); check the ` +
            'directory exists and is writable by this user, or set PUNCH_DB to another path',
          { cause: err },
        );
      }
    }
    this.#db = openSqlite(file);
    try {
      this.#db.exec(`PRAGMA busy_timeout = ${LOCK_WAIT_MS}; PRAGMA locking_mode = EXCLUSIVE;`);
      this.#db.exec('BEGIN EXCLUSIVE; COMMIT;');
      this.#db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;');
      this.#db.exec(SCHEMA);
      // Files made before invites were kept (README "Invites") gain the column, empty.
      const columns = this.#db.prepare('PRAGMA table_info(sessions)').all() as { name: string }[];
      if (!columns.some((c) => c.name === 'invites')) {
        this.#db.exec(`ALTER TABLE sessions ADD COLUMN invites TEXT NOT NULL DEFAULT '[]'`);
      }
    } catch (err) {
      this.#db.close();
      throw this.#openError(err);
    }
    this.#insertSession = this.#db.prepare(
      `INSERT OR REPLACE INTO sessions
         (name, id, state, passphrase, latency, ttl, created_at, expires_at, closed_at, close_reason, streams,
          invites)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.#updateState = this.#db.prepare(
      'UPDATE sessions SET state = ?, closed_at = ?, close_reason = ? WHERE name = ?',
    );
    this.#updateStreams = this.#db.prepare('UPDATE sessions SET streams = ? WHERE name = ?');
    this.#updateInvites = this.#db.prepare('UPDATE sessions SET invites = ? WHERE name = ?');
    this.#updateExpiry = this.#db.prepare('UPDATE sessions SET expires_at = ? WHERE name = ?');
    this.#deleteSession = this.#db.prepare('DELETE FROM sessions WHERE name = ?');
    this.#probe = this.#db.prepare('INSERT OR REPLACE INTO probe (k, at) VALUES (1, ?)');
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

  #openError(err: unknown): SessionStoreError {
    const file = this.#file;
    const kind = sqliteErrorKind(err);
    const detail = err instanceof Error ? err.message : String(err);
    if (kind === 'BUSY' || kind === 'LOCKED') {
      return new SessionStoreError(
        file,
        `session store ${file} is locked by another process (${detail}): another punch broker is probably ` +
          'running on this file. Stop it, or give this broker its own file with PUNCH_DB.',
        { cause: err },
      );
    }
    if (kind === 'NOTADB' || kind === 'CORRUPT') {
      return new SessionStoreError(
        file,
        `session store ${file} is not a readable SQLite database (${detail}). Restore it from a backup, or ` +
          `move it aside (mv ${file} ${file}.corrupt) to start with an empty store; live sessions in it are lost.`,
        { cause: err },
      );
    }
    return new SessionStoreError(file, `session store ${file}: ${detail}`, { cause: err });
  }

  /** Every stored session. A row that does not read back is an error naming the file and the row. */
  loadAll(): SessionRecord[] {
    let rows: unknown[];
    try {
      rows = this.#db.prepare('SELECT * FROM sessions').all();
    } catch (err) {
      throw this.#openError(err);
    }
    return rows.map((raw) => {
      const name = (raw as { name?: unknown }).name;
      try {
        const r = rowSchema.parse(raw);
        const streams = storedStreamsSchema.parse(JSON.parse(r.streams));
        return {
          name: r.name,
          id: r.id,
          state: r.state,
          passphrase: r.passphrase,
          latency: r.latency,
          ttl: r.ttl,
          createdAt: r.created_at,
          expiresAt: r.expires_at,
          closedAt: r.closed_at,
          closeReason: r.close_reason,
          streams: streams.map((st) => ({ ...st, health: null })),
          invites: storedInvitesSchema.parse(JSON.parse(r.invites)),
        };
      } catch (err) {
        const why =
          err instanceof z.$ZodError ? z.prettifyError(err).replace(/\n/g, '; ') : (err as Error).message;
        throw new SessionStoreError(
          this.#file,
          `session store ${this.#file}: the row of session ${JSON.stringify(name)} is unreadable (${why}). ` +
            'Restore the file from a backup, or delete that row (the session is lost): ' +
            `sqlite3 ${this.#file} "DELETE FROM sessions WHERE name = '${String(name).replace(/'/g, "''")}'"`,
          { cause: err },
        );
      }
    });
  }

  probe(): Promise<void> {
    const at = Date.now();
    return this.#enqueue(() => this.#probe.run(at));
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
      JSON.stringify(s.invites ?? []),
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

  putExpiry(name: string, expiresAt: number): Promise<void> {
    return this.#enqueue(() => this.#updateExpiry.run(expiresAt, name));
  }

  putInvites(name: string, invites: readonly InviteRecord[]): Promise<void> {
    const json = JSON.stringify(invites);
    return this.#enqueue(() => this.#updateInvites.run(json, name));
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
