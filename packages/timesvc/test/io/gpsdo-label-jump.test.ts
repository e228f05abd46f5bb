import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLogger } from '@broadcast-ops/core';
import { freePort, requireTool, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { configSchema } from '../../src/config.ts';
import { queryServer, type QueryResult } from '../../src/io/query.ts';
import { createTimesvc } from '../../src/io/service.ts';
import { startChronyServer, type ChronyServer } from '../helpers/chrony.ts';
import { serialPpsConfig, startSerialReceiver } from '../helpers/nmea-receiver.ts';

/**
 * A receiver that labels its seconds 1 s late (docs/gpsdo.md "Label continuity"; docs/clock-discipline.md
 * "No single reference decides whole seconds"): NMEA on a socat pty pair and a sysfs-format PPS fixture,
 * as test/io/gpsdo-serial.test.ts. True time is the host clock: the PPS edges are stamped from it, and the NTP
 * peer (chronyd serving its local clock) keeps it.
 */
interface Probe extends QueryResult {
  atMs: number;
  /**
   * Served − host clock (true time), read in this process as the request left: the distance of the served
   * reading from the Date.now() bracket around it (0 inside the bracket), s.
   */
  exactS: number;
}

interface Run {
  replies: Probe[];
  health: { atMs: number; status: string; reason: string }[];
  logs: string[];
  /** Seconds of wall time when the receiver's labels started being late. */
  lateFromMs: number;
  service: Awaited<ReturnType<typeof createTimesvc>>;
  peerId: string | undefined;
}

async function withReceiver(
  options: {
    peer: boolean;
    stepout?: string;
    lateForMs: number;
    afterMs: number;
    /**
     * The GPSDO's median-filter poll (docs/gpsdo.md "Samples"). `1s` (the default here) hands on every
     * sample, so these tests follow the receiver model and the stepout second by second; the filter's own
     * effect is the last test's and test/app/gpsdo-filter.test.ts's.
     */
    filterPoll?: string;
    until?: (r: Run) => boolean;
  },
  check: (r: Run) => Promise<void> | void,
): Promise<void> {
  if (options.peer) requireTool('chronyd');
  const dir = tempDir('timesvc-labeljump-');
  let lateFromMs = Number.POSITIVE_INFINITY;
  const late = (nowMs: number): number =>
    nowMs >= lateFromMs && nowMs < lateFromMs + options.lateForMs ? 1 : 0;
  // The "kernel" stamps the assert edge from the host clock (true time); the receiver names that second, or
  // the one before it while it is late.
  const receiver = await startSerialReceiver(dir.path, {
    assertNsec: 0,
    label: (sec) => sec - late(sec * 1000),
  });
  let chrony: ChronyServer | undefined;
  let peerId: string | undefined;
  const peers: { address: string; minpoll: number; maxpoll: number }[] = [];
  if (options.peer) {
    const chronyPort = await freePort('udp');
    chrony = await startChronyServer(dir.path, chronyPort, { stratum: 8 });
    peers.push({ address: `127.0.0.1:${chronyPort}`, minpoll: 1, maxpoll: 1 });
    peerId = `NTP:127.0.0.1:${chronyPort}`;
  }
  const config = configSchema.parse({
    ntp: {
      port: 0,
      interface: '127.0.0.1',
      ref_id: 'GPS',
      upstream_peers: peers,
      ...(options.stepout ? { discipline: { stepout: options.stepout } } : {}),
    },
    gpsdo: { ...serialPpsConfig(receiver.device, receiver.ppsFile), filter_poll: options.filterPoll ?? '1s' },
    web: { port: 0, bind_address: '127.0.0.1' },
  });
  const logs: string[] = [];
  const logger = createLogger({
    service: 'timesvc',
    destination: { write: (l: string) => void logs.push(l) },
  });
  const service = await createTimesvc(config, logger);
  let probe: NodeJS.Timeout | undefined;
  try {
    await service.start();
    const port = service.server()?.addresses[0]?.port ?? 0;
    await waitFor(
      () =>
        service.manager.state === 'LOCKED' &&
        service.manager.snapshot().selected === 'GPSDO:SerialPPS' &&
        (peerId === undefined ||
          service.manager.snapshot().sources.find((s) => s.id === peerId)?.verdict === 'candidate'),
      { timeoutMs: 60_000, intervalMs: 200, what: 'LOCKED on the GPSDO (beside a candidate peer)' },
    );
    const run: Run = { replies: [], health: [], logs, lateFromMs: 0, service, peerId };
    const ask = (): void => {
      probe = setTimeout(() => {
        // True time brackets the served reading: Date.now() before and after it (whole milliseconds, so
        // true time at the reading lies in [before, after + 1)). The served time is judged by its distance
        // from that bracket's middle, less the bracket's half width, so a loaded machine that preempts this
        // process between the reads widens the bracket instead of making a correct served time look wrong.
        const atMs = Date.now();
        const servedMs = service.clock.servedUnixMs();
        const afterMs = Date.now();
        const middleMs = (atMs + afterMs + 1) / 2;
        const halfMs = (afterMs + 1 - atMs) / 2;
        const offMs = servedMs - middleMs;
        const exactS = (Math.sign(offMs) * Math.max(0, Math.abs(offMs) - halfMs)) / 1000;
        void queryServer('127.0.0.1', port, 1000)
          .then((q) => run.replies.push({ ...q, atMs, exactS }))
          .catch(() => undefined);
        void service.app.inject({ method: 'GET', url: '/api/health' }).then((res) => {
          const b = res.json<{ status: string; reason: string }>();
          run.health.push({ atMs, status: b.status, reason: b.reason });
        });
        ask();
      }, 250);
    };
    ask();
    // Late from the next whole second on.
    lateFromMs = (Math.floor(Date.now() / 1000) + 1) * 1000;
    run.lateFromMs = lateFromMs;
    const endMs = lateFromMs + options.afterMs;
    await waitFor(() => Date.now() >= endMs && (options.until?.(run) ?? true), {
      timeoutMs: options.afterMs + 90_000,
      intervalMs: 250,
      what: 'the episode and its recovery',
    });
    if (probe) clearTimeout(probe);
    probe = undefined;
    await check(run);
  } finally {
    if (probe) clearTimeout(probe);
    await service.close();
    await receiver.stop();
    await chrony?.stop();
    dir.remove();
  }
}

/**
 * Synchronised replies whose served time was more than `limitS` from `truthS` (served − host, read in this
 * process when the request left, outside the bracket of its reading), or whose measured offset is beyond the bound the reply
 * advertises (root delay / 2 + root dispersion, plus the probe's half round trip as a client adds it).
 */
function outside(replies: readonly Probe[], truthS: number, limitS = Number.POSITIVE_INFINITY): string[] {
  return replies
    .filter((r) => r.leap !== 3)
    .filter((r) => {
      const measured = Math.abs(r.offsetS - truthS);
      return (
        Math.abs(r.exactS - truthS) > limitS || measured > r.rootDelayS / 2 + r.rootDispersionS + r.delayS / 2
      );
    })
    .map(
      (r) =>
        `${new Date(r.atMs).toISOString()} LI ${r.leap} exact ${r.exactS} offset ${r.offsetS} ` +
        `delay ${r.delayS} disp ${r.rootDispersionS}`,
    );
}

/** When the clock manager logged that it holds the new level back (the held-back level is logged). */
function heldAt(r: Run): number {
  const held = r.logs.find((l) => l.includes('held back until its stepout'));
  assert.ok(held, 'the held-back level is logged');
  return Date.parse((JSON.parse(held) as { time: string }).time);
}

/**
 * What holds however the jump fell against the filter's polls: every synchronised reply within 1 ms of true
 * time and within its bound, no step but the acquisition's, the jump and the return counted.
 */
function assertNeverServed(r: Run): void {
  const snap = r.service.manager.snapshot();
  // The probe asks 4 times a second; the server's rate limit (1/s after a burst of 16) answers about half.
  assert.ok(r.replies.length > 40, `replies: ${r.replies.length}`);
  assert.deepEqual(
    outside(r.replies, 0, 1e-3),
    [],
    'no synchronised reply 1 ms from true time or beyond its bound',
  );
  assert.equal(snap.steps, 1, 'only the acquisition step: the jump was never served');
  const counters = r.service.gpsdo()?.gpsdoStatus().counters.errors ?? {};
  const gpsdoLog = r.logs
    .filter((l) => l.includes('gpsdo event') || l.includes('"component":"clock"'))
    .join('');
  // The jump and the return.
  assert.equal(counters['pps_label_jump'], 2, `counted: ${JSON.stringify(counters)} ${gpsdoLog}`);
}

async function assertJumpNotServed(r: Run): Promise<void> {
  assertNeverServed(r);
  const snap = r.service.manager.snapshot();
  assert.ok(snap.stepSuspects >= 1);
  assert.match(await r.service.registry.metrics(), /timesvc_gpsdo_errors_total\{kind="pps_label_jump"\} 2\b/);
  assert.ok(
    r.logs.some((l) => l.includes('"label_jump"') && l.includes('gpsdo event')),
    'the jump is logged',
  );
  assert.ok(
    r.logs.some((l) => l.includes('held back until its stepout')),
    'the held-back level is logged',
  );
  // From the moment the level is held back until the receiver is back, the bound includes the disagreement.
  // The new level reaches the clock manager 2 s after the receiver moved (docs/gpsdo.md "Label
  // continuity"); 10 s leaves room for a loaded machine.
  const heldAtMs = heldAt(r);
  assert.ok(heldAtMs - r.lateFromMs < 10_000, `held back ${heldAtMs - r.lateFromMs} ms after the change`);
  const during = r.replies.filter((x) => x.atMs > heldAtMs + 300 && x.atMs < r.lateFromMs + 19_000);
  assert.ok(
    during.every((x) => x.leap === 3 || x.rootDispersionS >= 0.99),
    `bound ≥ 1 s while the receiver disagrees (held back ${heldAtMs - r.lateFromMs} ms after the change)`,
  );
  const unhealthy = r.health.filter((h) => h.status === 'unhealthy');
  assert.ok(unhealthy.length > 0, 'health names the disagreement');
  const reason = unhealthy[0]?.reason ?? '';
  const named = /references disagree: GPSDO:SerialPPS is (-?\d+\.\d+) s from the served clock/.exec(reason);
  // The receiver's second off by one, as the served clock sees it: the served clock follows the peer to a
  // few microseconds on a loaded machine, on either side (-0.999996 s was read once under the full suite).
  assert.ok(named && Math.abs(Number(named[1]) + 1) < 0.001, `the disagreement named: ${reason}`);
  assert.equal(r.health[r.health.length - 1]?.status, 'healthy', 'healthy again after the return');
  assert.equal(snap.selected, 'GPSDO:SerialPPS');
}

test(
  'a receiver labelling its seconds 1 s late for 20 s, alone: never served, no step, counted and logged',
  { timeout: 240_000 },
  async () => {
    await withReceiver(
      {
        peer: false,
        lateForMs: 20_000,
        afterMs: 30_000,
        until: (r) =>
          r.service.manager.state === 'LOCKED' && r.service.manager.snapshot().selected !== undefined,
      },
      assertJumpNotServed,
    );
  },
);

test(
  'the same beside one true NTP peer: the GPSDO is rejected, the peer keeps the time, /api/health names it',
  { timeout: 240_000 },
  async () => {
    await withReceiver(
      {
        peer: true,
        lateForMs: 20_000,
        afterMs: 30_000,
        until: (r) => r.service.manager.snapshot().selected === 'GPSDO:SerialPPS',
      },
      async (r) => {
        await assertJumpNotServed(r);
        assert.ok(
          r.logs.some(
            (l) => l.includes('reference selected') && r.peerId !== undefined && l.includes(r.peerId),
          ),
          'the peer took over while the GPSDO was held back',
        );
      },
    );
  },
);

/**
 * A reply that shows the clock on a level `levelS` from true time: the served reading within 1 ms of it and
 * the reply's offset within 1 ms of it plus half the query's round trip (RFC 5905 section 8's offset and
 * delay: an asymmetry of the two paths moves the offset by at most half the delay, and on a loaded machine
 * the round trip alone can exceed 2 ms).
 */
function onLevel(x: Probe, levelS: number): boolean {
  return (
    x.leap === 0 && Math.abs(x.exactS - levelS) < 1e-3 && Math.abs(x.offsetS - levelS) < 1e-3 + x.delayS / 2
  );
}

test(
  'a genuine level change persisting beyond a short stepout (8 s) is followed; the bound covers the wait',
  { timeout: 240_000 },
  async () => {
    await withReceiver(
      {
        peer: false,
        stepout: '8s',
        lateForMs: 3_600_000,
        afterMs: 12_000,
        until: (r) => r.replies.some((x) => onLevel(x, -1)),
      },
      (r) => {
        // From the moment the clock manager holds the new level back (the receiver model holds the first
        // late label; nothing can know before the first sample at the new level) the new level is true time:
        // every synchronised reply must cover it.
        const heldAtMs = heldAt(r);
        // 2 s (docs/gpsdo.md "Label continuity"): until then the clock has no sample at the new level and
        // cannot know. 10 s leaves room for a loaded machine.
        assert.ok(
          heldAtMs - r.lateFromMs < 10_000,
          `held back ${heldAtMs - r.lateFromMs} ms after the change`,
        );
        const after = r.replies.filter((x) => x.atMs > heldAtMs);
        assert.ok(after.length > 10, `replies after the change: ${after.length}`);
        assert.deepEqual(outside(after, -1), [], 'the bound covers the wait and the change');
        assert.ok(r.logs.some((l) => l.includes('reference level change followed')));
        const last = r.replies[r.replies.length - 1];
        assert.ok(last && onLevel(last, -1), JSON.stringify(last));
      },
    );
  },
);

test(
  'with the default 16 s filter poll, a receiver 1 s late for 20 s, alone: never served, no step, counted',
  { timeout: 240_000 },
  async () => {
    await withReceiver(
      {
        peer: false,
        lateForMs: 20_000,
        // Two polls past the receiver's return: the late level has reached the manager (15-31 s after the
        // move, docs/gpsdo.md "Samples") or been dropped by the filter. Its return to the selection after a
        // held-back level (four filtered samples, about 64 s) is shown on the manual clock
        // (test/app/gpsdo-filter.test.ts), not waited for here in real time.
        afterMs: 52_000,
        filterPoll: '16s',
      },
      (r) => {
        assertNeverServed(r);
        // Whether the late level reached the clock manager depends on where the 20 s fell against the polls
        // (docs/gpsdo.md "Samples"): when it did, it was held back, never followed.
        assert.ok(!r.logs.some((l) => l.includes('reference level change followed')));
        assert.ok(
          r.service.manager.state === 'LOCKED' || r.service.manager.state === 'HOLDOVER',
          r.service.manager.state,
        );
      },
    );
  },
);
