import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { repoRoot, startProcess } from '@broadcast-ops/core/testing';
import { record, startTestBridge } from '../helpers.ts';
import { waitFor } from '@broadcast-ops/core/testing';

test('the example app connects, prints the snapshot and deltas, and publishes its heartbeat', async () => {
  const t = await startTestBridge();
  const p = startProcess(process.execPath, [
    '--import',
    'tsx',
    join(repoRoot, 'examples/telemetry-bridge/tally-watcher.ts'),
    '--url',
    t.bridge.clientUrl,
    '--name',
    'Example App',
    '--seconds',
    '20',
  ]);
  try {
    t.adapter.set('fake.tally.cam1', 'red');
    const watcher = await t.client('observer');
    const r = record(watcher);
    await watcher.subscribe(['app.*.custom.heartbeat']);
    await p.waitForOutput(/connected as app\.example_app/, 20_000);
    await p.waitForOutput(/fake\.tally\.cam1\s+"red"/);
    await p.waitForOutput(/-- snapshot complete \(\d+ keys\) --/);
    t.adapter.set('fake.tally.cam1', 'green');
    await p.waitForOutput(/fake\.tally\.cam1\s+"green"/);
    await waitFor(
      () => r.all.some((x) => x.type === 'state' && x.m['path'] === 'app.example_app.custom.heartbeat'),
      {
        timeoutMs: 5000,
        what: 'heartbeat from the example',
      },
    );
    const exit = await p.stop('SIGTERM');
    assert.equal(exit.code, 0);
  } finally {
    await p.stop('SIGKILL');
    await t.close();
  }
});
