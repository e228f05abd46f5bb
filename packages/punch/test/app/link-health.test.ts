import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { ManualClock, repoRoot } from '@broadcast-ops/core/testing';
import { StatsAccumulator, parseStatsLine } from '../../src/io/agent/srt-stats.ts';
import { HealthMonitor } from '../../src/domain/health-monitor.ts';
import { parseClientMessage } from '../../src/protocol/ws-messages.ts';
import {
  EndHistory,
  HISTORY_MS,
  MAX_SAMPLES,
  assess,
  type LinkSample,
} from '../../src/domain/link-health.ts';

/**
 * Health figures over 10 s and 60 s windows (src/domain/link-health.ts), the alarms (health-monitor.ts)
 * and the agent's summing of srt-live-transmit's interval reports, on a ManualClock.
 */
const fixture = (name: string): string[] =>
  readFileSync(join(repoRoot, 'packages/punch/test/fixtures/srt-stats', name), 'utf8')
    .trim()
    .split('\n');

/**
 * A receiver report of `sent` originals of which `lost` went missing before ARQ and were all repaired: every
 * original arrives once (`unique`), the repaired ones as retransmissions (libsrt docs/API/statistics.md).
 */
function rx(clock: ManualClock, o: Partial<LinkSample> & { sent?: number; lost?: number } = {}): LinkSample {
  const sent = o.sent ?? 100;
  const lost = o.lost ?? 0;
  return {
    at: clock.monotonicMs(),
    wall: clock.now(),
    rtt: o.rtt ?? 10,
    retransmit: 0,
    bitrate: o.bitrate ?? 2_000_000,
    counts: o.counts ?? { packets: sent, unique: sent, lost, retransmitted: lost },
    dropped: o.dropped ?? 0,
    latency: o.latency ?? 200,
  };
}

