import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { expectDecoded } from '@broadcast-ops/core/testing';
import { ClockFilter } from '../../src/domain/clock-filter.ts';
import { NtpPeer, type PeerConfig } from '../../src/domain/ntp-peer.ts';
import { respond, type ServerSystemState } from '../../src/domain/ntp-responder.ts';
import { intersect, rootDistance, selectReference } from '../../src/domain/selection.ts';
import {
  asciiRefId,
  decodeNtpPacket,
  encodeNtpPacket,
  writeTimestamp,
  type NtpTimestamp,
} from '../../src/protocol/ntp-packet.ts';

const capture = JSON.parse(
  readFileSync(new URL('../fixtures/chrony-packets.json', import.meta.url), 'utf8'),
) as { exchanges: { request: string; response: string }[] };

const CFG: PeerConfig = { address: '127.0.0.1:123', prefer: false, iburst: true, minpoll: 4, maxpoll: 6 };
const SERVER: ServerSystemState = {
  leap: 0,
  stratum: 2,
  precision: -20,
  referenceId: 0xc0000201,
  referenceTimestamp: { seconds: 0xeeae1900, fraction: 0 },
  rootDelayS: 0.002,
  rootDispersionS: 0.01,
  updatedAtMs: 0,
};

function ts(seconds: number): NtpTimestamp {
  const s = Math.floor(seconds);
  return { seconds: s, fraction: Math.round((seconds - s) * 2 ** 32) };
}

/** One exchange through our own responder, with the server `offset` ahead and `owd` one-way delay. */
function exchange(peer: NtpPeer, nowMs: number, t1s: number, offset: number, owd: number) {
  const req = peer.request(nowMs, ts(t1s));
  assert.ok(req);
  const out = respond(req, '127.0.0.1', ts(t1s + owd + offset), nowMs, SERVER, {});
  assert.equal(out.kind, 'reply');
  if (out.kind !== 'reply') throw new Error('no reply');
  writeTimestamp(out.packet, 40, ts(t1s + owd + offset + 0.0001));
  return peer.receive(out.packet, ts(t1s + 2 * owd + 0.0001), nowMs + 2 * owd * 1000);
}

test('request: mode 3, VN 4, poll, transmit = T1; offset and delay per RFC 5905 §8 through our responder', () => {
  const peer = new NtpPeer(CFG, 0);
  const req = peer.request(0, ts(3_900_000_000.25));
  assert.ok(req);
  const p = expectDecoded(decodeNtpPacket(req));
  assert.equal(p.mode, 3);
  assert.equal(p.version, 4);
  assert.equal(p.poll, 4);
  assert.deepEqual(p.transmitTimestamp, ts(3_900_000_000.25));
  const peer2 = new NtpPeer(CFG, 0);
  const r = exchange(peer2, 0, 3_900_000_000, 0.0123, 0.0004);
  assert.equal(r.kind, 'sample');
  if (r.kind !== 'sample') return;
  assert.ok(Math.abs(r.offsetS - 0.0123) < 1e-6, `offset ${r.offsetS}`);
  assert.ok(Math.abs(r.delayS - 0.0008) < 1e-6, `delay ${r.delayS}`);
  assert.equal(r.stratum, 2);
  const st = peer2.status();
  assert.equal(st.reach, 1);
  assert.equal(st.usable, true);
  assert.equal(st.rootDelayS > 0.0019, true);
});

test('a captured chrony reply is accepted only when its origin matches our transmit bit for bit', () => {
  const ex = capture.exchanges[0]!;
  const chronyReq = expectDecoded(decodeNtpPacket(Buffer.from(ex.request, 'hex')));
  const reply = Buffer.from(ex.response, 'hex');
  const peer = new NtpPeer(CFG, 0);
  peer.request(0, { seconds: 1, fraction: 2 });
  assert.deepEqual(peer.receive(reply, chronyReq.transmitTimestamp, 1), { kind: 'ignored', reason: 'bogus' });
  const peer2 = new NtpPeer(CFG, 0);
  // Pretend we sent chrony's transmit value: now the origin matches.
  peer2.request(0, chronyReq.transmitTimestamp);
  const r = peer2.receive(reply, expectDecoded(decodeNtpPacket(reply)).transmitTimestamp, 1);
  assert.equal(r.kind, 'sample');
  if (r.kind === 'sample') assert.equal(r.stratum, 8);
  assert.deepEqual(peer2.receive(reply, chronyReq.transmitTimestamp, 2), {
    kind: 'ignored',
    reason: 'duplicate',
  });
  assert.deepEqual(peer2.receive(Buffer.from(ex.request, 'hex'), chronyReq.transmitTimestamp, 2), {
    kind: 'ignored',
    reason: 'not_server',
  });
});

