import assert from 'node:assert/strict';
import { readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { openSqlite } from '../../src/io/sqlite-driver.ts';
import { SqliteSessionStore } from '../../src/io/sqlite-store.ts';
import { repoRoot, startProcess, tempDir, type RunningProcess } from '@broadcast-ops/core/testing';
import { TokenSigner } from '../../src/protocol/token.ts';

const SECRET = 'restart-test-secret-0123456789-abcdefghijklmnopqrstuvwxyz-XYZ';

async function startBroker(db: string): Promise<{ proc: RunningProcess; url: string }> {
  const proc = startProcess(process.execPath, [join(repoRoot, 'packages/punch/bin/punch.mjs'), 'serve'], {
    env: { PUNCH_SECRET: SECRET, PUNCH_HOST: '127.0.0.1', PUNCH_PORT: '0', PUNCH_DB: db, LOG_LEVEL: 'info' },
  });
  const m = await proc.waitForOutput(
    /"url":"(http:\/\/127\.0\.0\.1:\d+)"[^\n]*punch broker listening/,
    20_000,
  );
  return { proc, url: m[1] ?? '' };
}

/** `punch serve` on `db` that is expected to refuse to start: its exit code and output (killed after 30 s). */
async function serveUntilExit(db: string): Promise<{ code: number | null; out: string }> {
  const proc = startProcess(process.execPath, [join(repoRoot, 'packages/punch/bin/punch.mjs'), 'serve'], {
    env: { PUNCH_SECRET: SECRET, PUNCH_DB: db, PUNCH_PORT: '0', PUNCH_HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
  });
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), 30_000);
  try {
    return { code: (await proc.exited).code, out: proc.output() };
  } finally {
    clearTimeout(timer);
    await proc.stop('SIGKILL');
  }
}

function row(db: string, name: string): { passphrase: string; state: string; close_reason: string | null } {
  const d = openSqlite(db);
  try {
    return {
      ...(d
        .prepare('SELECT passphrase, state, close_reason FROM sessions WHERE name = ?')
        .get(name) as object),
    } as {
      passphrase: string;
      state: string;
      close_reason: string | null;
    };
  } finally {
    d.close();
  }
}

test('restart on the same store: sessions, passphrases and tokens survive; TTL passed while down → closed', async () => {
  const dir = tempDir('punch-restart-');
  const db = join(dir.path, 'punch.db');
  const procs: RunningProcess[] = [];
  try {
    const first = await startBroker(db);
    procs.push(first.proc);
    const post = async (path: string, body: unknown, token?: string) => {
      const res = await fetch(first.url + path, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify(body),
      });
      const text = await res.text();
      assert.equal(res.status, 201, `${path}: ${text}`);
      return JSON.parse(text) as { token: string; expiresAt: number };
    };
    const keep = await post('/api/session', {
      name: 'keep',
      streams: ['cam-1', 'cam-2'],
      latency: 400,
      ttl: 600,
    });
    const brief = await post('/api/session', { name: 'brief', ttl: 1 });
    const peer = await post('/api/session/keep/token', { stream: 'cam-2' }, keep.token);
    const viewBefore = await (
      await fetch(`${first.url}/api/session/keep`, { headers: { authorization: `Bearer ${keep.token}` } })
    ).json();

    assert.deepEqual(await first.proc.stop('SIGTERM'), { code: 0, signal: null });
    const passphrase = row(db, 'keep').passphrase;
    assert.match(passphrase, /^[A-Za-z0-9]{32}$/);
    // Stay down until "brief" has expired.
    while (Date.now() <= brief.expiresAt + 50) await new Promise((r) => setTimeout(r, 100));

    const second = await startBroker(db);
    procs.push(second.proc);
    const get = (name: string, token: string) =>
      fetch(`${second.url}/api/session/${name}`, { headers: { authorization: `Bearer ${token}` } });
    const keepRes = await get('keep', keep.token);
    assert.equal(keepRes.status, 200);
    assert.deepEqual(await keepRes.json(), viewBefore);
    const peerRes = await get('keep', peer.token);
    assert.equal(peerRes.status, 200);
    assert.deepEqual(Object.keys(((await peerRes.json()) as { streams: object }).streams), ['cam-2']);
    // The TTL of "brief" passed while the server was down: closed at start, with the reason recorded.
    const briefRes = await get('brief', brief.token);
    assert.equal(briefRes.status, 410);
    assert.equal(((await briefRes.json()) as { error: string }).error, 'SESSION_EXPIRED');

    // The file holds every passphrase: owner-only.
    assert.equal(statSync(db).mode & 0o777, 0o600);
    // A second broker on the same file refuses to start, with a clear message and no stack trace.
    const intruder = await serveUntilExit(db);
    assert.equal(intruder.code, 2);
    assert.match(
      intruder.out,
      new RegExp(
        `session store ${db.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is locked by another process.*another punch broker`,
      ),
    );
    assert.doesNotMatch(intruder.out, /\n\s+at /, 'no stack trace');
    // The first broker kept working.
    assert.equal((await get('keep', keep.token)).status, 200);
    assert.deepEqual(await second.proc.stop('SIGTERM'), { code: 0, signal: null });
    assert.equal(row(db, 'keep').passphrase, passphrase);
    assert.deepEqual(
      { ...row(db, 'brief'), passphrase: undefined },
      { passphrase: undefined, state: 'CLOSED', close_reason: 'ttl_expired' },
    );
    assert.match(second.proc.output(), /"session":"brief","reason":"ttl_expired","msg":"session closed"/);
    // Nothing secret in the logs.
    assert.ok(!second.proc.output().includes(passphrase) && !first.proc.output().includes(passphrase));
    assert.ok(!second.proc.output().includes(SECRET) && !first.proc.output().includes(keep.token));
  } finally {
    for (const p of procs) await p.stop('SIGKILL');
    dir.remove();
  }
});

