import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import { test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { waitFor } from '@broadcast-ops/core/testing';
import { PTP_PRIMARY_GROUP, decodePtp, encodePtp } from '../../src/protocol/ptp.ts';
import { PtpAnnouncer, type PtpConfig } from '../../src/io/ptp.ts';
import { freePort } from '../helpers/nts.ts';
import { loopbackPtpConfig } from '../helpers/ptp.ts';

/**
 * `ptp.listen_only` (docs/ptp.md "BMCA"): on loopback, a port that must never be master hears a foreign
 * master's Announces, names it as the grandmaster (with its ts-refclk) and sends no Announce and no Sync,
 * long after the listening period; without `listen_only` the same port, worse than nobody, would have become
 * master within that time.
 */
const FOREIGN = 'aabbccfffe000042';

function config(listenOnly: boolean): PtpConfig {
  return loopbackPtpConfig({ log_min_delay_req_interval: -3, listen_only: listenOnly });
}

async function run(
  listenOnly: boolean,
  foreign: boolean,
): Promise<{ ours: number; status: ReturnType<PtpAnnouncer['status']> }> {
  const eventPort = await freePort('udp');
  const generalPort = await freePort('udp');
  const rx: Socket = createSocket({ type: 'udp4', reuseAddr: true });
  await new Promise<void>((r) => rx.bind(generalPort, () => r()));
  rx.addMembership(PTP_PRIMARY_GROUP, '127.0.0.1');
  const tx: Socket = createSocket('udp4');
  await new Promise<void>((r) => tx.bind(0, '127.0.0.1', () => r()));
  tx.setMulticastInterface('127.0.0.1');
  tx.setMulticastLoopback(true);
  const announcer = new PtpAnnouncer({
    config: config(listenOnly),
    servedUnixMs: (perf) => Date.now() + ((perf ?? performance.now()) - performance.now()),
    quality: () => ({
      clockClass: 6,
      clockAccuracy: 0x28,
      timeSource: 0x20,
      flags1: 0,
      currentUtcOffset: 37,
    }),
    logger: silentLogger(),
    eventPort,
    generalPort,
  });
  let ours = 0;
  let seq = 0;
  const timer = setInterval(() => {
    if (!foreign) return;
    const buf = encodePtp({
      type: 'announce',
      header: {
        domainNumber: 0,
        flags: [0, 0],
        correction: 0n,
        sourcePortIdentity: { clockIdentity: FOREIGN, portNumber: 1 },
        sequenceId: seq++,
        logMessageInterval: -3,
      },
      announce: {
        originTimestamp: { seconds: 0, nanoseconds: 0 },
        currentUtcOffset: 37,
        grandmasterPriority1: 200,
        clockClass: 248,
        clockAccuracy: 0xfe,
        offsetScaledLogVariance: 0xffff,
        grandmasterPriority2: 128,
        grandmasterIdentity: FOREIGN,
        stepsRemoved: 0,
        timeSource: 0xa0,
      },
    });
    tx.send(buf, generalPort, PTP_PRIMARY_GROUP);
  }, 125);
  try {
    await announcer.start();
    const ourId = announcer.clockIdentity;
    rx.on('message', (buf) => {
      const d = decodePtp(buf);
      if (d.ok && d.value.header.sourcePortIdentity.clockIdentity === ourId) ours++;
    });
    // Listening lasts 2 × 125 ms; wait ten times that.
    await new Promise((r) => setTimeout(r, 2500));
    if (foreign)
      await waitFor(() => announcer.status().grandmaster, {
        timeoutMs: 5000,
        what: 'the foreign master heard',
      });
    return { ours, status: announcer.status() };
  } finally {
    clearInterval(timer);
    await announcer.close();
    rx.close();
    tx.close();
  }
}

test('a listener names the master it hears and never announces, even as the better clock', async () => {
  const r = await run(true, true);
  assert.equal(r.status.port_state, 'LISTENING');
  assert.equal(r.status.listen_only, true);
  assert.equal(r.status.grandmaster?.identity, 'aabbcc.fffe.000042');
  assert.equal(r.status.grandmaster?.ours, false);
  assert.equal(r.status.ts_refclk, 'ptp=IEEE1588-2008:AA-BB-CC-FF-FE-00-00-42:0');
  assert.match(r.status.state_reason, /listener; best master aabbcc\.fffe\.000042/);
  assert.equal(r.ours, 0, 'no Announce, Sync or Follow_Up from the listener');
});

test('the same port without listen_only, better than that master, is master and announces', async () => {
  const r = await run(false, true);
  assert.equal(r.status.port_state, 'MASTER');
  assert.equal(r.status.grandmaster?.ours, true);
  assert.ok(r.ours > 5, `${r.ours} messages of ours`);
});