test('iburst spacing, reach register, poll adaptation within minpoll..maxpoll, misses slow nothing', () => {
  const peer = new NtpPeer(CFG, 0);
  let now = 0;
  let t = 3_900_000_000;
  const gaps: number[] = [];
  for (let i = 0; i < 14; i++) {
    const before = peer.nextPollMs;
    now = before;
    t += 1;
    exchange(peer, now, t, 0.001, 0.0002);
    gaps.push((peer.nextPollMs - before) / 1000);
  }
  assert.deepEqual(gaps.slice(0, 4), [1, 1, 1, 1], 'iburst: 4 packets 1 s apart');
  // Four good samples double the poll (the burst counts), up to maxpoll 6 = 64 s and no further.
  assert.deepEqual(gaps, [1, 1, 1, 1, 32, 32, 32, 32, 64, 64, 64, 64, 64, 64]);
  assert.equal(peer.status().reach, 0xff);
  // Now the peer goes silent: each miss shifts a zero in and lowers the poll toward minpoll.
  for (let i = 0; i < 8; i++) {
    now = peer.nextPollMs;
    peer.request(now, ts((t += 64)));
  }
  const st = peer.status();
  assert.equal(st.reach, 0);
  assert.equal(st.usable, false);
  assert.equal(st.poll, 4);
  assert.ok(st.errorCount >= 7);
});

function kodReply(req: Buffer, code: string, poll = 0): Buffer {
  const p = expectDecoded(decodeNtpPacket(req));
  return encodeNtpPacket({
    ...p,
    leap: 3,
    mode: 4,
    stratum: 0,
    poll,
    referenceId: asciiRefId(code),
    originTimestamp: p.transmitTimestamp,
    transmitTimestamp: { seconds: 0, fraction: 0 },
  });
}

test('KoD RATE slows the peer down for good; KoD DENY demobilises it', () => {
  const peer = new NtpPeer({ ...CFG, iburst: false }, 0);
  const req = peer.request(0, ts(3_900_000_000))!;
  assert.deepEqual(peer.receive(kodReply(req, 'RATE', 8), ts(3_900_000_000.001), 1), {
    kind: 'kod',
    code: 'RATE',
  });
  assert.equal(peer.poll, 8, 'at least the server-advertised poll');
  assert.ok(peer.nextPollMs >= 256_000);
  assert.equal(peer.status().reach, 0, 'a kiss is not a time sample');
  const peer2 = new NtpPeer(CFG, 0);
  const req2 = peer2.request(0, ts(3_900_000_000))!;
  assert.deepEqual(peer2.receive(kodReply(req2, 'DENY'), ts(3_900_000_000.001), 1), {
    kind: 'kod',
    code: 'DENY',
  });
  assert.equal(peer2.denied, 'DENY');
  assert.equal(peer2.request(1e9, ts(3_900_001_000)), undefined, 'no more requests');
  assert.equal(peer2.status().usable, false);
});

test('an unsynchronised server (LI 3) is reachable but not usable', () => {
  const peer = new NtpPeer(CFG, 0);
  const req = peer.request(0, ts(3_900_000_000))!;
  const out = respond(req, '127.0.0.1', ts(3_900_000_000), 0, { ...SERVER, leap: 3, stratum: 0 }, {});
  assert.equal(out.kind, 'reply');
  if (out.kind !== 'reply') return;
  writeTimestamp(out.packet, 40, ts(3_900_000_000.0001));
  // stratum 0 + mode 4 reads as a kiss with code "INIT"-like refid; a LI 3 stratum 16-ish reply is unsynchronised.
  const r = peer.receive(out.packet, ts(3_900_000_000.0002), 1);
  assert.ok(r.kind === 'kod' || r.kind === 'unsynchronised');
  assert.equal(peer.status().usable, false);
});

