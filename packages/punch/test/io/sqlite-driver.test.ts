import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { tempDir } from '@broadcast-ops/core/testing';
import {
  availableSqliteDrivers,
  openSqlite,
  sqliteErrorKind,
  testableSqliteDrivers,
} from '../../src/io/sqlite-driver.ts';
import { SqliteSessionStore } from '../../src/io/sqlite-store.ts';
import type { SessionRecord } from '../../src/domain/session.ts';

const CHURN = fileURLToPath(new URL('../fixtures/sqlite-gc-churn.ts', import.meta.url));

/** node:sqlite is unflagged from Node 22.13 (and in every 23+); the Node 22 changelog is the source. */
function nodeHasBuiltinSqlite(): boolean {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  return major > 22 || (major === 22 && minor >= 13);
}

function session(name: string): SessionRecord {
  return {
    name,
    id: 'id-' + name,
    state: 'WAITING',
    passphrase: 'P'.repeat(32),
    latency: 200,
    ttl: 60,
    createdAt: 1_000,
    expiresAt: 61_000,
    closedAt: null,
    closeReason: null,
    streams: [{ name: 'default', state: 'waiting', peerA: null, peerB: null, health: null }],
  };
}

test(`driver detection on Node ${process.versions.node}: node:sqlite where built in, better-sqlite3 otherwise`, () => {
  const expected = nodeHasBuiltinSqlite() ? 'node:sqlite' : 'better-sqlite3';
  assert.equal(availableSqliteDrivers()[0], expected);
  assert.equal(openSqlite(':memory:').driver, expected);
  // Never better-sqlite3 12 on Node 24: its addon aborts there.
  if (Number(process.versions.node.split('.')[0]) >= 24) {
    assert.ok(!testableSqliteDrivers().includes('better-sqlite3'));
  }
  assert.throws(() => openSqlite(':memory:', 'sqlite4'), /PUNCH_SQLITE_DRIVER must be/);
});

for (const driver of testableSqliteDrivers()) {
  describe(`SQLite driver ${driver} on Node ${process.versions.node}`, () => {
    test('the store round-trips sessions through a file and maps SQLite errors by code', async () => {
      const dir = tempDir('punch-driver-');
      const previous = process.env['PUNCH_SQLITE_DRIVER'];
      process.env['PUNCH_SQLITE_DRIVER'] = driver;
      try {
        const file = join(dir.path, 'p.db');
        const store = new SqliteSessionStore(file);
        await store.putSession(session('a'));
        await store.putSession(session('b'));
        await store.putStreams('a', [
          {
            name: 'default',
            state: 'waiting',
            peerA: {
              ip: '192.0.2.1',
              port: 5000,
              label: 'cam',
              role: null,
              meta: {},
              clientId: null,
              claimedAt: 5,
            },
            peerB: null,
            health: null,
          },
        ]);
        await store.updateSessionState('b', {
          state: 'CLOSED',
          closedAt: 9_000,
          closeReason: 'admin_closed',
        });
        store.close();
        const again = new SqliteSessionStore(file);
        const byName = new Map(again.loadAll().map((s) => [s.name, s]));
        assert.equal(byName.get('a')?.streams[0]?.peerA?.port, 5000);
        assert.equal(byName.get('b')?.closeReason, 'admin_closed');
        assert.equal(byName.get('b')?.state, 'CLOSED');
        again.close();

        const db = openSqlite(':memory:', driver);
        assert.equal(db.driver, driver);
        db.exec('CREATE TABLE t (k INTEGER PRIMARY KEY) STRICT');
        db.prepare('INSERT INTO t VALUES (?)').run(1);
        let caught: unknown;
        try {
          db.prepare('INSERT INTO t VALUES (?)').run(1);
        } catch (err) {
          caught = err;
        }
        assert.equal(sqliteErrorKind(caught), 'OTHER'); // SQLITE_CONSTRAINT: not one the store handles
        // A failing transaction leaves nothing behind.
        assert.throws(() =>
          db.transaction(() => {
            db.prepare('INSERT INTO t VALUES (?)').run(2);
            throw new Error('abort');
          }),
        );
        assert.deepEqual({ ...(db.prepare('SELECT count(*) AS n FROM t').get() as object) }, { n: 1 });
        db.close();
        assert.equal(db.open, false);
      } finally {
        if (previous === undefined) delete process.env['PUNCH_SQLITE_DRIVER'];
        else process.env['PUNCH_SQLITE_DRIVER'] = previous;
        dir.remove();
      }
    });

    test('many handles and statements dropped under forced GC (node --expose-gc) do not abort', () => {
      const dir = tempDir('punch-churn-');
      try {
        const r = spawnSync(
          process.execPath,
          ['--expose-gc', '--import', 'tsx', CHURN, dir.path, driver, '60'],
          { encoding: 'utf8', timeout: 120_000 },
        );
        assert.equal(r.signal, null, `child killed by ${r.signal}: ${r.stderr}`);
        assert.equal(r.status, 0, `child exited ${r.status}: ${r.stderr}`);
        assert.match(r.stdout, new RegExp(`churn ok: driver=${driver} rounds=60 rows=1200`));
      } finally {
        dir.remove();
      }
    });
  });
}
