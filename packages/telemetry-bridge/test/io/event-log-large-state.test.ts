/**
 * An event log whose retained state is larger than one segment (docs/performance.md "Event log"): a new
 * segment rewrites the whole state as its checkpoint, so the log rotates only once the records since the
 * last checkpoint are as large as that checkpoint; never once per append. With the state at 3× maxFileSize
 * (100 KB values), 200 more acked writes cost a handful of rotations, the segment count stays within
 * maxFiles (+1 while the newest checkpoint is being synced), a client holding 200 keys can leave (200 stale
 * marks) while a new client completes its handshake, and a restart recovers every key. Timings are printed,
 * not asserted, except the 1 s handshake bound, far above what a free event loop needs.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { silentLogger } from '@broadcast-ops/core';
import { tempDir } from '@broadcast-ops/core/testing';
import { BridgeClient } from '@broadcast-ops/bridge-client';
import { EventLog, listSegments } from '../../src/io/event-log.ts';
import { startBridge, type RunningBridge } from '../../src/app.ts';
import { FakeAdapter, testConfig } from '../helpers.ts';

const MAX_FILE = 1024 * 1024;
const MAX_FILES = 4;
const VALUE_BYTES = 100 * 1024;

function value(tag: string): string {
  // 100 KB that differ per key and per write, so a recovered key proves it is the last write.
  const seed = createHash('sha256').update(tag).digest('hex');
  return seed.repeat(Math.ceil(VALUE_BYTES / seed.length)).slice(0, VALUE_BYTES);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
}

test('EventLog: a checkpoint larger than maxFileSize does not make every append rotate', () => {
  const dir = tempDir('tb-bigcp-');
  try {
    const state = Array.from({ length: 30 }, (_, i) =>
      JSON.stringify({ path: `k${i}`, value: value(`s${i}`) }),
    );
    const log = new EventLog({
      dir: dir.path,
      maxFileBytes: MAX_FILE,
      maxFiles: MAX_FILES,
      newEpoch: () => 'e',
      now: () => 1,
      sync: false,
    });
    log.open();
    log.start(() => state);
    assert.equal(log.rotations, 1, 'the first segment');
    for (let o = 1; o <= 200; o++) log.append(o, 1, 'state', JSON.stringify({ v: 'x'.repeat(10_000) }));
    // 2 MB of records after a 3 MB checkpoint: not one rotation (the old rule rotated on each of the 200).
    assert.equal(log.rotations, 1, `rotations after 200 small appends: ${log.rotations}`);
    for (let o = 201; o <= 600; o++) log.append(o, 1, 'state', JSON.stringify({ v: 'x'.repeat(10_000) }));
    // 6 MB of records in all: a rotation per ~3 MB of records (the checkpoint's size), not per append.
    assert.ok(log.rotations >= 2 && log.rotations <= 3, `rotations: ${log.rotations}`);
    log.flush();
    log.close();
    assert.ok(listSegments(dir.path).length <= MAX_FILES);
    // Read back: the oldest kept segment's checkpoint is the base, and it is 3 MB in 1 MB records; every
    // record of it counts, not only the first (which held 11 of the 30 keys).
    const again = new EventLog({
      dir: dir.path,
      maxFileBytes: MAX_FILE,
      maxFiles: MAX_FILES,
      newEpoch: () => 'e2',
      now: () => 2,
    });
    again.open();
    const restored = new Set<string>();
    for (const r of again.recovered?.records ?? [])
      if (r.k === 'checkpoint')
        for (const e of (r.m as { entries: { path: string }[] }).entries) restored.add(e.path);
    assert.equal(restored.size, 30, `checkpoint keys read back: ${restored.size}`);
  } finally {
    dir.remove();
  }
});

test('large state with the event log on: cheap acked writes, bounded segments, free handshakes, full recovery', async () => {
  const dir = tempDir('tb-large-');
  const config = testConfig(
    {
      eventLog: { maxFileSize: MAX_FILE, maxFiles: MAX_FILES },
      clientTransport: { rateLimit: 100_000, maxMessageSize: 4 * 1024 * 1024 },
      replay: { maxBytes: 64 * 1024 * 1024 },
    },
    join(dir.path, 'events'),
  );
  const expected = new Map<string, string>();
  let bridge: RunningBridge | undefined;
  const clients: BridgeClient[] = [];
  const client = async (name: string): Promise<BridgeClient> => {
    const c = new BridgeClient({
      url: (bridge as RunningBridge).clientUrl,
      name,
      reconnect: { enabled: false },
    });
    clients.push(c);
    await c.connect();
    return c;
  };
  const lag = monitorEventLoopDelay({ resolution: 10 });
  try {
    bridge = await startBridge({ config, logger: silentLogger(), adapters: [new FakeAdapter()] });
    const log = bridge.eventLog as EventLog;
    // Retained state of 3× maxFileSize, from a client that stays.
    const base = await client('base');
    for (let i = 0; i < 30; i++) {
      const v = value(`base${i}`);
      await base.setState(`k${i}`, v);
      expected.set(`app.base.custom.k${i}`, v);
    }
    const rotationsBefore = log.rotations;
    // 200 more writes, each awaited (acked once durable), by a client that will leave holding them.
    const holder = await client('holder');
    lag.enable();
    const times: number[] = [];
    for (let i = 0; i < 200; i++) {
      const v = value(`holder${i}`);
      const t0 = performance.now();
      const ack = await holder.setState(`k${i}`, v);
      times.push(performance.now() - t0);
      assert.equal(ack.payload.status, 'completed');
      expected.set(`app.holder.custom.k${i}`, v);
    }
    const rotations = log.rotations - rotationsBefore;
    const segments = listSegments(log.dir).length;
    // 20 MB appended onto a 3 MB state: a rotation when the records reach the checkpoint's size, so about
    // log2(23/3) + 1 of them; the old rule rotated on every append (200).
    assert.ok(rotations <= 8, `${rotations} rotations for 200 writes`);
    assert.ok(segments <= MAX_FILES + 1, `${segments} segments (maxFiles ${MAX_FILES})`);

    const writeLagMax = lag.max / 1e6;
    lag.reset();
    const rotationsBeforeLeave = log.rotations;
    // The holder leaves: 200 keys go stale, 200 log records; a new client's handshake is not held up.
    const t0 = performance.now();
    const left = holder.close();
    const probe = new BridgeClient({ url: bridge.clientUrl, name: 'probe', reconnect: { enabled: false } });
    clients.push(probe);
    await probe.connect();
    const handshakeMs = performance.now() - t0;
    await left;
    lag.disable();
    console.log(
      `acked write: median ${median(times).toFixed(1)} ms, max ${Math.max(...times).toFixed(1)} ms; ` +
        `${rotations} rotations, ${segments} segments; handshake during the 200-key departure ${handshakeMs.toFixed(1)} ms; ` +
        `event-loop delay max ${writeLagMax.toFixed(1)} ms during the writes, ${(lag.max / 1e6).toFixed(1)} ms during the departure ` +
        `(${log.rotations - rotationsBeforeLeave} rotations)`,
    );
    assert.ok(handshakeMs < 1000, `handshake took ${handshakeMs.toFixed(0)} ms`);

    // A restart recovers every key with its last value.
    for (const c of clients.splice(0)) await c.close();
    await bridge.close();
    bridge = await startBridge({ config, logger: silentLogger(), adapters: [new FakeAdapter()] });
    for (const [path, v] of expected) {
      const e = bridge.hub.store.get(path);
      assert.ok(e, `${path} recovered`);
      assert.equal(e.value, v, `${path} has its last value`);
    }
    assert.equal(bridge.eventLog?.report.damage, undefined);
  } finally {
    lag.disable();
    for (const c of clients) await c.close();
    await bridge?.close();
    dir.remove();
  }
});
