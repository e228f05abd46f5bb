import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '@broadcast-ops/core';
import { tempDir, waitFor } from '@broadcast-ops/core/testing';
import { BridgeClient } from '@broadcast-ops/bridge-client';
import { listSegments } from '../../src/io/event-log.ts';
import { startBridge, type RunningBridge } from '../../src/app.ts';
import { FakeAdapter, freePort, testConfig } from '../helpers.ts';

test('restart: intact log keeps the epoch and resumes; damaged log starts a new epoch, client adopts it', async () => {
  const dir = tempDir('tb-restart-');
  const port = await freePort();
  const config = testConfig({ clientTransport: { port } }, join(dir.path, 'events'));
  let bridge: RunningBridge | undefined;
  let adapter = new FakeAdapter();
  const start = async (): Promise<RunningBridge> => {
    adapter = new FakeAdapter();
    bridge = await startBridge({ config, logger: silentLogger(), adapters: [adapter] });
    return bridge;
  };
  const client = new BridgeClient({
    url: `ws://127.0.0.1:${port}/`,
    name: 'survivor',
    reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
  });
  const values: unknown[] = [];
  const failures: string[] = [];
  const resumes: number[] = [];
  client.on('state', (m) => values.push(m.payload.value));
  client.on('recoveryFailed', (i) => failures.push(i.reason));
  client.on('snapshotComplete', (i) => {
    if (i.replayed !== undefined) resumes.push(i.replayed);
  });
  try {
    const b1 = await start();
    await client.connect();
    await client.subscribe(['fake.**'], { snapshot: true });
    adapter.set('fake.v', 1);
    await waitFor(() => values.length === 1);
    const epoch1 = client.epoch;
    await b1.close();
    await waitFor(() => !client.connected);

    // Intact log: same epoch, the restored key is replayed as stale, then the adapter clears it.
    const b2 = await start();
    assert.equal(b2.hub.epoch, epoch1);
    await waitFor(() => resumes.length === 1, { what: 'resume after clean restart' });
    assert.deepEqual(failures, []);
    adapter.set('fake.v', 2);
    await waitFor(() => values.includes(2));
    await b2.close();
    await waitFor(() => !client.connected);

    // Damage in the middle of the history: new epoch, recovery_failed, fresh snapshot.
    const seg = join(dir.path, 'events', listSegments(join(dir.path, 'events'))[0]!.name);
    const bytes = readFileSync(seg);
    bytes[40] = bytes[40]! ^ 0xff;
    writeFileSync(seg, bytes);
    const b3 = await start();
    assert.notEqual(b3.hub.epoch, epoch1);
    adapter.set('fake.v', 3);
    await waitFor(() => failures.length === 1, { what: 'recovery_failed' });
    await waitFor(() => client.epoch === b3.hub.epoch, { what: 'client adopted the new epoch' });
    await waitFor(() => values.includes(3));
    await b3.close();
    await waitFor(() => !client.connected);

    // And resumes cleanly in the new epoch after the next restart.
    await start();
    await waitFor(() => resumes.length === 2, { what: 'resume in the new epoch' });
    assert.equal(failures.length, 1);
    adapter.set('fake.v', 4);
    await waitFor(() => values.includes(4));
  } finally {
    await client.close();
    await bridge?.close();
    dir.remove();
  }
});
