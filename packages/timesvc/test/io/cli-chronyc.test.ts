// timesvc's chronyc-style commands beside chronyc itself: one chronyd (local stratum 6, -x) as the upstream,
// a second `chronyd -x` and timesvc both following it at poll 2 (4 s); chronyc talks to the second chronyd
// over its own Unix socket (cmdport 0). LastRx, ntpdata, sourcestats and serverstats compared row by row
// (docs/cli.md has the table of chronyc's columns against timesvc's).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { freePort, requireTool, tempDir } from '@broadcast-ops/core/testing';
import { queryServer } from '../../src/io/query.ts';
import { startChronyServer } from '../helpers/chrony.ts';
import { run } from '../helpers/cli.ts';
import { PASSWORDS, startWebRig, until } from '../helpers/web.ts';

const closers: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const c of closers.reverse()) await c();
});

function chronyc(socket: string, ...args: string[]): Promise<string> {
  const bin = requireTool('chronyc');
  return new Promise((resolve, reject) => {
    execFile(bin, ['-h', socket, '-n', ...args], { timeout: 10_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`chronyc ${args.join(' ')}: ${err.message} ${stderr}`)) : resolve(stdout),
    );
  });
}

/** "Key  : value" rows (tracking, ntpdata, serverstats) as a map. */
function rows(text: string): Map<string, string> {
  const m = new Map<string, string>();
  for (const line of text.split('\n')) {
    const i = line.indexOf(':');
    if (i > 0) m.set(line.slice(0, i).trim(), line.slice(i + 1).trim());
  }
  return m;
}

/** chronyc's interval column (print_seconds) back to seconds. */
function seconds(v: string): number {
  const m = /^(\d+)([mhdy]?)$/.exec(v);
  assert.ok(m, `interval ${v}`);
  return Number(m[1]) * ({ '': 1, m: 60, h: 3600, d: 86400, y: 365 * 86400 }[m[2] as ''] ?? 1);
}