describe('link health windows', () => {
  test('5 % loss in 100-packet reports reads 5 %, not the 2-4 % of one sample, and the verdict follows the spec bands', () => {
    const clock = new ManualClock();
    const h = new EndHistory();
    // 20 reports, one a second: the losses fall unevenly (0-10 per report) but add up to 5 % of the packets.
    const lost = [0, 10, 3, 7, 5, 2, 8, 5, 4, 6, 5, 5, 1, 9, 6, 4, 5, 5, 3, 7];
    for (const l of lost) {
      h.push(rx(clock, { lost: l }));
      clock.advance(1000);
    }
    const now = clock.monotonicMs() - 1000;
    const w10 = h.figures(now, 10_000);
    const w60 = h.figures(now, 60_000);
    assert.ok(w10 && w60);
    assert.equal(w60.reports, 20);
    assert.equal(w60.lossPct, 5);
    assert.equal(w10.reports, 11, 'reports at 0..10 s before now');
    // The last 11 reports lost 5+5+1+9+6+4+5+5+3+7 … summed, not averaged per report.
    const last = lost.slice(-11).reduce((a, b) => a + b, 0);
    assert.equal(w10.lossPct, Math.round((1000 * last) / 1100) / 10);
    assert.equal(w10.retransmitPct, w10.lossPct);
    const a = assess({ receiver: h }, now, 200);
    assert.ok(a);
    // 5.0 % is the top of the warning band (spec: 1-5 % warning, above 5 % critical).
    const w = a.ends.receiver?.w10;
    assert.equal(a.retransmit, Math.max(w?.lossPct ?? 0, w?.retransmitPct ?? 0));
    assert.equal(a.status, a.retransmit > 5 ? 'critical' : 'warning');
    assert.equal(a.alarms.drops, false);
  });

  test('above 5 % is critical, a clean link is healthy with no alarm and no warning advice', () => {
    const clock = new ManualClock();
    const lossy = new EndHistory();
    const clean = new EndHistory();
    for (let i = 0; i < 15; i++) {
      lossy.push(rx(clock, { lost: 6 }));
      clean.push(rx(clock, { rtt: 0.3 + (i % 3) * 0.1 }));
      clock.advance(1000);
    }
    const now = clock.monotonicMs();
    assert.equal(assess({ receiver: lossy }, now, 200)?.status, 'critical');
    const ok = assess({ receiver: clean }, now, 200);
    assert.ok(ok);
    assert.equal(ok.status, 'healthy');
    assert.deepEqual(ok.alarms, { drops: false, margin: false });
    assert.equal(ok.advice.length, 1);
    assert.match(ok.advice[0] ?? '', /^Healthy: latency 200 ms covers 4 × RTT/);
    const f = ok.ends.receiver?.w10;
    // The 10 s window holds the reports of seconds 5-14: RTTs 0.5, 0.3, 0.4, … (four of 0.5).
    assert.deepEqual(f?.rtt, { min: 0.3, avg: 0.41, max: 0.5 });
    assert.equal(f?.lossPct, 0);
    assert.equal(f?.dropped, 0);
    assert.equal(f?.needMs, 1.8, '4 × 0.41 + (0.5 - 0.3)');
    assert.equal(f?.marginMs, 198.2);
  });

  test('RTT min/avg/max differ between the 10 s and the 60 s window; both ends are kept apart by role', () => {
    const clock = new ManualClock();
    const r = new EndHistory();
    const s = new EndHistory();
    for (let i = 0; i < 60; i++) {
      const rtt = i < 45 ? 80 : 20;
      r.push(rx(clock, { rtt }));
      s.push({
        ...rx(clock, { rtt }),
        latency: undefined,
        counts: { packets: 103, unique: 100, lost: 3, retransmitted: 3 },
      });
      clock.advance(1000);
    }
    const a = assess({ receiver: r, sender: s }, clock.monotonicMs() - 1000, 200);
    assert.ok(a);
    assert.deepEqual(a.ends.receiver?.w10.rtt, { min: 20, avg: 20, max: 20 });
    assert.deepEqual(a.ends.receiver?.w60.rtt, { min: 20, avg: 65, max: 80 });
    assert.equal(a.ends.sender?.w10.latency, null, 'a sender has no margin');
    assert.equal(a.ends.sender?.w10.marginMs, null);
    assert.equal(a.ends.sender?.w10.retransmitPct, 2.9);
    // The verdict is the receiver's (clean), not the sender's retransmissions.
    assert.equal(a.status, 'healthy');
  });

  test('the margin alarm fires below 4 × RTT, and the advice never says to raise a fixed latency', () => {
    const clock = new ManualClock();
    const h = new EndHistory();
    for (let i = 0; i < 5; i++) {
      h.push(rx(clock, { rtt: 40, latency: 120 }));
      clock.advance(1000);
    }
    const a = assess({ receiver: h }, clock.monotonicMs(), 120);
    assert.ok(a);
    assert.equal(a.alarms.margin, true);
    assert.equal(a.ends.receiver?.w10.marginMs, -40);
    const text = a.advice.join(' ');
    assert.doesNotMatch(text, /raise (it|the latency)/i);
    assert.match(text, /latency is fixed for this session/);
    assert.match(text, /create a new session with latency 160 ms or more/);
  });

  test('the history is bounded: at most MAX_SAMPLES reports and nothing older than 10 minutes', () => {
    const clock = new ManualClock();
    const h = new EndHistory();
    for (let i = 0; i < MAX_SAMPLES * 3; i++) {
      h.push(rx(clock));
      clock.advance(100);
    }
    assert.equal(h.size, MAX_SAMPLES);
    for (let i = 0; i < 700; i++) {
      h.push(rx(clock));
      clock.advance(1000);
    }
    const pts = h.points(clock.monotonicMs());
    assert.ok(h.size <= HISTORY_MS / 1000 + 1, `size ${h.size}`);
    assert.ok(pts.length <= h.size);
    assert.ok((pts.at(-1)?.t ?? 0) - (pts[0]?.t ?? 0) <= HISTORY_MS);
  });
});

describe('health alarms', () => {
  test('drops raise one alarm, repeated drops none, a clean 10 s window clears it once', () => {
    const clock = new ManualClock();
    const m = new HealthMonitor();
    const at = () => rx(clock);
    assert.deepEqual(m.record('s', 'cam', 'receiver', at(), 200), []);
    clock.advance(1000);
    const raised = m.record('s', 'cam', 'receiver', { ...at(), dropped: 12 }, 200);
    assert.equal(raised.length, 1);
    assert.equal(raised[0]?.alarm, 'drops');
    assert.equal(raised[0]?.active, true);
    assert.match(raised[0]?.message ?? '', /^12 packets arrived too late to play/);
    clock.advance(1000);
    assert.deepEqual(m.record('s', 'cam', 'receiver', { ...at(), dropped: 3 }, 200), []);
    const events = [];
    for (let i = 0; i < 12; i++) {
      clock.advance(1000);
      events.push(...m.record('s', 'cam', 'receiver', at(), 200));
    }
    assert.equal(events.length, 1);
    assert.equal(events[0]?.active, false);
    assert.equal(m.view('s', 'cam', clock.monotonicMs(), 200).history.receiver?.length, 15);
    // A report without counters (a client that sends only the spec's fields) raises nothing.
    assert.deepEqual(m.record('s', 'cam', 'receiver', { ...at(), counts: undefined, dropped: 50 }, 200), []);
    m.drop('s');
    assert.equal(m.view('s', 'cam', clock.monotonicMs(), 200).assessment, null);
  });
});