test('holdPoll keeps the poll at minpoll (until LOCKED), then it adapts again', () => {
  const peer = new NtpPeer({ ...CFG, iburst: false }, 0);
  peer.holdPoll = true;
  let now = 0;
  let t = 3_900_000_000;
  const gaps: number[] = [];
  for (let i = 0; i < 10; i++) {
    const before = peer.nextPollMs;
    now = before;
    t += 16;
    exchange(peer, now, t, 0.001, 0.0002);
    gaps.push((peer.nextPollMs - before) / 1000);
  }
  assert.deepEqual(gaps, Array(10).fill(16), 'minpoll 4 = 16 s held');
  peer.holdPoll = false;
  for (let i = 0; i < 5; i++) {
    const before = peer.nextPollMs;
    now = before;
    t += 16;
    exchange(peer, now, t, 0.001, 0.0002);
  }
  assert.equal(peer.poll, 5, 'four more good samples double it');
});

test('freezePoll delays the raise without losing the count; a held-back sample restarts the count', () => {
  const peer = new NtpPeer({ ...CFG, iburst: false }, 0);
  let t = 3_900_000_000;
  const step = (): number => {
    const before = peer.nextPollMs;
    t += 16;
    exchange(peer, before, t, 0.001, 0.0002);
    return (peer.nextPollMs - before) / 1000;
  };
  peer.freezePoll = true;
  const frozen = Array.from({ length: 8 }, step);
  assert.deepEqual(frozen, Array(8).fill(16), 'no raise while the estimate is not stable');
  peer.freezePoll = false;
  assert.equal(step(), 32, 'raised as soon as it may be: the good samples were counted');
  // Three good samples, then one the clock held back: the count starts again.
  for (let i = 0; i < 3; i++) assert.equal(step(), 32);
  peer.sampleHeldBack();
  for (let i = 0; i < 4; i++) assert.equal(step(), 32, `sample ${i} after the held-back one`);
  assert.equal(step(), 64, 'four good samples after it');
});

test('lastRxMs is the last good reply (chronyc LastRx), not the age of the filter’s chosen sample', () => {
  const peer = new NtpPeer(CFG, 0);
  let now = 0;
  let t = 3_900_000_000;
  // The first reply has the lowest delay: the filter keeps choosing it while later ones arrive slower.
  exchange(peer, now, t, 0.001, 0.0002);
  for (let i = 1; i <= 5; i++) {
    const next = peer.status().nextPollMs;
    t += (next - now) / 1000;
    now = next;
    exchange(peer, now, t, 0.001, 0.002);
  }
  assert.ok(now > 3000);
  const st = peer.status();
  assert.equal(st.lastSampleMs, 0.2, 'the chosen sample is the first one');
  assert.equal(st.lastRxMs, now + 4, 'the last good reply: the one received 4 ms after its request');
});

test('clock filter picks the minimum-delay sample; jitter is the RMS spread; empty stages are not MAXDISP', () => {
  const f = new ClockFilter(2 ** -20);
  const outs = [
    f.add({ offsetS: 0.001, delayS: 0.01, dispersionS: 1e-5, atMs: 0 }),
    f.add({ offsetS: 0.002, delayS: 0.002, dispersionS: 1e-5, atMs: 1000 }),
    f.add({ offsetS: 0.005, delayS: 0.02, dispersionS: 1e-5, atMs: 2000 }),
  ];
  assert.equal(outs[1]!.offsetS, 0.002);
  assert.equal(outs[2]!.offsetS, 0.002, 'the low-delay sample still wins');
  assert.ok(outs[2]!.jitterS > 0.001 && outs[2]!.jitterS < 0.003);
  // Three samples: the dispersion sums their aged dispersions only (no MAXDISP padding for empty stages).
  assert.ok(outs[2]!.dispersionS < 0.001, `dispersion ${outs[2]!.dispersionS}`);
});

