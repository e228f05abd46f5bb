// TSL UMD destinations are independent: a name that does not resolve (RFC 2606 reserves `.invalid`)
// beside a good destination; the good one keeps receiving and /health names the bad one with the reason;
// the same change through the API is refused with 400 before anything is saved; SIGTERM sends the final
// packets (every tally off) to every destination; packing is one display message per packet by default.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { expectDecoded, repoRoot, startProcess, tempDir } from '@broadcast-ops/core/testing';
import { decodeTslPacket } from '../../src/protocol/tsl-umd.ts';
import { HyperdeckSimulator } from '@broadcast-ops/simulators/playout';
import { deckEntry, startRig, udpReceiver, until } from '../outputs/helpers.ts';

const BAD_HOST = 'tally-umd.invalid';

interface TslHealth {
  protocols: {
    tslUmd: { running: boolean; failing: { host: string; port: number; error: string }[] };
  };
}

test('an unresolvable destination beside a good one: the good one keeps receiving; /health names the bad one', async () => {
  const good = await udpReceiver();
  const rig = await startRig(
    2,
    {
      tslUmdDestinations: [
        { host: BAD_HOST, port: 4003 },
        { host: '127.0.0.1', port: good.port },
      ],
    },
    { tslRefreshMs: 50 },
  );
  try {
    rig.sims[0]!.play(1);
    await until(
      () =>
        good.packets.some((p) => {
          const d = decodeTslPacket(p.data);
          return d.ok && d.value.messages.some((m) => m.index === 1 && (m.control & 0x03) === 1);
        }) || undefined,
      5000,
      'the good destination shows deck 1 red',
    );
    const n = good.packets.length;
    await until(() => good.packets.length > n + 5 || undefined, 3000, 'the refresh keeps arriving');
    const health = (await (await fetch(`${rig.url}/health`)).json()) as TslHealth;
    assert.equal(health.protocols.tslUmd.running, true, 'TSL runs (one destination works)');
    assert.equal(health.protocols.tslUmd.failing.length, 1);
    assert.equal(health.protocols.tslUmd.failing[0]?.host, BAD_HOST);
    assert.match(
      health.protocols.tslUmd.failing[0]?.error ?? '',
      /cannot resolve tally-umd\.invalid \(ENOTFOUND|EAI_AGAIN\)/,
    );
  } finally {
    await rig.close();
    await good.close();
  }
});

test('the same destination through PUT /api/settings is refused with 400 and the file is unchanged', async () => {
  const good = await udpReceiver();
  const rig = await startRig(1, { tslUmdDestinations: [{ host: '127.0.0.1', port: good.port }] });
  try {
    const before = readFileSync(rig.configPath, 'utf8');
    const res = await fetch(`${rig.url}/api/settings`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        tslUmdDestinations: [
          { host: BAD_HOST, port: 4003 },
          { host: '127.0.0.1', port: good.port },
        ],
      }),
    });
    assert.equal(res.status, 400);
    const body = (await res.json()) as { error: string; message: string };
    assert.equal(body.error, 'CONFIG_INVALID');
    assert.match(body.message, /tslUmdDestinations\.0\.host: cannot resolve tally-umd\.invalid/);
    assert.equal(readFileSync(rig.configPath, 'utf8'), before, 'the file is unchanged');
    for (const bad of [
      [{ host: '999.999.999.999', port: 4003 }],
      [{ host: '127.0.0.1', port: 0 }],
      [{ host: '127.0.0.1/api?x= ; rm -rf /', port: 4003 }],
    ]) {
      const r = await fetch(`${rig.url}/api/settings`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ tslUmdDestinations: bad }),
      });
      assert.equal(r.status, 400, JSON.stringify(bad));
    }
    assert.equal(readFileSync(rig.configPath, 'utf8'), before, 'the file is still unchanged');
  } finally {
    await rig.close();
    await good.close();
  }
});

test('device addresses: an invalid IPv4, port 0 and a URL fragment are refused', async () => {
  const rig = await startRig(1);
  try {
    for (const bad of [
      { ip: '999.999.999.999' },
      { ip: '127.0.0.1', port: 0 },
      { ip: '127.0.0.1/api?x= ; rm -rf /' },
    ]) {
      const r = await fetch(`${rig.url}/api/devices`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'X', type: 'http_mixer', ...bad }),
      });
      assert.equal(r.status, 400, JSON.stringify(bad));
    }
  } finally {
    await rig.close();
  }
});

test('SIGTERM: the monitor sends every device tally-off to every destination, one display message per packet', async () => {
  const a = await udpReceiver();
  const b = await udpReceiver();
  const sims = [new HyperdeckSimulator({ port: 0 }), new HyperdeckSimulator({ port: 0 })];
  const dir = tempDir('playout-tsl-final-');
  try {
    const servers = [deckEntry(1, await sims[0]!.start()), deckEntry(2, await sims[1]!.start())];
    sims[0]!.play(1);
    sims[1]!.record();
    const config = join(dir.path, 'config.json');
    writeFileSync(
      config,
      JSON.stringify({
        settings: {
          webSocketPort: 0,
          emberPlusPort: 0,
          bindAddress: '127.0.0.1',
          tslUmdDestinations: [
            { host: '127.0.0.1', port: a.port },
            { host: 'localhost', port: b.port },
          ],
        },
        servers,
      }),
    );
    const monitor = startProcess(
      process.execPath,
      [join(repoRoot, 'packages/playout-monitor/bin/playout-monitor.mjs'), 'run', '--config', config],
      { env: { PLAYOUT_MONITOR_DATA_DIR: dir.path } },
    );
    try {
      const lit = (r: typeof a, index: number): boolean =>
        r.packets.some((p) => {
          const d = decodeTslPacket(p.data);
          return d.ok && d.value.messages.some((m) => m.index === index && (m.control & 0x03) !== 0);
        });
      await until(
        () => (lit(a, 1) && lit(a, 2) && lit(b, 1) && lit(b, 2)) || undefined,
        20_000,
        'tallies lit',
      );
      for (const r of [a, b]) {
        for (const p of r.packets) {
          const d = expectDecoded(decodeTslPacket(p.data));
          assert.equal(d.messages.length, 1, 'one display message per packet (default packing)');
        }
      }
      const marks = [a.packets.length, b.packets.length];
      const exit = await monitor.stop('SIGTERM');
      assert.equal(exit.code, 0, monitor.output().slice(-2000));
      await new Promise((r) => setTimeout(r, 200));
      for (const [k, r] of [a, b].entries()) {
        const last = new Map<number, number>();
        for (const p of r.packets.slice(marks[k])) {
          const d = decodeTslPacket(p.data);
          if (d.ok) for (const m of d.value.messages) last.set(m.index, m.control);
        }
        assert.deepEqual(
          [...last.entries()].sort(),
          [
            [1, 0xc0],
            [2, 0xc0],
          ],
          `destination ${k}: the last word for every device is tally off`,
        );
      }
    } finally {
      await monitor.stop('SIGKILL');
    }
  } finally {
    for (const s of sims) await s.close();
    await a.close();
    await b.close();
    dir.remove();
  }
});
