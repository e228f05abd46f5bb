// TSL UMD v5.0 over UDP from the running service: each device's state on its display, the periodic refresh,
// a refusing destination. The encoder and decoder against the published vectors: test/protocol/tsl-umd.test.ts.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { expectDecoded } from '@broadcast-ops/core/testing';
import { decodeTslPacket } from '../../src/protocol/tsl-umd.ts';
import { startRig, udpReceiver, until, type Rig } from '../outputs/helpers.ts';

let rig: Rig;
let rx: Awaited<ReturnType<typeof udpReceiver>>;
before(async () => {
  rx = await udpReceiver();
  rig = await startRig(2, {
    tslUmdDestinations: [{ host: '127.0.0.1', port: rx.port }],
    tslUmdScreen: 3,
  });
});
after(async () => {
  await rig?.close();
  await rx?.close();
});

function lastControl(index: number, since = 0): number | undefined {
  for (let i = rx.packets.length - 1; i >= since; i--) {
    const p = rx.packets[i];
    if (!p) continue;
    const d = decodeTslPacket(p.data);
    if (!d.ok) continue;
    const m = d.value.messages.find((x) => x.index === index);
    if (m) return m.control;
  }
  return undefined;
}

test('UDP: a HyperDeck playing, recording, stopping and going away is sent as red, amber, off, dimmed', async () => {
  // Connected and stopped first (each deck's display index is its configuration id, text its name).
  await until(() => rig.service.view.get(1)?.state === 'stop' || undefined, 5000, 'deck 1 connected');
  const deck = rig.sims[0]!;
  for (const [act, control] of [
    [() => deck.play(1), 0xc5],
    [() => deck.record(), 0xcf],
    [() => deck.stop(), 0xc0],
  ] as const) {
    const from = rx.packets.length;
    act();
    // Bound: well under a second on loopback; the bench measures the real latency.
    await until(
      () => lastControl(1, from) === control || undefined,
      2000,
      `control 0x${control.toString(16)}`,
    );
  }
  const all = rx.packets.map((p) => expectDecoded(decodeTslPacket(p.data)));
  for (const d of all) {
    assert.equal(d.screen, 3);
    assert.equal(d.version, 0);
  }
  const named = all.flatMap((d) => d.messages).find((m) => m.index === 1);
  assert.equal(named?.text, 'Deck 1');
  const from = rx.packets.length;
  await deck.close();
  await until(() => lastControl(1, from) === 0x40 || undefined, 5000, 'offline, dimmed');
});

test('UDP: the periodic refresh repeats every device without any change', async () => {
  const from = rx.packets.length;
  await until(
    () => {
      const seen = new Set<number>();
      for (const p of rx.packets.slice(from)) {
        const d = decodeTslPacket(p.data);
        if (d.ok) for (const m of d.value.messages) seen.add(m.index);
      }
      return (seen.has(1) && seen.has(2)) || undefined;
    },
    3000,
    'refresh of both displays',
  );
});

test('UDP: a destination that refuses (nothing listening) does not stop the others', async () => {
  const dead = await udpReceiver();
  const deadPort = dead.port;
  await dead.close(); // the kernel now answers ICMP port unreachable
  const live = await udpReceiver();
  const own = await startRig(1, {
    tslUmdDestinations: [
      { host: '127.0.0.1', port: deadPort },
      { host: '127.0.0.1', port: live.port },
    ],
  });
  try {
    // Several refresh rounds: the refused sends are reported (and counted), the live receiver keeps getting packets.
    await until(() => live.packets.length >= 8 || undefined, 5000, 'packets keep arriving');
    const from = live.packets.length;
    await until(() => live.packets.length >= from + 4 || undefined, 5000, 'still arriving');
    assert.ok(own.service.health().protocols.tslUmd.running);
  } finally {
    await own.close();
    await live.close();
  }
});
