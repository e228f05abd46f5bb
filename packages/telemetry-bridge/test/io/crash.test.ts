/**
 * Power-cut test: SIGKILL the bridge process while clients write, then truncate the newest log file after the
 * last acknowledged record (what an fsync had not yet covered) and restart. Every acknowledged record is in
 * the log; the unclean start opens a new epoch (offsets never name two records); the resumed watcher is told
 * `recovery_failed`, re-snapshots, and ends with exactly the state a fresh client sees.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot, startProcess, tempDir, waitFor, type RunningProcess } from '@broadcast-ops/core/testing';
import { BridgeClient, type AckMessage } from '@broadcast-ops/bridge-client';
import { listSegments, readLog } from '../../src/io/event-log.ts';
import { encodeRecord } from '../../src/protocol/log-record.ts';
import { freePort } from '../helpers.ts';

const BIN = join(repoRoot, 'packages/telemetry-bridge/bin/telemetry-bridge.mjs');

test('power cut: SIGKILL then a truncated newest log file; new epoch, watcher re-snapshots to a complete view', async () => {
  const dir = tempDir('tb-crash-');
  const procs: RunningProcess[] = [];
  const clients: BridgeClient[] = [];
  try {
    const port = await freePort();
    const logDir = join(dir.path, 'events');
    const cfg = join(dir.path, 'bridge.json');
    writeFileSync(
      cfg,
      JSON.stringify({
        name: 'crash-test',
        clientTransport: { host: '127.0.0.1', port, rateLimit: 100_000 },
        metrics: { enabled: false },
        health: { enabled: false },
        eventLog: { path: logDir, maxFileSize: 64 * 1024, maxFiles: 100 },
        logging: { level: 'info' },
      }),
    );
    const start = async (): Promise<RunningProcess> => {
      const p = startProcess(process.execPath, [BIN, '--config', cfg]);
      procs.push(p);
      await p.waitForOutput(/telemetry bridge listening/, 20_000);
      return p;
    };
    const first = await start();
    const url = `ws://127.0.0.1:${port}/`;

    const sub = new BridgeClient({
      url,
      name: 'watcher',
      reconnect: { initialDelayMs: 100, maxDelayMs: 300 },
    });
    clients.push(sub);
    const seen: number[] = [];
    const seenWhere: ('before' | 'after')[] = [];
    let phase: 'before' | 'after' = 'before';
    const onMsg = (m: { offset?: number }): void => {
      if (typeof m.offset === 'number') {
        seen.push(m.offset);
        seenWhere.push(phase);
      }
    };
    sub.on('state', onMsg);
    sub.on('event', onMsg);
    const completes: number[] = [];
    sub.on('snapshotComplete', () => completes.push(1));
    // The watcher's view of the state, as an application would keep it.
    const view = new Map<string, unknown>();
    sub.on('state', (m) => {
      if (m.payload.value === null) view.delete(m.path);
      else view.set(m.path, m.payload.value);
    });
    await sub.connect();
    await sub.subscribe(['**'], { snapshot: true });

    const pub = new BridgeClient({ url, name: 'pub', reconnect: { enabled: false } });
    clients.push(pub);
    await pub.connect();
    const acked: AckMessage[] = [];
    let stop = false;
    let i = 0;
    const writer = (async () => {
      while (!stop) {
        const batch = Array.from({ length: 20 }, () => {
          const n = i++;
          return n % 7 === 0
            ? pub.publishEvent('app.pub.ticks', 'tick', { n })
            : pub.setState(`k${n % 10}`, { n, pad: 'x'.repeat(n % 50) });
        });
        const results = await Promise.allSettled(batch);
        for (const r of results) if (r.status === 'fulfilled') acked.push(r.value);
        if (results.some((r) => r.status === 'rejected')) break;
      }
    })();
    await waitFor(() => acked.length >= 600, { timeoutMs: 20_000, what: '600 acked writes' });
    first.child.kill('SIGKILL');
    const exit = await first.exited;
    assert.equal(exit.signal, 'SIGKILL');
    stop = true;
    await writer;
    await waitFor(() => !sub.connected, { what: 'watcher noticed the crash' });
    const epochBefore = sub.epoch;

    // Everything acknowledged before the kill is in the log (acks wait for the fsync), offsets increasing.
    const afterKill = readLog(logDir);
    assert.deepEqual(afterKill.torn, [], 'SIGKILL alone does not tear a record (one write per record)');
    const numbered = afterKill.records.filter((r) => r.k !== 'meta' && r.k !== 'checkpoint');
    const offsets = numbered.map((r) => r.o);
    for (let k = 1; k < offsets.length; k++) assert.ok(offsets[k]! > offsets[k - 1]!, 'increasing offsets');
    const logged = new Set(offsets);
    let lastAcked = 0;
    for (const a of acked) {
      assert.ok(logged.has(a.offset!), `ack ${a.offset} logged`);
      lastAcked = Math.max(lastAcked, a.offset!);
      const res = a.payload.result as { offset?: number } | undefined;
      if (res?.offset !== undefined) assert.ok(logged.has(res.offset), `change ${res.offset} logged`);
    }

    // Power cut: what was written after the last acknowledged record had not necessarily reached the disk.
    // Cut the newest file inside the first record after it (or tear a new record onto it).
    const newest = join(logDir, listSegments(logDir).at(-1)!.name);
    const buf = readFileSync(newest);
    let pos = 0;
    let cut: number | undefined;
    while (pos < buf.length) {
      if (buf.readUInt32BE(pos) === 0) break; // preallocated zeros: no more records
      const len = buf.readUInt32BE(pos) + 8;
      const rec = JSON.parse(buf.subarray(pos + 8, pos + len).toString()) as { o: number; k: string };
      if (rec.k !== 'meta' && rec.k !== 'checkpoint' && rec.o > lastAcked) {
        cut = pos + Math.floor(len / 2);
        break;
      }
      pos += len;
    }
    if (cut !== undefined) truncateSync(newest, cut);
    else {
      truncateSync(newest, pos); // drop the preallocated zeros, then tear the next record onto the data
      const torn = encodeRecord({
        o: offsets.at(-1)! + 1,
        t: Date.now(),
        k: 'state',
        m: { path: 'app.pub.custom.torn' },
      });
      appendFileSync(newest, torn.subarray(0, torn.length - 5));
    }

    phase = 'after';
    const failures: string[] = [];
    sub.on('recoveryFailed', (i) => failures.push(i.reason));
    const second = await start();
    assert.match(second.output(), /event log damaged/, 'the torn tail is reported');
    await waitFor(() => sub.connected && failures.length === 1 && completes.length >= 2, {
      timeoutMs: 10_000,
      what: 'watcher told to re-snapshot, snapshot complete',
    });
    assert.equal(failures[0], 'epoch changed', 'an unclean start opens a new epoch');
    assert.notEqual(sub.epoch, epochBefore);

    // The watcher's view is complete: equal to what a fresh client gets.
    const fresh = new BridgeClient({ url, name: 'fresh', reconnect: { enabled: false } });
    clients.push(fresh);
    const freshView = new Map<string, unknown>();
    fresh.on('state', (m) => freshView.set(m.path, m.payload.value));
    const freshDone: number[] = [];
    fresh.on('snapshotComplete', () => freshDone.push(1));
    await fresh.connect();
    await fresh.subscribe(['app.pub.**'], { snapshot: true });
    await waitFor(() => freshDone.length === 1);
    for (const [path, value] of freshView) assert.deepEqual(view.get(path), value, `${path} after resume`);
    assert.ok(freshView.size >= 10);

    const pub2 = new BridgeClient({ url, name: 'pub', reconnect: { enabled: false } });
    clients.push(pub2);
    await pub2.connect();
    for (let n = 0; n < 10; n++) await pub2.setState(`k${n}`, { n: 10_000 + n });
    const finalOffset = (await pub2.setState('done', true)).payload.result as { offset: number };
    await waitFor(() => sub.lastOffset >= finalOffset.offset, { what: 'live deltas after resume' });
    for (let n = 0; n < 10; n++) assert.deepEqual(view.get(`app.pub.custom.k${n}`), { n: 10_000 + n });
    await sub.close();
    await pub2.close();
    await second.stop('SIGTERM');

    const final = readLog(logDir);
    assert.deepEqual(final.torn, []);
    const finalOffsets = final.records.filter((r) => r.k !== 'meta' && r.k !== 'checkpoint').map((r) => r.o);
    for (let k = 1; k < finalOffsets.length; k++) assert.ok(finalOffsets[k]! > finalOffsets[k - 1]!);
    const epochs = final.records.filter((r) => r.k === 'meta').map((r) => (r.m as { epoch: string }).epoch);
    assert.equal(new Set(epochs).size, 2, 'the records after the restart are in a new epoch');
    assert.ok(seenWhere.includes('after') && seenWhere.includes('before'));
  } finally {
    for (const c of clients) await c.close().catch(() => undefined);
    for (const p of procs) await p.stop('SIGKILL');
    dir.remove();
  }
});
