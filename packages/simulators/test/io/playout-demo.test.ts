/**
 * `--with-simulators` (npm start's demo): startDemoSimulators starts one simulator per device on a loopback
 * address, and sends a CasparCG's OSC to the port the monitor bound, not the configured one. Real sockets on
 * 127.0.0.1.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { connect } from 'node:net';
import { once } from 'node:events';
import { decodeOsc, oscMessages } from '@broadcast-ops/playout-monitor/protocol';
import { startDemoSimulators } from '../../src/playout/demo.ts';

test('one simulator per loopback device; OSC goes to the bound port; other devices are left alone', async (t) => {
  const monitor = createSocket('udp4');
  await new Promise<void>((resolve) => monitor.bind(0, '127.0.0.1', resolve));
  const boundOsc = monitor.address().port;
  const sims = await startDemoSimulators(
    [
      { type: 'osc_player', ip: '127.0.0.1', port: 6250, channel: 3, layer: 20, framerate: 25 },
      { type: 'tcp_recorder', ip: '127.0.0.1', port: 0 },
      // A real device elsewhere and a type no simulator plays: nothing is started for them.
      { type: 'http_mixer', ip: '192.0.2.10', port: 8088 },
      { type: 'ember_provider', ip: '127.0.0.1', port: 9000 },
    ],
    new Map([[6250, boundOsc]]),
  );
  t.after(async () => {
    for (const s of sims) await s.close();
    monitor.close();
  });

  assert.deepEqual(
    sims.map((s) => s.kind),
    ['casparcg', 'hyperdeck'],
  );
  const [caspar, deck] = sims;
  assert.match(
    caspar!.describe(),
    new RegExp(`25 fps, channel 3 layer 20, from 127\\.0\\.0\\.1 to 127\\.0\\.0\\.1:${boundOsc}$`),
  );

  // The CasparCG simulator's ticks reach the bound port, as channel 3.
  const [datagram] = (await once(monitor, 'message', { signal: AbortSignal.timeout(10_000) })) as [Buffer];
  const decoded = decodeOsc(datagram);
  assert.ok(decoded.ok, 'the simulator sends valid OSC');
  const addresses = oscMessages(decoded.value.packet).map((m) => m.address);
  assert.ok(addresses.includes('/channel/3/framerate'), addresses.join(' '));

  // The HyperDeck simulator listens on a port of its own and greets like a deck (500 connection info).
  const port = Number(/:(\d+)$/.exec(deck!.describe())?.[1]);
  assert.ok(port > 0, deck!.describe());
  const socket = connect(port, '127.0.0.1');
  t.after(() => socket.destroy());
  const [greeting] = (await once(socket, 'data', { signal: AbortSignal.timeout(10_000) })) as [Buffer];
  assert.match(greeting.toString('utf8'), /^500 connection info:/);
});
