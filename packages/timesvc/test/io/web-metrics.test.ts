// /metrics: every metric name the README lists ("Endpoints and metrics") with a value that follows the service.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { queryServer } from '../../src/io/query.ts';
import { startWebRig, until } from '../helpers/web.ts';

const SPEC_METRICS = [
  'timesvc_ntp_requests_total',
  'timesvc_ntp_responses_total',
  'timesvc_ntp_offset_seconds',
  'timesvc_ntp_jitter_seconds',
  'timesvc_ntp_stratum',
  'timesvc_nts_ke_requests_total',
  'timesvc_nts_active_sessions',
  'timesvc_ptp_sync_total',
  'timesvc_ptp_announce_total',
  'timesvc_ptp_offset_nanoseconds',
  'timesvc_gpsdo_locked',
  'timesvc_gpsdo_satellites',
  'timesvc_gpsdo_pps_total',
  'timesvc_clock_state',
  'timesvc_clock_offset_nanoseconds',
  'timesvc_uptime_seconds',
];

function values(text: string, name: string): { labels: string; value: number }[] {
  const re = new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`, 'gm');
  return [...text.matchAll(re)].map((m) => ({ labels: m[1] ?? '', value: Number(m[2]) }));
}

test('/metrics has every spec metric with a value reflecting the running state', async () => {
  const gps = { locked: true, satellites: 9, pps: 42 };
  const rig = await startWebRig(
    { ntp: { stratum: 7 } },
    {
      gpsdo: {
        status: () => ({
          type: 'dummy',
          connected: true,
          locked: gps.locked,
          fix: true,
          pps_ok: true,
          satellites: gps.satellites,
          pps_count: gps.pps,
        }),
        satellites: () => [],
      },
    },
  );
  try {
    await until(() => rig.service.manager.state === 'LOCKED' || undefined, 10_000, 'locked (local stratum)');
    const scrape = async () => (await rig.service.app.inject({ url: '/metrics' })).body;
    const before = await scrape();
    for (const name of SPEC_METRICS) {
      const v = values(before, name);
      assert.ok(v.length > 0 && v.every((x) => Number.isFinite(x.value)), `${name} has a value`);
    }
    assert.deepEqual(values(before, 'timesvc_ntp_stratum')[0]?.value, 7);
    assert.deepEqual(
      values(before, 'timesvc_clock_state')
        .filter((x) => x.value === 1)
        .map((x) => x.labels),
      ['{state="locked"}'],
    );
    assert.equal(values(before, 'timesvc_gpsdo_satellites')[0]?.value, 9);
    assert.equal(values(before, 'timesvc_gpsdo_locked')[0]?.value, 1);
    assert.equal(values(before, 'timesvc_gpsdo_pps_total')[0]?.value, 42);
    const requests0 = values(before, 'timesvc_ntp_requests_total')[0]?.value ?? NaN;
    for (let i = 0; i < 3; i++) await queryServer('127.0.0.1', rig.ntpPort, 3000);
    gps.locked = false;
    gps.pps = 43;
    const after = await scrape();
    assert.equal(values(after, 'timesvc_ntp_requests_total')[0]?.value, requests0 + 3, 'requests counted');
    assert.ok(
      (values(after, 'timesvc_ntp_responses_total').find((x) => x.labels === '{type="time"}')?.value ?? 0) >=
        3,
    );
    assert.equal(values(after, 'timesvc_gpsdo_locked')[0]?.value, 0, 'follows the GPSDO provider');
    assert.equal(values(after, 'timesvc_gpsdo_pps_total')[0]?.value, 43);
    assert.ok((values(after, 'timesvc_uptime_seconds')[0]?.value ?? 0) > 0);
  } finally {
    await rig.close();
  }
});
