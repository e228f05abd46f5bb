import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import { test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { waitFor } from '@broadcast-ops/core/testing';
import { PTP_PRIMARY_GROUP, decodePtp, type PtpMessage } from '../../src/protocol/ptp.ts';
import type { TransmitTime } from '../../src/io/kernel-tx-timestamp.ts';
import { PtpAnnouncer, type PtpConfig } from '../../src/io/ptp.ts';
import { freePort } from '../helpers/nts.ts';
import { loopbackPtpConfig } from '../helpers/ptp.ts';

/**
 * The transmit-stamp paths of the announcer's send (docs/ptp-timestamps.md "The fallback"), with the stamp
 * source injected: on loopback, Syncs and Follow_Ups caught by a member of the PTP group. The served clock is
 * Unix ms = EPOCH_MS + performance.now(), so a Follow_Up's time tells which reading it carries.
 */
const EPOCH_MS = 1_700_000_000_000;
const TAI_UTC = 37;

const config: PtpConfig = loopbackPtpConfig();

/** Follow_Up's preciseOriginTimestamp as performance.now() ms (undoing EPOCH_MS and TAI − UTC). */
function followUpPerf(m: PtpMessage): number | undefined {
  if (m.type !== 'follow_up') return undefined;
  const ts = m.timestamp;
  return (ts.seconds - TAI_UTC) * 1000 + ts.nanoseconds / 1e6 - EPOCH_MS;
}

async function run(
  stamp: (sentFromMs: number, call: number) => number | undefined,
): Promise<{ announcer: PtpAnnouncer; sentFrom: number[]; followUps: number[] }> {
  const eventPort = await freePort('udp');
  const generalPort = await freePort('udp');
  const rx: Socket = createSocket({ type: 'udp4', reuseAddr: true });
  await new Promise<void>((r) => rx.bind(generalPort, () => r()));
  rx.addMembership(PTP_PRIMARY_GROUP, '127.0.0.1');
  const followUps: number[] = [];
  rx.on('message', (buf) => {
    const d = decodePtp(buf);
    if (d.ok) {
      const at = followUpPerf(d.value);
      if (at !== undefined) followUps.push(at);
    }
  });
  const sentFrom: number[] = [];
  let call = 0;
  const fake: TransmitTime = {
    kernel: true,
    rejected: 0,
    beforeSend: () => {
      call = 0;
    },
    sent: (from) => {
      if (call === 0) sentFrom.push(from);
      return stamp(from, call++);
    },
  };
  const announcer = new PtpAnnouncer({
    config,
    servedUnixMs: (perf) => EPOCH_MS + (perf ?? performance.now()),
    quality: () => ({
      clockClass: 248,
      clockAccuracy: 0xfe,
      timeSource: 0xa0,
      flags1: 0,
      currentUtcOffset: TAI_UTC,
    }),
    logger: silentLogger(),
    transmit: () => fake,
    eventPort,
    generalPort,
  });
  try {
    await announcer.start();
    assert.equal(announcer.status().tx_timestamps, 'kernel');
    await waitFor(() => followUps.length >= 5, { timeoutMs: 20_000, intervalMs: 20, what: '5 Follow_Ups' });
  } finally {
    await announcer.close();
    rx.close();
  }
  return { announcer, sentFrom, followUps };
}

test('a transmit stamp queued after send() returned is read on a later turn and carried by Follow_Up', async () => {
  // Not there when send() returns; there on the next turn (read before the wait's bound is looked at, so
  // a loaded machine cannot turn it into a fallback), 0.25 ms after the reading before send().
  const r = await run((from, call) => (call >= 1 ? from + 0.25 : undefined));
  assert.equal(r.announcer.counters.txStampFallbacks, 0);
  assert.ok(r.announcer.counters.txKernelStamps >= 5);
  for (let i = 0; i < 5; i++) assert.ok(Math.abs(r.followUps[i]! - (r.sentFrom[i]! + 0.25)) < 0.001);
});

test('no transmit stamp within the bound: Follow_Up carries the reading before send(), counted as a fallback', async () => {
  const r = await run(() => undefined);
  assert.equal(r.announcer.counters.txKernelStamps, 0);
  assert.ok(r.announcer.counters.txStampFallbacks >= 5);
  assert.equal(r.announcer.status().tx_timestamp_fallbacks, r.announcer.counters.txStampFallbacks);
  for (let i = 0; i < 5; i++) assert.ok(Math.abs(r.followUps[i]! - r.sentFrom[i]!) < 0.001);
});