test('selection: no selection before enough samples; MINDISP floor; MAXDIST fit test; prefer only among truechimers', () => {
  const base = {
    kind: 'ntp' as const,
    prefer: false,
    usable: true,
    stratum: 2,
    leap: 0,
    rootDelayS: 0,
    rootDispersionS: 0,
    delayS: 0.0001,
    dispersionS: 0.0001,
    jitterS: 0.00005,
    atMs: 0,
    runSamples: 4,
    pollLog2: 0,
  };
  const o = { minSamples: 4, nowMs: 0, current: undefined, waitForBursts: false, waitForSilent: false };
  // Root distance floors the delay term at MINDISP (10 ms): two servers 0.5 ms apart on a 100 µs path overlap.
  assert.ok(Math.abs(rootDistance({ ...base, id: 'a', offsetS: 0 }, 0) - (0.005 + 0.00015)) < 1e-9);
  const two = selectReference(
    [
      { ...base, id: 'a', offsetS: 0 },
      { ...base, id: 'b', offsetS: 0.0005 },
    ],
    o,
  );
  assert.equal(two.verdicts.get('a'), 'selected');
  assert.equal(two.verdicts.get('b'), 'candidate');
  assert.ok(Math.abs(two.selectionJitterS - (0.0005 + 0.00005)) < 1e-9, 'distance + the other jitter');
  // A usable server still in its first samples is not selectable, but the advertised bound covers it: a
  // client may compare with it as soon as replies say synchronised.
  const joining = selectReference(
    [
      { ...base, id: 'a', offsetS: 0 },
      { ...base, id: 'b', offsetS: 0.0005, runSamples: 2 },
    ],
    { ...o, current: 'a' },
  );
  assert.equal(joining.selected, 'a');
  assert.equal(joining.verdicts.get('b'), 'too_few_samples');
  assert.ok(Math.abs(joining.selectionJitterS - (0.0005 + 0.00005)) < 1e-9, 'covers the joining server');
  // Too few samples: neither selectable nor preferable.
  const early = selectReference([{ ...base, id: 'p', prefer: true, offsetS: 0, runSamples: 3 }], o);
  assert.equal(early.selected, undefined);
  assert.equal(early.verdicts.get('p'), 'too_few_samples');
  // MAXDIST: a root distance above 1 s (+ PHI·poll) is unfit.
  const far = selectReference([{ ...base, id: 'f', offsetS: 0, rootDispersionS: 1.2 }], o);
  assert.equal(far.verdicts.get('f'), 'unfit');
  // A preferred falseticker loses to the truechimers.
  const liar = selectReference(
    [
      { ...base, id: 'a', offsetS: 0 },
      { ...base, id: 'b', offsetS: 0.001 },
      { ...base, id: 'c', offsetS: -0.001 },
      { ...base, id: 'p', prefer: true, offsetS: 0.1 },
    ],
    o,
  );
  assert.equal(liar.verdicts.get('p'), 'falseticker');
  assert.notEqual(liar.selected, 'p');
  // Waiting for bursts: one source complete, another mid-burst, nothing selected yet.
  const waiting = selectReference(
    [
      { ...base, id: 'a', offsetS: 0 },
      { ...base, id: 'b', offsetS: 0, runSamples: 2 },
    ],
    { ...o, waitForBursts: true },
  );
  assert.equal(waiting.selected, undefined);
  assert.equal(waiting.waiting, true);
});

test('intersection: majority interval found, disjoint minority is a falseticker, no majority -> none', () => {
  const r = intersect([
    { id: 'a', offsetS: 0, rootDistanceS: 0.01 },
    { id: 'b', offsetS: 0.005, rootDistanceS: 0.01 },
    { id: 'c', offsetS: -0.004, rootDistanceS: 0.01 },
    { id: 'd', offsetS: 0.5, rootDistanceS: 0.01 },
  ]);
  assert.deepEqual(r.truechimers.sort(), ['a', 'b', 'c']);
  assert.deepEqual(r.falsetickers, ['d']);
  const none = intersect([
    { id: 'a', offsetS: 0, rootDistanceS: 0.001 },
    { id: 'b', offsetS: 1, rootDistanceS: 0.001 },
    { id: 'c', offsetS: 2, rootDistanceS: 0.001 },
  ]);
  assert.equal(none.truechimers.length, 0);
});
