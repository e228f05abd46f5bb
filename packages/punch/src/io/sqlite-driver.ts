import { createRequire } from 'node:module';

/**
 * One small SQLite surface over two drivers, chosen by feature detection:
 *
 * - `node:sqlite` (`DatabaseSync`), built into Node from 22.13 (unflagged) and 24. Preferred wherever it
 *   loads: nothing to compile, and it is immune to the better-sqlite3 12 abort on Node 24.19+ (a Statement
 *   freed by the garbage collector calls `node::RemoveEnvironmentCleanupHook` with no environment,
 *   `Assertion failed: (env) != nullptr`; nodejs/node#65446).
 * - `better-sqlite3` 12 where `node:sqlite` is absent (Node 20, and 22.0-22.12 where it is behind a flag).
 *   better-sqlite3 13 fixes the abort but declares Node >= 22, so it cannot serve Node 20.
 *
 * Both drivers run the same SQL with the same semantics (they bundle SQLite 3.4x); the store uses only
 * `exec`, `prepare` with positional parameters, and `run`/`all`/`get`. Transactions are explicit
 * `BEGIN`/`COMMIT`/`ROLLBACK` so both drivers take one code path. `PUNCH_SQLITE_DRIVER` forces a driver
 * (tests use it to prove both sides on the Node lines that have both).
 */
export type SqliteDriverName = 'node:sqlite' | 'better-sqlite3';
export type SqlValue = string | number | bigint | null | Uint8Array;

export interface SqliteStatement {
  run(...params: SqlValue[]): unknown;
  all(...params: SqlValue[]): unknown[];
  get(...params: SqlValue[]): unknown;
}

export interface SqliteDatabase {
  readonly driver: SqliteDriverName;
  readonly open: boolean;
  exec(sql: string): void;
  prepare(sql: string): SqliteStatement;
  /** Run `fn` inside BEGIN IMMEDIATE … COMMIT; ROLLBACK and rethrow when it or the commit fails. */
  transaction(fn: () => void): void;
  close(): void;
}

/** SQLite's primary result code names (https://sqlite.org/rescode.html), whichever driver threw. */
export type SqliteErrorKind =
  'BUSY' | 'LOCKED' | 'FULL' | 'IOERR' | 'CORRUPT' | 'NOTADB' | 'CANTOPEN' | 'READONLY' | 'PERM' | 'OTHER';

const PRIMARY_CODES: Record<number, SqliteErrorKind> = {
  3: 'PERM',
  5: 'BUSY',
  6: 'LOCKED',
  8: 'READONLY',
  10: 'IOERR',
  11: 'CORRUPT',
  13: 'FULL',
  14: 'CANTOPEN',
  26: 'NOTADB',
};

/**
 * The SQLite result code of a driver error: node:sqlite sets `errcode` (the extended code, whose low byte
 * is the primary code); better-sqlite3 sets `code` to `SQLITE_<NAME>[_<EXTENDED>]`.
 */
export function sqliteErrorKind(err: unknown): SqliteErrorKind | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as { errcode?: unknown; code?: unknown };
  if (typeof e.errcode === 'number') return PRIMARY_CODES[e.errcode & 0xff] ?? 'OTHER';
  if (typeof e.code === 'string' && e.code.startsWith('SQLITE_')) {
    const name = e.code.slice(7).split('_')[0] ?? '';
    return (Object.values(PRIMARY_CODES) as string[]).includes(name) ? (name as SqliteErrorKind) : 'OTHER';
  }
  return undefined;
}

// Minimal shapes of the two drivers (node:sqlite has no types in @types/node 20, the oldest supported line).
interface NodeSqliteModule {
  DatabaseSync: new (path: string) => {
    exec(sql: string): void;
    prepare(sql: string): SqliteStatement;
    close(): void;
  };
}
type BetterSqliteCtor = new (
  path: string,
  options?: { nativeBinding?: string | undefined },
) => {
  exec(sql: string): void;
  prepare(sql: string): SqliteStatement;
  close(): void;
};

const requireHere = createRequire(import.meta.url);
let nodeSqlite: NodeSqliteModule | null | undefined;
let betterSqlite: BetterSqliteCtor | null | undefined;

/** `node:sqlite` if this Node has it unflagged, without its one-time ExperimentalWarning on stderr. */
function loadNodeSqlite(): NodeSqliteModule | null {
  if (nodeSqlite !== undefined) return nodeSqlite;
  const original = Reflect.get(process, 'emitWarning') as (...args: unknown[]) => void;
  Reflect.set(process, 'emitWarning', (warning: unknown, ...rest: unknown[]) => {
    if (String(warning).includes('SQLite is an experimental feature')) return;
    Reflect.apply(original, process, [warning, ...rest]);
  });
  try {
    nodeSqlite = requireHere('node:sqlite') as NodeSqliteModule;
  } catch {
    nodeSqlite = null; // Node 20, or 22 before 22.13 without --experimental-sqlite
  } finally {
    Reflect.set(process, 'emitWarning', original);
  }
  return nodeSqlite;
}