test('a corrupt store file or an unreadable row: exit 2 with the path and what to do, no stack trace', async () => {
  const dir = tempDir('punch-corrupt-');
  try {
    const db = join(dir.path, 'punch.db');
    const run = () => serveUntilExit(db);
    // Not a database at all (e.g. a file overwritten by something else).
    writeFileSync(db, 'this is not an SQLite file '.repeat(200));
    const garbage = await run();
    assert.equal(garbage.code, 2);
    assert.ok(garbage.out.includes(`session store ${db} is not a readable SQLite database`), garbage.out);
    assert.ok(garbage.out.includes(`mv ${db} ${db}.corrupt`));
    assert.doesNotMatch(garbage.out, /\n\s+at /);

    // A valid database with one bad row.
    rmSync(db);
    const store = new SqliteSessionStore(db);
    store.close();
    const d = openSqlite(db);
    d.prepare(
      `INSERT INTO sessions (name, id, state, passphrase, latency, ttl, created_at, expires_at, streams)
       VALUES ('cam1', 'x', 'WAITING', '${'p'.repeat(32)}', 200, 60, 0, 9999999999999, '[{"name":1}]')`,
    ).run();
    d.close();
    const badRow = await run();
    assert.equal(badRow.code, 2);
    assert.ok(
      badRow.out.includes(`session store ${db}: the row of session "cam1" is unreadable`),
      badRow.out,
    );
    assert.ok(badRow.out.includes(`DELETE FROM sessions WHERE name = 'cam1'`));
    assert.doesNotMatch(badRow.out, /\n\s+at /);
  } finally {
    dir.remove();
  }
});

test('serve refuses to start without PUNCH_SECRET and says why', async () => {
  const proc = startProcess(process.execPath, [join(repoRoot, 'packages/punch/bin/punch.mjs'), 'serve'], {
    env: { PUNCH_SECRET: '', PUNCH_PORT: '0', PUNCH_HOST: '127.0.0.1' },
  });
  try {
    const r = await proc.exited;
    assert.equal(r.code, 2);
    assert.match(proc.output(), /PUNCH_SECRET is not set.*HMAC key/s);
  } finally {
    await proc.stop('SIGKILL');
  }
});

test('serve --demo keeps a generated secret in data/punch/secret (0600), never logs it, exits 0 on SIGINT', async () => {
  const dir = tempDir('punch-demo-');
  const procs: RunningProcess[] = [];
  const start = async () => {
    const proc = startProcess(
      process.execPath,
      [join(repoRoot, 'packages/punch/bin/punch.mjs'), 'serve', '--demo'],
      {
        cwd: dir.path,
        env: { PUNCH_SECRET: '', PUNCH_HOST: '127.0.0.1', PUNCH_PORT: '0', PUNCH_DB: '' },
      },
    );
    procs.push(proc);
    const m = await proc.waitForOutput(
      /"url":"(http:\/\/127\.0\.0\.1:\d+)"[^\n]*punch broker listening/,
      20_000,
    );
    return { proc, url: m[1] ?? '' };
  };
  try {
    const first = await start();
    const file = join(dir.path, 'data/punch/secret');
    const secret = readFileSync(file, 'utf8').trim();
    assert.match(secret, /^[A-Za-z0-9_-]{64}$/);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.match(first.proc.output(), /demo mode: created a random PUNCH_SECRET/);
    const res = await fetch(`${first.url}/api/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'demo' }),
    });
    assert.equal(res.status, 201);
    const { token } = (await res.json()) as { token: string };
    assert.ok(new TokenSigner(secret).verify(token, Date.now()).ok);
    assert.deepEqual(await first.proc.stop('SIGINT'), { code: 0, signal: null });

    const second = await start();
    assert.match(second.proc.output(), /demo mode: using the PUNCH_SECRET stored/);
    assert.equal(readFileSync(file, 'utf8').trim(), secret);
    const again = await fetch(`${second.url}/api/session/demo`, {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(again.status, 200);
    for (const p of procs) assert.ok(!p.output().includes(secret), 'the secret appears in the log');
    assert.deepEqual(await second.proc.stop('SIGTERM'), { code: 0, signal: null });
  } finally {
    for (const p of procs) await p.stop('SIGKILL');
    dir.remove();
  }
});
