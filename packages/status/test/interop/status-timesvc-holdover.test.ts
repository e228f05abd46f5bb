/**
 * The real timesvc (built, plain node, the demo's dummy GPSDO set to lose lock 20 s after start) watched by the
 * status service (built, plain node): green while LOCKED, then amber "HOLDOVER" with the estimated error as
 * the figure once the GPSDO is lost.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse, stringify } from 'yaml';
import { freePort, repoRoot, startProcess, tempDir, waitFor } from '@broadcast-ops/core/testing';

interface Fleet {
  services: { name: string; level: string; reason: string; figures: Record<string, unknown> }[];
}

test('a real timesvc whose GPSDO is lost: green while LOCKED, then amber HOLDOVER with its estimated error', async () => {
  const tmp = tempDir('status-holdover-');
  const web = await freePort('tcp');
  const ntp = await freePort('udp');
  const statusPort = await freePort('tcp');
  const demo = parse(readFileSync(join(repoRoot, 'config/timesvc.demo.yaml'), 'utf8')) as {
    ntp: { port: number };
    web: { port: number };
    gpsdo: { dummy: Record<string, unknown> };
  };
  demo.ntp.port = ntp;
  demo.web.port = web;
  demo.gpsdo.dummy['lose_lock_after'] = '20s';
  writeFileSync(join(tmp.path, 'timesvc.yaml'), stringify(demo));
  writeFileSync(
    join(tmp.path, 'status.json'),
    JSON.stringify({
      listen: { host: '127.0.0.1', port: statusPort },
      pollIntervalMs: 1000,
      timeoutMs: 800,
      services: [
        {
          name: 'timesvc',
          kind: 'timesvc',
          health: `http://127.0.0.1:${web}/api/health`,
          metrics: `http://127.0.0.1:${web}/metrics`,
          page: `http://127.0.0.1:${web}/`,
        },
      ],
    }),
  );
  // As installed: the compiled files on plain node, without the test runner's TypeScript loader.
  const env = { NODE_OPTIONS: '' };
  const timesvc = startProcess(
    process.execPath,
    [join(repoRoot, 'packages/timesvc/dist/start.cjs'), '--config', join(tmp.path, 'timesvc.yaml')],
    { env },
  );
  const status = startProcess(
    process.execPath,
    [join(repoRoot, 'packages/status/dist/start.cjs'), '--config', join(tmp.path, 'status.json')],
    { env },
  );
  const fleet = async (): Promise<Fleet['services'][number] | undefined> => {
    const res = await fetch(`http://127.0.0.1:${statusPort}/api/fleet`, {
      signal: AbortSignal.timeout(3000),
    });
    return ((await res.json()) as Fleet).services[0];
  };
  try {
    const green = await waitFor(async () => ((await fleet())?.level === 'green' ? fleet() : undefined), {
      timeoutMs: 20_000,
      intervalMs: 200,
      what: 'timesvc green (LOCKED)',
    });
    assert.match(green.reason, /^LOCKED, estimated error [\d.]+ (µs|ms)$/);
    assert.equal(green.figures['stratum'], 1);
    assert.equal(green.figures['gpsdo'], 'locked');
    // Amber for the holdover, not for a poll that went unanswered once on a loaded machine (also amber, with
    // "no answer" as its reason and no figures: the status README, one unanswered poll is amber, two red).
    const amber = await waitFor(
      async () => {
        const s = await fleet();
        return s?.level === 'amber' && s.figures['clock_state'] === 'HOLDOVER' ? s : undefined;
      },
      {
        timeoutMs: 60_000,
        intervalMs: 200,
        what: 'timesvc amber (HOLDOVER)',
      },
    );
    assert.match(amber.reason, /^HOLDOVER: reference lost, estimated error [\d.]+ (µs|ms)$/);
    assert.equal(amber.figures['clock_state'], 'HOLDOVER');
    assert.match(String(amber.figures['estimated_error']), /^[\d.]+ (µs|ms)$/);
    console.log(`# holdover seen: ${amber.reason}`);
  } finally {
    await status.stop();
    await timesvc.stop();
    tmp.remove();
  }
});
