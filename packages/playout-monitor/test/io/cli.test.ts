import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { freePort, repoRoot, startProcess, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { health, makeConfig, startMonitor, waitDevice } from '../helpers.ts';

const BIN = join(repoRoot, 'packages/playout-monitor/bin/playout-monitor.mjs');

test('help lists the commands; a bad config exits 2 naming the key', async () => {
  const help = startProcess(process.execPath, [BIN, 'help']);
  assert.equal((await help.exited).code, 0);
  assert.match(help.output(), /simulate <casparcg\|vmix\|hyperdeck>/);
  assert.match(help.output(), /--with-simulators/);
  const dir = tempDir('pm-cli-');
  try {
    const file = join(dir.path, 'bad.json');
    writeFileSync(file, JSON.stringify({ settings: { webSocketPrt: 1 }, servers: [] }));
    const bad = startProcess(process.execPath, [BIN, '--config', file], {
      env: { PLAYOUT_MONITOR_DATA_DIR: dir.path },
    });
    const r = await bad.exited;
    assert.equal(r.code, 2);
    assert.match(bad.output(), /unknown key "settings.webSocketPrt"/);
  } finally {
    dir.remove();
  }
});

test('--with-simulators (the npm start demo): all three devices connect; SIGTERM exits 0', async () => {
  const dir = tempDir('pm-cli-');
  // The CasparCG OSC input is UDP: its port must be free for both.
  const [http, osc, vmix, deck] = [
    await freePort('tcp'),
    await freePort('both'),
    await freePort('tcp'),
    await freePort('tcp'),
  ];
  const file = join(dir.path, 'demo.json');
  writeFileSync(
    file,
    JSON.stringify({
      settings: { webSocketPort: http, emberPlusPort: 0, bindAddress: '127.0.0.1' },
      servers: [
        { id: 1, name: 'CasparCG', type: 'osc_player', ip: '127.0.0.1', port: osc },
        { id: 2, name: 'vMix', type: 'http_mixer', ip: '127.0.0.1', port: vmix },
        { id: 3, name: 'Deck', type: 'tcp_recorder', ip: '127.0.0.1', port: deck },
      ],
    }),
  );
  const proc = startProcess(process.execPath, [BIN, '--config', file, '--with-simulators'], {
    env: { PLAYOUT_MONITOR_DATA_DIR: dir.path },
  });
  try {
    const url = `http://127.0.0.1:${http}`;
    const h = await waitFor(
      async () => {
        const r = await health(url);
        return r.devices.connected === 3 && r.devices.list.every((d) => d.state === 'play') ? r : undefined;
      },
      { timeoutMs: 45_000, what: 'three connected, playing demo devices' },
    );
    assert.equal(h.status, 'healthy');
    // First start: a token is generated, kept 0600 in the data directory, and printed once with the page.
    const m = /Control page: (http:\/\/\S+\/control\.html)#token=(\S+)/.exec(proc.output());
    assert.ok(m, `the control page URL with the token is printed: ${proc.output().slice(-1500)}`);
    assert.equal(statSync(join(dir.path, 'admin-token')).mode & 0o777, 0o600);
    const simulate = (headers: Record<string, string>): Promise<Response> =>
      fetch(`${url}/api/devices/3/simulate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ state: 'stop' }),
      });
    assert.equal((await simulate({})).status, 401);
    assert.equal((await simulate({ authorization: `Bearer ${m[2] ?? ''}` })).status, 200);
    const r = await proc.stop('SIGTERM');
    assert.equal(r.code, 0, proc.output().slice(-2000));
  } finally {
    await proc.stop('SIGKILL');
    dir.remove();
  }
});

test('`simulate hyperdeck` is a real peer driven from stdin', async () => {
  const child = spawn(process.execPath, [BIN, 'simulate', 'hyperdeck', '--port', '0'], {
    cwd: repoRoot,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  let monitor: Awaited<ReturnType<typeof startMonitor>>['monitor'] | undefined;
  try {
    // The simulator is killed whatever fails below (a leaked child would hold the test file open).
    const port = Number(
      (await waitFor(() => /127\.0\.0\.1:(\d+)/.exec(out), { timeoutMs: 10_000, what: 'simulator port' }))[1],
    );
    ({ monitor } = await startMonitor(
      makeConfig([{ id: 1, name: 'Deck', type: 'tcp_recorder', ip: '127.0.0.1', port, pollIntervalMs: 100 }]),
    ));
    await waitDevice(monitor, 1, (s) => s.connected);
    child.stdin.write('play 2\n');
    await waitDevice(monitor, 1, (s) => s.state === 'play' && s.filename === 'B-Roll 02.mov');
    child.stdin.write('record\n');
    await waitDevice(monitor, 1, (s) => s.state === 'rec');
    child.stdin.write('quit\n');
    assert.equal(await exited, 0);
    await waitDevice(monitor, 1, (s) => s.state === 'offline');
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await monitor?.close();
  }
});
