/**
 * Hot standby with a hung primary (docs/companion.md "Hot standby"): the primary Companion simulator runs as
 * its own process and is stopped with SIGSTOP (its sockets stay open, nothing answers). With the default
 * timers (PING every 200 ms, dead after 1000 ms of silence, the standby tried at once) the adapter is
 * registered on the backup within 2 s (the bound scaled by the machine's load, the figure printed); a press
 * during the hang fails at once with the reason and is never sent, so it cannot run when the primary
 * resumes (SIGCONT: the primary's received lines show no KEY-PRESS). A press after the switch runs on the
 * backup.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { loadFactor, repoRoot, startProcess, waitFor } from '@broadcast-ops/core/testing';
import { CompanionSimulator } from '@broadcast-ops/simulators/companion';
import { DEV, rig, stateOf } from '../companion/harness.ts';

const BIN = join(repoRoot, 'packages/telemetry-bridge/bin/telemetry-bridge.mjs');
const KEY0 = `companion.device.${DEV}.key.0`;

test('hung primary (SIGSTOP): on the backup within 2 s, a press during the hang fails at once and never runs', async (t) => {
  const primary = startProcess(process.execPath, [
    BIN,
    'companion-sim',
    '--tcp-port',
    'off',
    '--ws-port',
    '0',
    '--log-lines',
  ]);
  const backup = new CompanionSimulator();
  let stopped = false;
  try {
    const m = await primary.waitForOutput(/tcp off, ws (\d+)/, 20_000);
    const priPort = Number(m[1]);
    const { ws: bakPort } = await backup.listen({ tcp: null });
    const r = await rig({
      companion: {
        hosts: [
          { host: '127.0.0.1', port: priPort },
          { host: '127.0.0.1', port: bakPort },
        ],
        // The production defaults (src/config.ts), not the harness's shortened timers.
        heartbeatInterval: 200,
        deadAfter: 1000,
        failoverDelay: 0,
        reconnectDelay: 1000,
        reconnectJitter: 500,
        connectionTimeout: 5000,
        replyTimeout: 5000,
      },
    });
    try {
      const active = (): { connected: boolean; port: number } | undefined =>
        r.get('companion.connection.active')?.value as { connected: boolean; port: number } | undefined;
      await r.until(() => stateOf(r) === 'connected' && active()?.port === priPort, 'on the primary', 10_000);
      const c = await r.client('ops');
      const pid = primary.child.pid as number;
      process.kill(pid, 'SIGSTOP');
      stopped = true;
      const hungAt = Date.now();
      // Into the hang, before it is declared dead: the link is silent.
      await new Promise((res) => setTimeout(res, 600));
      const t0 = Date.now();
      const during = await c.command('companion', KEY0, 'press').done;
      const failMs = Date.now() - t0;
      assert.equal(during.payload.status, 'failed');
      assert.match(during.payload.error?.message ?? '', /has sent nothing for \d+ ms/);
      assert.ok(failMs < 500 * loadFactor(), `failed at once (${failMs} ms)`);

      await waitFor(() => (active()?.connected === true && active()?.port === bakPort) || undefined, {
        timeoutMs: 5000,
        intervalMs: 5,
        what: 'on the backup',
      });
      const switchMs = Date.now() - hungAt;
      t.diagnostic(`hung primary → registered on the backup in ${switchMs} ms (load factor ${loadFactor()})`);
      assert.ok(switchMs < 2000 * loadFactor(), `switched in ${switchMs} ms`);
      await r.until(() => r.get(KEY0)?.stale === false, 'redrawn by the backup');

      // The primary resumes: it never received the press made during the hang.
      process.kill(pid, 'SIGCONT');
      stopped = false;
      await new Promise((res) => setTimeout(res, 1000));
      assert.doesNotMatch(primary.output(), /"line":"KEY-PRESS /, 'no KEY-PRESS ever reached the primary');
      assert.equal(backup.linesNamed('KEY-PRESS').length, 0, 'nor the backup');

      const after = await c.command('companion', KEY0, 'press').done;
      assert.equal(after.payload.status, 'completed');
      assert.equal(backup.linesNamed('KEY-PRESS').length, 2, 'down and up on the backup');
    } finally {
      await r.close();
    }
  } finally {
    if (stopped && primary.child.pid !== undefined) process.kill(primary.child.pid, 'SIGCONT');
    await primary.stop('SIGKILL');
    await backup.close();
  }
});
