import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ConfigError } from '@broadcast-ops/core';
import { repoRoot, tempDir } from '@broadcast-ops/core/testing';
import {
  configSchema,
  loadTimesvcConfig,
  ntpBindAddresses,
  parseHostPort,
  peerPolls,
} from '../../src/config.ts';
import { configWarnings, formatSources, type PeerRow } from '../../src/io/cli/format.ts';
import { peerRow } from '../helpers/peer-row.ts';

test('the committed configs parse: demo, lab without GPS, GPSDO example', () => {
  const demo = loadTimesvcConfig(join(repoRoot, 'config/timesvc.demo.yaml'), {});
  assert.equal(demo.ntp.port, 11123);
  assert.equal(demo.ntp.local_stratum, false);
  assert.equal(demo.gpsdo.enabled, true);
  assert.equal(demo.gpsdo.type, 'dummy');
  assert.equal(demo.ntp.ref_id, 'GPS');
  assert.equal(demo.web.port, 8080);
  const ptpExample = loadTimesvcConfig(join(repoRoot, 'config/timesvc.ptp.example.yaml'), {});
  assert.equal(ptpExample.ptp.enabled, true);
  assert.deepEqual(
    [ptpExample.ptp.profile, ptpExample.ptp.domain, ptpExample.ptp.log_sync_interval],
    ['smpte-2059-2', 127, -3],
  );
  assert.equal(ptpExample.gpsdo.nmea_delay, 0.1);
  const lab = loadTimesvcConfig(join(repoRoot, 'config/timesvc.lab.example.yaml'), {});
  assert.equal(lab.ntp.upstream_peers.length, 3);
  assert.equal(lab.ntp.upstream_peers[0]?.prefer, true);
  assert.equal(lab.ntp.poll_interval, 64);
  assert.equal(lab.web.jwt_secret, '', '${TIMESVC_JWT_SECRET:-} with nothing set');
  assert.deepEqual(
    lab.ntp.discipline,
    loadTimesvcConfig(undefined, {}).ntp.discipline,
    'the defaults, spelled out',
  );
  assert.equal(lab.ntp.discipline.step_threshold, 0.128);
  assert.equal(lab.ntp.discipline.holdover_timeout, 4 * 3600);
  const gps = loadTimesvcConfig(join(repoRoot, 'config/timesvc.gpsdo.example.yaml'), {
    TIMESVC_NTS_COOKIE_KEY: 'ab'.repeat(32),
  });
  assert.equal(gps.gpsdo.type, 'serialpps');
  assert.equal(gps.gpsdo.poll_interval, 1);
  assert.equal(gps.nts.cookie_key, 'ab'.repeat(32));
});

test('check-config on a GPSDO-only config: no "stay unsynchronised" (it synchronises), the stepout named', () => {
  const c = configSchema.parse({ gpsdo: { enabled: true, type: 'dummy' } });
  const w = configWarnings(c).filter((x) => x.startsWith('ntp.upstream_peers'));
  assert.equal(w.length, 1);
  assert.doesNotMatch(w[0] ?? '', /unsynchronised/);
  assert.match(w[0] ?? '', /held back for ntp\.discipline\.stepout \(300 s\)/);
});

test('sources marks as chronyc: a truechimer not chosen is "-" (nothing is combined), a held-back level "x"', () => {
  const row = (verdict: string, selected = false): PeerRow => peerRow({ verdict, selected });
  const lines = formatSources([row('selected', true), row('candidate'), row('held'), row('falseticker')])
    .split('\n')
    .slice(2, 6);
  assert.deepEqual(
    lines.map((l) => l.slice(0, 2)),
    ['^*', '^-', '^x', '^x'],
  );
  assert.match(lines[0] ?? '', / 377 +20 /, 'LastRx: the last good reply, not the chosen sample');
});

test('defaults (README "Configuration")', () => {
  const c = loadTimesvcConfig(undefined, {});
  assert.equal(c.ntp.port, 123);
  assert.equal(c.ntp.stratum, 2);
  assert.equal(c.ntp.ref_id, 'LOCL');
  assert.equal(c.ntp.local_stratum, false);
  assert.equal(c.nts.ke_port, 4460);
  assert.equal(c.ptp.clock_class, 248);
  assert.equal(c.web.port, 8080);
  assert.equal(c.web.jwt_expiry, 86_400);
  assert.deepEqual(peerPolls({}, 64), { minpoll: 6, maxpoll: 10 });
  assert.deepEqual(peerPolls({ minpoll: 0, maxpoll: 0 }, 64), { minpoll: 0, maxpoll: 0 });
});

function write(text: string): { file: string; done: () => void } {
  const d = tempDir('timesvc-config-');
  const file = join(d.path, 'c.yaml');
  writeFileSync(file, text);
  return { file, done: d.remove };
}

test('unknown keys are rejected with their path and the file name', () => {
  const { file, done } = write(
    'ntp:\n  port: 123\n  upstream_peers:\n    - address: "a:123"\n      preferr: true\n',
  );
  try {
    assert.throws(
      () => loadTimesvcConfig(file, {}),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.message.includes(file) &&
        e.message.includes('ntp.upstream_peers.0.preferr'),
    );
  } finally {
    done();
  }
  const top = write('ntpp:\n  port: 1\n');
  try {
    assert.throws(() => loadTimesvcConfig(top.file, {}), /unknown key "ntpp"/);
  } finally {
    top.done();
  }
});

