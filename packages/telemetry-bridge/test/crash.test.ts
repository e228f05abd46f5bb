/**
 * Crash test (issue acceptance): SIGKILL the bridge process while clients write; restart it; the log holds
 * every record written before the kill and nothing torn, and a client resumes from its last offset without a
 * gap or a duplicate.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot, startProcess, tempDir, waitFor, type RunningProcess } from '@broadcast-ops/core/testing';
import { BridgeClient, type AckMessage } from '../src/client/bridge-client.ts';
import { listSegments, readLog } from '../src/io/event-log.ts';
import { encodeRecord } from '../src/protocol/log-record.ts';
import { freePort } from './helpers.ts';

const BIN = join(repoRoot, 'packages/telemetry-bridge/bin/telemetry-bridge.mjs');

test('SIGKILL while writing: log intact up to the kill, torn tail skipped, resume without gap or duplicate', async () => {
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
    const replays: number[] = [];
    sub.on('snapshotComplete', (i) => {
      if (i.replayed !== undefined) replays.push(i.replayed);
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
    const lastSeenBefore = sub.lastOffset;

    // Everything acknowledged before the kill is in the log, in order, with no hole in the offsets.
    const afterKill = readLog(logDir);
    assert.deepEqual(afterKill.torn, [], 'SIGKILL alone does not tear a record (one write per record)');
    const offsets = afterKill.records.filter((r) => r.k !== 'meta').map((r) => r.o);
    for (let k = 1; k < offsets.length; k++)
      assert.equal(offsets[k], offsets[k - 1]! + 1, 'contiguous offsets');
    const logged = new Set(offsets);
    for (const a of acked) {
      assert.ok(logged.has(a.offset!), `ack ${a.offset} logged`);
      const res = a.payload.result as { offset?: number } | undefined;
      if (res?.offset !== undefined) assert.ok(logged.has(res.offset), `change ${res.offset} logged`);
    }
    assert.ok(lastSeenBefore <= offsets.at(-1)!, 'no client saw an offset the log does not have');
    const lastBefore = offsets.at(-1)!;

    // Simulate a power cut in the middle of the next write: half a record at the end of the newest file.
    const newest = listSegments(logDir).at(-1)!;
    const torn = encodeRecord({
      o: lastBefore + 1,
      t: Date.now(),
      k: 'state',
      m: { path: 'app.pub.custom.torn' },
    });
    appendFileSync(join(logDir, newest.name), torn.subarray(0, torn.length - 5));

    phase = 'after';
    const second = await start();
    assert.match(second.output(), /"truncatedBytes":\d+/);
    assert.doesNotMatch(second.output(), /"truncatedBytes":0/);
    await waitFor(() => sub.connected && replays.length === 1, {
      timeoutMs: 10_000,
      what: 'watcher resumed',
    });

    const pub2 = new BridgeClient({ url, name: 'pub', reconnect: { enabled: false } });
    clients.push(pub2);
    await pub2.connect();
    for (let n = 0; n < 10; n++) await pub2.setState(`k${n}`, { n: 10_000 + n });
    const finalOffset = (await pub2.setState('done', true)).payload.result as { offset: number };
    await waitFor(() => sub.lastOffset >= finalOffset.offset, { what: 'live deltas after resume' });
    // The watcher leaves first: what happens after (pub2's own stale marks) is logged but not its to see.
    await sub.close();
    await pub2.close();
    await second.stop('SIGTERM');

    const final = readLog(logDir);
    assert.deepEqual(final.torn, []);
    assert.ok(
      final.records.every(
        (r) => r.o !== lastBefore + 1 || (r.m as { path?: string }).path !== 'app.pub.custom.torn',
      ),
      'the torn record was skipped, never replayed',
    );
    const lastSeen = Math.max(...seen);
    assert.ok(lastSeen >= finalOffset.offset);
    const broadcast = final.records
      .filter((r) => (r.k === 'state' || r.k === 'event') && r.o <= lastSeen)
      .map((r) => r.o);
    assert.equal(new Set(seen).size, seen.length, 'no duplicate across the crash');
    assert.deepEqual(
      seen,
      [...seen].sort((a, b) => a - b),
      'in order',
    );
    assert.deepEqual(seen, broadcast, 'no gap: exactly every logged delta and event, before and after');
    assert.ok(seenWhere.includes('after') && seenWhere.includes('before'));
    assert.ok(replays[0]! >= 0);
  } finally {
    for (const c of clients) await c.close().catch(() => undefined);
    for (const p of procs) await p.stop('SIGKILL');
    dir.remove();
  }
});