test('LastRx, ntpdata, sourcestats and serverstats as chronyc prints them for the same source', async () => {
  const dir = tempDir('timesvc-chronyc-');
  closers.push(() => dir.remove());
  const upPort = await freePort('udp');
  const upstream = await startChronyServer(join(dir.path, 'up'), upPort, { stratum: 6 });
  closers.push(() => upstream.stop());
  const source = `127.0.0.1:${upPort}`;
  const clientPort = await freePort('udp');
  const client = await startChronyServer(join(dir.path, 'client'), clientPort, {
    stratum: null,
    extra: [`server 127.0.0.1 port ${upPort} iburst minpoll 2 maxpoll 2`],
  });
  closers.push(() => client.stop());
  const socket = join(dir.path, 'client', 'run', 'chronyd.sock');
  const rig = await startWebRig({
    ntp: { local_stratum: false, upstream_peers: [{ address: source, minpoll: 2, maxpoll: 2 }] },
  });
  closers.push(() => rig.close());
  const env = { TIMESVC_URL: rig.url, TIMESVC_PASSWORD: PASSWORDS.viewer };
  const timesvc = async (...args: string[]): Promise<string> => {
    const r = await run([...args, '--user', 'viewer'], env);
    assert.equal(r.code, 0, r.stderr);
    return r.stdout;
  };
  await until(() => rig.service.manager.state === 'LOCKED' || undefined, 90_000, 'timesvc locked');
  await until(
    async () => (/^\^\* 127\.0\.0\.1/m.test(await chronyc(socket, 'sources')) ? true : undefined),
    60_000,
    'chronyd selected the upstream',
  );

  // LastRx: the same source polled every 4 s by both; over several readings the ages agree within one poll
  // (plus the time between the two readings). The age of the filter's chosen sample would not.
  const row = (text: string): string[] => {
    const line = text.split('\n').find((l) => l.includes(`127.0.0.1`) && /^\^/.test(l));
    assert.ok(line, text);
    return line.trim().split(/\s+/);
  };
  for (let i = 0; i < 6; i++) {
    const t0 = Date.now();
    const theirs = row(await chronyc(socket, 'sources'));
    const ours = row(await timesvc('sources'));
    const between = (Date.now() - t0) / 1000;
    const [, , oursPoll, , oursLastRx] = ours.slice(1);
    const [, , theirPoll, , theirLastRx] = theirs.slice(1);
    assert.equal(oursPoll, '2', ours.join(' '));
    assert.equal(theirPoll, '2', theirs.join(' '));
    const diff = Math.abs(seconds(oursLastRx ?? '') - seconds(theirLastRx ?? ''));
    assert.ok(
      diff <= 4 + Math.ceil(between) + 1,
      `LastRx ${oursLastRx} vs chronyc ${theirLastRx} (${between.toFixed(1)} s between)`,
    );
    await new Promise((r) => setTimeout(r, 1500));
  }

  // ntpdata: the same rows for the same source; the header values agree (one upstream, one reply format).
  const theirData = rows(await chronyc(socket, 'ntpdata', '127.0.0.1'));
  const ourData = rows(await timesvc('ntpdata', source));
  for (const key of [
    'Remote port',
    'Leap status',
    'Version',
    'Mode',
    'Stratum',
    'Poll interval',
    'Precision',
  ]) {
    assert.equal(
      ourData.get(key),
      theirData.get(key),
      `${key}: ${ourData.get(key)} vs ${theirData.get(key)}`,
    );
  }
  assert.equal(ourData.get('Reference ID'), theirData.get('Reference ID')?.split(' ')[0]);
  assert.equal(ourData.get('Reference time')?.length, theirData.get('Reference time')?.length, 'same layout');
  // The measured values of one exchange each: on loopback both are small; a loaded machine (the scheduler
  // holding chronyd between receive and send) shows in the response time, so only its range is checked.
  const secondsOf = (m: Map<string, string>, key: string): number =>
    Number(/^([+-]?[\d.]+) seconds$/.exec(m.get(key) ?? '')?.[1]);
  for (const key of ['Offset', 'Peer delay']) {
    const [ours, theirs] = [secondsOf(ourData, key), secondsOf(theirData, key)];
    assert.ok(Number.isFinite(ours) && Number.isFinite(theirs), `${key}: ${ourData.get(key)}`);
    assert.ok(Math.abs(ours - theirs) < 0.02, `${key} on loopback: ${ours} vs ${theirs}`);
  }
  const response = secondsOf(ourData, 'Response time');
  assert.ok(response >= 0 && response < 1, `Response time ${response}`);
  for (const key of ['Total TX', 'Total RX', 'Total valid RX', 'Total good RX']) {
    const ours = Number(ourData.get(key));
    assert.ok(ours >= 4, `${key} ${ours}`);
  }
  assert.ok(Number(ourData.get('Total good RX')) <= Number(ourData.get('Total valid RX')));
  assert.ok(Number(ourData.get('Total valid RX')) <= Number(ourData.get('Total RX')));
  assert.equal(
    ourData.get('RX timestamping'),
    'Kernel',
    'the kernel stamps our replies, as it does chronyd’s',
  );

  // sourcestats: chronyc's header, and NP/NR/Span in the same ranges for the same source.
  const theirStats = await chronyc(socket, 'sourcestats');
  const ourStats = await timesvc('sourcestats');
  assert.equal(ourStats.split('\n')[0], theirStats.split('\n')[0]);
  const s =
    ourStats
      .split('\n')
      .find((l) => l.startsWith(source))
      ?.trim()
      .split(/\s+/) ?? [];
  assert.ok(Number(s[1]) >= 3 && Number(s[2]) >= 1 && Number(s[2]) <= Number(s[1]), ourStats);
  assert.ok(Math.abs(Number(s[4])) < 50, `residual frequency within reason: ${s[4]} ppm`);

  const theirRow =
    theirStats
      .split('\n')
      .find((l) => l.startsWith('127.0.0.1'))
      ?.trim()
      .split(/\s+/) ?? [];
  assert.ok(
    Math.abs(Number(s[4]) - Number(theirRow[4])) < 2,
    `residual frequencies of the same source agree: ${s[4]} vs chronyc ${theirRow[4]} ppm`,
  );

  // One frequency definition: both follow a source on this host's own clock, so tracking's Frequency (the
  // host clock's rate error, "slow"/"fast") agrees between the two tools, and so does its sign convention.
  const freq = (text: string): number => {
    const m = /^Frequency\s+: ([\d.]+) ppm (slow|fast)$/m.exec(text);
    assert.ok(m, text);
    return Number(m[1]) * (m[2] === 'fast' ? 1 : -1);
  };
  const [ourFreq, theirFreq] = [freq(await timesvc('tracking')), freq(await chronyc(socket, 'tracking'))];
  assert.ok(Math.abs(ourFreq - theirFreq) < 2, `tracking Frequency ${ourFreq} vs chronyc ${theirFreq} ppm`);

  // serverstats: three requests to each server: "NTP packets received" moves by three on both.
  const before = [rows(await chronyc(socket, 'serverstats')), rows(await timesvc('serverstats'))];
  for (let i = 0; i < 3; i++) {
    await queryServer('127.0.0.1', clientPort);
    await queryServer('127.0.0.1', rig.ntpPort);
  }
  const afterStats = [rows(await chronyc(socket, 'serverstats')), rows(await timesvc('serverstats'))];
  for (const key of ['NTP packets received', 'NTP packets dropped', 'Authenticated NTP packets']) {
    const delta = afterStats.map((m, i) => Number(m.get(key)) - Number(before[i]?.get(key)));
    assert.equal(delta[0], delta[1], `${key}: chronyd +${delta[0]}, timesvc +${delta[1]}`);
  }
  assert.equal(
    Number(afterStats[1]?.get('NTP packets received')) - Number(before[1]?.get('NTP packets received')),
    3,
  );
});
