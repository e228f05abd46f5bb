import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { tempDir } from '@broadcast-ops/core/testing';
import { loadTimesvcConfig } from '../../src/config.ts';
import { PROFILE_KEYS, PROFILE_TABLE, PTP_PROFILES, resolveProfile } from '../../src/domain/ptp-profiles.ts';

/** PTP profiles in the configuration (docs/ptp.md "Profiles"): the profile's values, its ranges, the key named. */

function load(yaml: string): ReturnType<typeof loadTimesvcConfig> {
  const d = tempDir('timesvc-ptp-profile-');
  try {
    const file = join(d.path, 'c.yaml');
    writeFileSync(file, yaml);
    return loadTimesvcConfig(file, {});
  } finally {
    d.remove();
  }
}

test('each profile sets its table values when the configuration names only the profile', () => {
  const expected = {
    default: { domain: 0, log_announce_interval: 1, log_sync_interval: 0, log_min_delay_req_interval: 0 },
    'smpte-2059-2': {
      domain: 127,
      log_announce_interval: -2,
      log_sync_interval: -3,
      log_min_delay_req_interval: -3,
    },
    aes67: { domain: 0, log_announce_interval: 1, log_sync_interval: -3, log_min_delay_req_interval: -3 },
    'aes67-smpte': {
      domain: 0,
      log_announce_interval: 0,
      log_sync_interval: -3,
      log_min_delay_req_interval: -3,
    },
  } as const;
  for (const name of PTP_PROFILES) {
    const p = load(`ptp:\n  profile: ${name}\n`).ptp;
    for (const [k, v] of Object.entries(expected[name]))
      assert.equal(p[k as keyof typeof p], v, `${name} ${k}`);
    assert.equal(p.announce_receipt_timeout, 3, name);
    assert.deepEqual([p.priority1, p.priority2], [128, 128], name);
    const aes = name.startsWith('aes67');
    assert.deepEqual([p.dscp_event, p.dscp_general], aes ? [46, 34] : [0, 0], name);
  }
});

test('a value inside the profile range overrides it; outside, the key is named with the range', () => {
  assert.equal(load('ptp:\n  profile: smpte-2059-2\n  domain: 0\n').ptp.domain, 0);
  const slower = load('ptp:\n  profile: aes67\n  log_sync_interval: 0\n').ptp;
  assert.deepEqual(
    [slower.log_sync_interval, slower.log_min_delay_req_interval],
    [0, 0],
    'delay req follows',
  );
  const refusals: [string, RegExp][] = [
    ['ptp:\n  profile: smpte-2059-2\n  log_sync_interval: 0\n', /ptp\.log_sync_interval.*-7…-1/],
    ['ptp:\n  profile: smpte-2059-2\n  log_announce_interval: 2\n', /ptp\.log_announce_interval.*-3…1/],
    ['ptp:\n  profile: aes67-smpte\n  announce_receipt_timeout: 4\n', /ptp\.announce_receipt_timeout.*3…3/],
    ['ptp:\n  profile: aes67\n  log_sync_interval: -5\n', /ptp\.log_sync_interval.*-4…1/],
    [
      'ptp:\n  log_min_delay_req_interval: -1\n  log_sync_interval: 1\n',
      /ptp\.log_min_delay_req_interval.*§7\.7\.2\.4/,
    ],
    ['ptp:\n  profile: default\n  dscp_event: 64\n', /ptp\.dscp_event/],
    ['ptp:\n  profile: nonsense\n', /ptp\.profile/],
  ];
  for (const [yaml, why] of refusals) assert.throws(() => load(yaml), why, yaml);
});

test('every profile default lies inside its own range and passes the delay-request rule', () => {
  for (const name of PTP_PROFILES) {
    const r = resolveProfile(name, {});
    assert.ok(r.ok, name);
    for (const k of PROFILE_KEYS) {
      const [d, min, max] = PROFILE_TABLE[name][k];
      assert.ok(min <= d && d <= max, `${name} ${k}`);
    }
  }
});