describe('agent: srt-live-transmit statistics summed per health period', () => {
  test('real 1.5.1 reports: every packet of the period is counted, RTT is the latest, latency is the receiver’s', () => {
    const acc = new StatsAccumulator();
    const lines = fixture('receiver-1.5.1.jsonl');
    for (const l of lines) {
      const s = parseStatsLine(l, 'receiver');
      assert.ok(s);
      acc.add(s);
    }
    const period = acc.take();
    assert.ok(period);
    assert.equal(period.packets, 600);
    assert.equal(period.unique, 600);
    assert.equal(period.lost, 0);
    assert.equal(period.latency, 120);
    assert.equal(period.rtt, (JSON.parse(lines.at(-1) ?? '{}') as { link: { rtt: number } }).link.rtt);
    assert.equal(acc.take(), undefined, 'a new period starts empty');
    const sender = new StatsAccumulator();
    for (const l of fixture('sender-1.5.1.jsonl')) sender.add(parseStatsLine(l, 'sender') ?? assert.fail(l));
    const sent = sender.take();
    assert.equal(sent?.packets, 590);
    assert.equal(sent?.latency, undefined, 'a sender reports no receive latency');
  });

  test('retransmit share over the period: 5 retransmitted of 105 packets', () => {
    const acc = new StatsAccumulator();
    const line = (packets: number, retrans: number, lost: number) =>
      JSON.stringify({
        link: { rtt: 1 },
        recv: {
          packets,
          packetsUnique: packets - retrans,
          packetsLost: lost,
          packetsRetransmitted: retrans,
          packetsDropped: 0,
          mbitRate: 1,
          msTsbPdDelay: 200,
        },
      });
    for (const [p, r, l] of [
      [100, 0, 0],
      [5, 5, 5],
    ] as const) {
      acc.add(parseStatsLine(line(p, r, l), 'receiver') ?? assert.fail('parse'));
    }
    const f = acc.take();
    assert.equal(f?.retransmit, (100 * 5) / 105);
    assert.equal(f?.lost, 5);
  });
});

describe('parsers fed by peers: statistics lines and health counters (fast-check)', () => {
  const anyValue = fc.oneof(
    fc.double(),
    fc.integer(),
    fc.string({ maxLength: 8 }),
    fc.constant(null),
    fc.boolean(),
  );
  const statsObject = fc.record({
    link: fc.dictionary(fc.constantFrom('rtt', 'bandwidth'), anyValue),
    recv: fc.dictionary(
      fc.constantFrom(
        'packets',
        'packetsUnique',
        'packetsLost',
        'packetsDropped',
        'packetsRetransmitted',
        'msBuf',
        'mbitRate',
        'msTsbPdDelay',
      ),
      anyValue,
    ),
    send: fc.dictionary(
      fc.constantFrom('packets', 'packetsUnique', 'packetsLost', 'packetsRetransmitted', 'mbitRate'),
      anyValue,
    ),
  });

  test('a statistics line gives finite, non-negative figures or nothing; summing never yields NaN', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ maxLength: 200 }),
          statsObject.map((o) => JSON.stringify(o)),
        ),
        fc.constantFrom('sender', 'receiver' as const),
        (line, role) => {
          const s = parseStatsLine(line, role);
          if (!s) return;
          const acc = new StatsAccumulator();
          acc.add(s);
          acc.add(s);
          const f = acc.take();
          for (const v of [s.rtt, s.bitrate, s.buffer, f?.packets, f?.lost, f?.retransmit, f?.dropped]) {
            assert.ok(typeof v === 'number' && Number.isFinite(v) && v >= 0, `${line} → ${String(v)}`);
          }
          assert.ok((f?.retransmit ?? 0) <= 100);
        },
      ),
      { numRuns: 1000, interruptAfterTimeLimit: 5000 },
    );
  });

  test('health counts: accepted only as non-negative integers within bounds, else INVALID with the field named', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.constantFrom('packets', 'unique', 'lost', 'retransmitted', 'x'), anyValue),
        (counts) => {
          const r = parseClientMessage(
            JSON.stringify({ type: 'health', rtt: 1, retransmit: 0, bitrate: 1, counts }),
          );
          if (r.ok) {
            const c = r.value.type === 'health' ? r.value.counts : undefined;
            assert.ok(c);
            for (const v of Object.values(c)) assert.ok(Number.isInteger(v) && v >= 0 && v <= 2 ** 40);
          } else assert.match(r.error.message, /^counts/);
        },
      ),
      { numRuns: 1000, interruptAfterTimeLimit: 5000 },
    );
  });
});
