/**
 * A namespace is taken over only by proof of identity (the resume token the hub issued to it, or the bearer
 * token its holder authenticated with), never by the name alone: with authentication on, a client with
 * another valid token and the same name gets `app.<name>_2`, whether the holder is connected or has left
 * (its keys stay stale and untouched), and the holder's own token brings it back. The binding survives a
 * restart (a digest of the token, in a 0600 file beside the event log).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '@broadcast-ops/core';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ManualClock, tempDir } from '@broadcast-ops/core/testing';
import { Hub } from '../../src/domain/hub.ts';
import { ClientSession } from '../../src/io/client-session.ts';
import { EventLog } from '../../src/io/event-log.ts';
import { IDENTITY_FILE, identityFile } from '../../src/io/identity-file.ts';

const T1 = 'studio-a-token-0123456789';
const T2 = 'studio-b-token-0123456789';

function handshake(
  hub: Hub,
  clock: ManualClock,
  token: string,
  resumeToken?: string,
): { s: ClientSession; namespace: string; closed: () => number | undefined } {
  const sent: Record<string, unknown>[] = [];
  let closed: number | undefined;
  const s = new ClientSession(
    hub,
    {
      remote: 'test',
      bufferedAmount: () => 0,
      send: (d: string) => void sent.push(JSON.parse(d) as Record<string, unknown>),
      close: (code: number) => {
        closed = code;
      },
    },
    clock,
    silentLogger(),
    {
      requireAuth: true,
      authTokens: [T1, T2],
      handshakeTimeoutMs: 10_000,
      idleTimeoutMs: 3_600_000,
      serverVersion: 't',
    },
    undefined,
  );
  s.receive(
    JSON.stringify({
      type: 'handshake',
      name: 'cam',
      version: '1',
      authToken: token,
      ...(resumeToken === undefined ? {} : { resumeToken }),
    }),
  );
  const r = sent[0] as { success: boolean; namespace: string };
  assert.equal(r.success, true);
  return { s, namespace: r.namespace, closed: () => closed };
}

test('another token cannot take a namespace by its name, live or departed; the holder gets it back', () => {
  const clock = new ManualClock();
  const hub = new Hub({ clock, logger: silentLogger() });
  const holder = handshake(hub, clock, T1);
  assert.equal(holder.namespace, 'app.cam');
  holder.s.receive(
    JSON.stringify({ id: 'w', type: 'state', path: 'app.cam.custom.k', payload: { value: 1 }, timestamp: 1 }),
  );

  const other = handshake(hub, clock, T2, 'not-a-token-the-hub-issued');
  assert.equal(other.namespace, 'app.cam_2', 'same name, other token, forged resume token: told apart');
  assert.equal(holder.closed(), undefined, 'the holder keeps its connection');

  holder.s.closed(1000);
  other.s.closed(1000);
  assert.equal(hub.store.get('app.cam.custom.k')?.stale, true);
  const later = handshake(hub, clock, T2);
  assert.equal(later.namespace, 'app.cam_2', 'a departed holder keeps its namespace from other tokens');
  assert.equal(hub.store.get('app.cam.custom.k')?.stale, true, 'and its keys stay stale');

  const back = handshake(hub, clock, T1);
  assert.equal(back.namespace, 'app.cam', "the holder's token brings it back");
  assert.equal(hub.store.get('app.cam.custom.k')?.stale, false);
  hub.abortAll();
});

test('after a restart the binding holds: only the token that held a restored namespace gets it back', () => {
  const dir = tempDir('tb-ident-');
  const open = (): { hub: Hub; log: EventLog; clock: ManualClock } => {
    const log = new EventLog({
      dir: dir.path,
      maxFileBytes: 1 << 20,
      maxFiles: 4,
      newEpoch: () => 'e1',
      now: () => 1_700_000_000_000,
    });
    log.open();
    const clock = new ManualClock();
    const hub = new Hub({
      clock,
      logger: silentLogger(),
      log,
      epoch: log.epoch,
      identities: identityFile(dir.path),
      ...(log.recovered ? { recovered: log.recovered } : {}),
    });
    log.start(() => hub.store.checkpoint());
    hub.markRecovered();
    return { hub, log, clock };
  };
  try {
    const a = open();
    const holder = handshake(a.hub, a.clock, T1);
    assert.equal(holder.namespace, 'app.cam');
    holder.s.receive(
      JSON.stringify({
        id: 'w',
        type: 'state',
        path: 'app.cam.custom.tally',
        payload: { value: 'red' },
        timestamp: 1,
      }),
    );
    a.hub.abortAll();
    a.log.close();
    const file = join(dir.path, IDENTITY_FILE);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.ok(!readFileSync(file, 'utf8').includes(T1), 'only a digest is stored');

    const b = open();
    assert.equal(b.hub.store.get('app.cam.custom.tally')?.value, 'red');
    const intruder = handshake(b.hub, b.clock, T2);
    assert.equal(intruder.namespace, 'app.cam_2', 'another valid token does not get the restored name');
    const back = handshake(b.hub, b.clock, T1);
    assert.equal(back.namespace, 'app.cam', 'the holder does');
    assert.equal(b.hub.store.get('app.cam.custom.tally')?.stale, false);
    b.hub.abortAll();
    b.log.close();
  } finally {
    dir.remove();
  }
});
