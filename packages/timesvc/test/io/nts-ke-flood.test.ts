import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { createLogger, metricValue } from '@broadcast-ops/core';
import { requireTool, startProcess, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { configSchema } from '../../src/config.ts';
import { createTimesvc } from '../../src/io/service.ts';
import { chronyNtsClientConf, makeCertificate } from '../helpers/nts.ts';

/**
 * NTS-KE under a connection flood (docs/nts.md "Connection floods"): 1,100 TCP connections from 127.0.0.2
 * that never send a ClientHello (re-opened as soon as one closes, as a flooder would), while a real chrony
 * NTS client from 127.0.0.1 must still complete NTS-KE. The refusals and handshake timeouts are counted
 * and logged at a limited rate.
 */

const FLOOD = 1100;

test('1,100 idle connections from one address do not shut a chrony NTS client out; refusals counted and logged', async () => {
  const chronyd = requireTool('chronyd');
  const chronyc = requireTool('chronyc');
  const dir = tempDir('timesvc-nts-flood-');
  const pair = makeCertificate(dir.path);
  const lines: string[] = [];
  const logger = createLogger({
    service: 'timesvc-test',
    level: 'warn',
    destination: { write: (s: string) => lines.push(s) },
  });
  const config = configSchema.parse({
    ntp: { port: 0, interface: '127.0.0.1', local_stratum: true, stratum: 3 },
    nts: { enabled: true, ke_port: 0, cert_path: pair.cert, key_path: pair.key, cookie_key: 'ab'.repeat(32) },
    web: { port: 0, bind_address: '127.0.0.1' },
  });
  const service = await createTimesvc(config, logger);
  await service.start();
  const kePort = service.nts()?.ke.port ?? 0;
  const ke = service.nts()!.ke;

  let flooding = true;
  const sockets = new Set<Socket>();
  let opened = 0;
  const open = (): void => {
    if (!flooding) return;
    const s = connect({ host: '127.0.0.1', port: kePort, localAddress: '127.0.0.2' });
    sockets.add(s);
    s.on('connect', () => opened++);
    s.on('error', () => undefined);
    s.on('close', () => {
      sockets.delete(s);
      setTimeout(open, 10);
    });
  };
  for (let i = 0; i < FLOOD; i++) open();
  let chrony: { stop: (signal: NodeJS.Signals) => Promise<unknown> } | undefined;
  try {
    await waitFor(() => opened >= FLOOD, { timeoutMs: 20_000, what: `${FLOOD} flood connections` });
    mkdirSync(join(dir.path, 'run'), { mode: 0o700 });
    const conf = join(dir.path, 'client.conf');
    writeFileSync(conf, chronyNtsClientConf(dir.path, kePort, pair.cert).join('\n'));
    chrony = startProcess(chronyd, ['-x', '-d', '-u', 'root', '-f', conf]);
    const sock = join(dir.path, 'run', 'chronyd.sock');
    await waitFor(() => ke.counters.success >= 1, { timeoutMs: 30_000, what: 'chrony completing NTS-KE' });
    const auth = await waitFor(
      () => {
        try {
          const a = execFileSync(chronyc, ['-h', sock, '-n', '-c', 'authdata'], { encoding: 'utf8' });
          const f = a.trim().split(',');
          return Number(f[8]) > 0 ? f : undefined;
        } catch {
          return undefined;
        }
      },
      { timeoutMs: 20_000, intervalMs: 500, what: 'chrony holding cookies' },
    );
    const f = ke.counters.failures;
    // The kernel's accept queue hands the flood over gradually: wait until all of it has been seen.
    await waitFor(() => f.refused_per_address >= FLOOD - 32, {
      timeoutMs: 20_000,
      what: `${FLOOD - 32} refusals (now ${f.refused_per_address})`,
    });
    console.log(
      `flood: ${opened} connections opened from 127.0.0.2, ${ke.counters.requests} accepted by timesvc; ` +
        `refused per address ${f.refused_per_address}, capacity ${f.refused_capacity}, handshake timeouts ` +
        `${f.handshake_timeout}, tls_handshake ${f.tls_handshake}; chrony authdata ${auth.join(',')}; ` +
        `${lines.filter((l) => l.includes('refused or timed out')).length} log lines`,
    );
    assert.equal(auth[1], 'NTS');
    assert.equal(f.tls_handshake, 0, 'refusals are not counted as handshake failures');
    assert.ok(f.refused_per_address >= FLOOD - 32, `refused per address: ${f.refused_per_address}`);
    // The accepted idle connections end at the ClientHello deadline (2 s), which a quick chrony may beat.
    await waitFor(() => f.handshake_timeout >= 1, {
      timeoutMs: 20_000,
      what: 'an idle connection timed out',
    });
    assert.ok(f.handshake_timeout >= 1, 'idle connections time out');
    assert.ok(
      ((await metricValue(service.registry, 'timesvc_nts_ke_failures_total', {
        reason: 'refused_per_address',
      })) ?? 0) >=
        FLOOD - 32,
    );
    const logged = lines.filter((l) => l.includes('refused or timed out'));
    assert.ok(logged.length >= 1, 'refusals logged');
    assert.ok(
      logged.length <= 10,
      `rate-limited: ${logged.length} lines for ${f.refused_per_address} refusals`,
    );
    assert.match(logged[0] ?? '', /127\.0\.0\.2/);
  } finally {
    flooding = false;
    for (const s of sockets) s.destroy();
    await chrony?.stop('SIGTERM');
    await service.close();
    dir.remove();
  }
});
