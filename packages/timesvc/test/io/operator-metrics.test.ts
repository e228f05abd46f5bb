import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { metricValue } from '@broadcast-ops/core';
import { waitFor } from '@broadcast-ops/core/testing';
import { OffsetUpstream } from '../helpers/offset-upstream.ts';
import { startService } from '../helpers/service.ts';

/** The figures an operator alerts on (README "Endpoints and metrics"), against real upstreams. */

const metric = async (
  svc: Awaited<ReturnType<typeof startService>>,
  name: string,
  labels?: Record<string, string>,
): Promise<number | undefined> => metricValue(svc.service.registry, name, labels);

describe('operator metrics', { concurrency: true }, () => {
  it('a peer stopped by KoD DENY is unreachable in the metrics and its status', async () => {
    const upstream = await startService({ local_stratum: true, allowed_networks: ['10.0.0.0/8'] });
    const client = await startService({
      upstream_peers: [{ address: `127.0.0.1:${upstream.port}`, minpoll: -2, maxpoll: -2 }],
    });
    try {
      const peer = client.service.peers[0]!;
      await waitFor(() => peer.peer.denied === 'DENY', { timeoutMs: 10_000, what: 'DENY honoured' });
      assert.equal(peer.peerStatus().reachable, false);
      assert.equal(await metric(client, 'timesvc_ntp_peer_count', { reachable: 'true' }), 0);
      assert.equal(await metric(client, 'timesvc_ntp_peer_count', { reachable: 'false' }), 1);
    } finally {
      await client.service.close();
      await upstream.service.close();
    }
  });

  it('the bound gauges follow the clock: +Inf unsynchronised, finite when LOCKED, growing in HOLDOVER', async () => {
    const up = await OffsetUpstream.start(0.02);
    up.rootDelayS = 0.004;
    const svc = await startService({
      rate_limit: { enabled: false },
      upstream_peers: [{ address: up.address, minpoll: 0, maxpoll: 0 }],
    });
    try {
      assert.equal(await metric(svc, 'timesvc_clock_estimated_error_seconds'), Number.POSITIVE_INFINITY);
      assert.equal(await metric(svc, 'timesvc_ntp_leap_indicator'), 3);
      await waitFor(() => svc.service.manager.state === 'LOCKED', { timeoutMs: 20_000, what: 'LOCKED' });
      const delay = (await metric(svc, 'timesvc_ntp_root_delay_seconds')) ?? 0;
      const disp = (await metric(svc, 'timesvc_ntp_root_dispersion_seconds')) ?? 0;
      const err = (await metric(svc, 'timesvc_clock_estimated_error_seconds')) ?? 0;
      assert.ok(delay >= 0.004, `root delay ${delay} includes the upstream's`);
      assert.ok(disp > 0 && Number.isFinite(disp), `root dispersion ${disp}`);
      // The estimated error is the advertised bound, root delay / 2 + root dispersion (README "Endpoints and
      // metrics"); the gauges are read one after another, so allow what dispersion adds in between. How
      // large the three are depends on the measured round trip, which a loaded machine lengthens.
      assert.ok(
        err >= delay / 2 + disp - 1e-9 && err <= delay / 2 + disp + 1e-3,
        `estimated error ${err} against root delay ${delay} / 2 + root dispersion ${disp}`,
      );
      assert.equal(await metric(svc, 'timesvc_ntp_leap_indicator'), 0);
      up.pause();
      await waitFor(() => svc.service.manager.state === 'HOLDOVER', { timeoutMs: 30_000, what: 'HOLDOVER' });
      const d1 = (await metric(svc, 'timesvc_ntp_root_dispersion_seconds')) ?? 0;
      await new Promise((r) => setTimeout(r, 3000));
      const d2 = (await metric(svc, 'timesvc_ntp_root_dispersion_seconds')) ?? 0;
      assert.ok(d2 > d1, `dispersion grows in HOLDOVER: ${d1} → ${d2}`);
      assert.ok(((await metric(svc, 'timesvc_clock_estimated_error_seconds')) ?? 0) > err);
    } finally {
      await svc.service.close();
      await up.close();
    }
  });
});