test('${NAME} and ${NAME:-default} substitution; environment overrides win over the file', () => {
  const { file, done } = write(
    'ntp:\n  port: ${NTP_PORT:-11123}\n  ref_id: "${REFID}"\nweb:\n  jwt_secret: from-file-secret\n',
  );
  try {
    assert.throws(() => loadTimesvcConfig(file, {}), /REFID/);
    const c = loadTimesvcConfig(file, { REFID: 'GPS', TIMESVC_JWT_SECRET: '12345' });
    assert.equal(c.ntp.port, 11123, 'substituted text is accepted for a numeric key');
    assert.equal(c.ntp.ref_id, 'GPS');
    assert.equal(c.web.jwt_secret, '12345', 'env override wins and stays a string');
    assert.equal(loadTimesvcConfig(file, { REFID: 'X', NTP_PORT: '4123' }).ntp.port, 4123);
    assert.throws(() => loadTimesvcConfig(file, { REFID: 'X', NTP_PORT: 'abc' }), /ntp\.port/);
  } finally {
    done();
  }
  const ok = write('ntp:\n  ref_id: "${REFID:-PPS}"\nweb:\n  jwt_secret: "${SECRET:-x}"\n');
  try {
    const c = loadTimesvcConfig(ok.file, { TIMESVC_NTS_COOKIE_KEY: 'cd'.repeat(32) });
    assert.equal(c.ntp.ref_id, 'PPS');
    assert.equal(c.web.jwt_secret, 'x');
    assert.equal(c.nts.cookie_key, 'cd'.repeat(32));
    assert.throws(() => loadTimesvcConfig(ok.file, { TIMESVC_NTS_COOKIE_KEY: 'short' }), /nts\.cookie_key/);
  } finally {
    ok.done();
  }
});

test('validation: ranges, ref_id length, networks, peers, NTS/PTP/GPSDO/web cross-field rules', () => {
  const cases: [string, RegExp][] = [
    ['ntp:\n  stratum: 16\n', /ntp\.stratum/],
    ['ntp:\n  port: 70000\n', /ntp\.port/],
    ['ntp:\n  ref_id: TOOLONG\n', /ntp\.ref_id/],
    ['ntp:\n  allowed_networks: ["10.0.0.0/40"]\n', /allowed_networks/],
    ['ntp:\n  upstream_peers:\n    - address: "host:99999"\n', /upstream_peers\.0\.address/],
    ['ntp:\n  upstream_peers:\n    - address: "h:123"\n      minpoll: 8\n      maxpoll: 4\n', /minpoll/],
    ['nts:\n  enabled: true\n', /cert_path/],
    ['nts:\n  min_tls_version: "1.2"\n', /min_tls_version/],
    ['ptp:\n  enabled: true\n', /ptp\.interface/],
    ['ptp:\n  domain: 200\n', /ptp\.domain/],
    ['gpsdo:\n  enabled: true\n  type: serialpps\n', /serial_device/],
    ['gpsdo:\n  type: network\n  enabled: true\n', /network_address/],
    ['gpsdo:\n  type: lora\n', /gpsdo\.type/],
    ['web:\n  tls_enabled: true\n', /tls_cert/],
    ['web:\n  users:\n    - {username: a, password_hash: x, role: admin}\n', /jwt_secret/],
    [
      'web:\n  jwt_secret: changeme\n  users:\n    - {username: a, password_hash: x, role: admin}\n',
      /placeholder/,
    ],
    ['web:\n  users:\n    - {username: a, password_hash: x, role: root}\n', /role/],
  ];
  for (const [yaml, re] of cases) {
    const { file, done } = write(yaml);
    try {
      assert.throws(() => loadTimesvcConfig(file, {}), re, yaml);
    } finally {
      done();
    }
  }
});

test('host:port parsing and NTP bind addresses', () => {
  assert.deepEqual(parseHostPort('127.0.0.1:11123', 123), { host: '127.0.0.1', port: 11123 });
  assert.deepEqual(parseHostPort('[::1]:123', 123), { host: '::1', port: 123 });
  assert.deepEqual(parseHostPort('::1', 123), { host: '::1', port: 123 });
  assert.deepEqual(parseHostPort('pool.ntp.org', 123), { host: 'pool.ntp.org', port: 123 });
  assert.equal(parseHostPort('a:0', 123), undefined);
  assert.equal(parseHostPort('a:12x', 123), undefined);
  assert.deepEqual(ntpBindAddresses(''), { udp4: '0.0.0.0', udp6: '::' });
  assert.deepEqual(ntpBindAddresses('127.0.0.1'), { udp4: '127.0.0.1' });
  assert.deepEqual(ntpBindAddresses('::1'), { udp6: '::1' });
  assert.deepEqual(ntpBindAddresses('lo').udp4, '127.0.0.1');
  assert.throws(() => ntpBindAddresses('nosuchif0'), ConfigError);
});

test('one-step is refused by config validation with the reason; two-step is the default', () => {
  const r = configSchema.safeParse({ ptp: { two_step_flag: false } });
  assert.equal(r.success, false);
  assert.match(r.error?.issues[0]?.message ?? '', /one-step .*not supported.*two-step/);
  assert.deepEqual(r.error?.issues[0]?.path, ['ptp', 'two_step_flag']);
  assert.equal(configSchema.parse({}).ptp.two_step_flag, true);
});