/**
 * better-sqlite3's compiled addon, named by its path (`nativeBinding`): its own lookup (the `bindings`
 * package) finds it from the caller's file, which in the start file (docs/at-rest.md "One start file",
 * where better-sqlite3's JavaScript is bundled) is the bundle, not the package; and named, it costs no
 * search (about 5 ms of the broker's start).
 */
let betterSqliteAddon: string | undefined;

/**
 * better-sqlite3 if its addon loads: the package's JavaScript loads without it and finds the compiled addon
 * only when a database is opened, so one in-memory database is opened here. An install that never built it
 * (scripts skipped, no compiler) counts as absent instead of failing at the first open.
 */
function loadBetterSqlite(): BetterSqliteCtor | null {
  if (betterSqlite !== undefined) return betterSqlite;
  try {
    // Required by name with this module's createRequire, written out, so the start file bundles it.
    const ctor = createRequire(import.meta.url)('better-sqlite3') as BetterSqliteCtor;
    betterSqliteAddon = requireHere.resolve('better-sqlite3/build/Release/better_sqlite3.node');
    new ctor(':memory:', { nativeBinding: betterSqliteAddon }).close();
    betterSqlite = ctor;
  } catch {
    betterSqlite = null;
  }
  return betterSqlite;
}

/** Drivers that load on this Node, best first. better-sqlite3 is never offered where node:sqlite exists. */
export function availableSqliteDrivers(): SqliteDriverName[] {
  if (loadNodeSqlite()) return ['node:sqlite'];
  return loadBetterSqlite() ? ['better-sqlite3'] : [];
}

/**
 * Every driver that loads here, for tests that prove both sides: better-sqlite3 is included beside
 * node:sqlite only on Node lines older than 24, where its 12.x addon does not abort.
 */
export function testableSqliteDrivers(): SqliteDriverName[] {
  const out: SqliteDriverName[] = [];
  if (loadNodeSqlite()) out.push('node:sqlite');
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 24 && loadBetterSqlite()) out.push('better-sqlite3');
  return out;
}

function chooseDriver(requested: string | undefined): SqliteDriverName {
  if (requested === 'node:sqlite' || requested === 'better-sqlite3') return requested;
  if (requested !== undefined && requested !== '' && requested !== 'auto') {
    throw new Error(`PUNCH_SQLITE_DRIVER must be auto, node:sqlite or better-sqlite3, not "${requested}"`);
  }
  const best = availableSqliteDrivers()[0];
  if (!best) {
    throw new Error(
      `no SQLite driver on Node ${process.versions.node}: node:sqlite needs Node >= 22.13, and better-sqlite3 ` +
        'did not load (reinstall with `npm ci`, which compiles it; it needs python3, make and a C++ compiler)',
    );
  }
  return best;
}

/** Open (creating if needed) a database file with the chosen driver. */
export function openSqlite(
  file: string,
  driver: string | undefined = process.env['PUNCH_SQLITE_DRIVER'],
): SqliteDatabase {
  const name = chooseDriver(driver);
  let raw: { exec(sql: string): void; prepare(sql: string): SqliteStatement; close(): void };
  if (name === 'node:sqlite') {
    const mod = loadNodeSqlite();
    if (!mod) throw new Error(`node:sqlite is not available on Node ${process.versions.node}`);
    raw = new mod.DatabaseSync(file);
  } else {
    const Ctor = loadBetterSqlite();
    if (!Ctor) throw new Error('better-sqlite3 is not installed or did not build');
    raw = new Ctor(file, { nativeBinding: betterSqliteAddon });
  }
  let open = true;
  return {
    driver: name,
    get open() {
      return open;
    },
    exec: (sql) => raw.exec(sql),
    prepare: (sql) => raw.prepare(sql),
    transaction(fn) {
      raw.exec('BEGIN IMMEDIATE');
      try {
        fn();
        raw.exec('COMMIT');
      } catch (err) {
        try {
          raw.exec('ROLLBACK');
        } catch {
          // SQLite already rolled back (e.g. SQLITE_FULL during COMMIT can end the transaction itself).
        }
        throw err;
      }
    },
    close() {
      if (!open) return;
      open = false;
      raw.close();
    },
  };
}
