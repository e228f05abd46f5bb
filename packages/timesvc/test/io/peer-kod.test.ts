import assert from 'node:assert/strict';
import { test } from 'node:test';
import { waitFor } from '@broadcast-ops/core/testing';
import { startService } from '../helpers/service.ts';

/** timesvc as the upstream of another timesvc, over real loopback sockets. */

test('a peer answering DENY is demobilised: no more requests, not usable', async () => {
  const upstream = await startService({ local_stratum: true, allowed_networks: ['10.0.0.0/8'] });
  const client = await startService({
    upstream_peers: [{ address: `127.0.0.1:${upstream.port}`, minpoll: -2, maxpoll: -2 }],
  });
  try {
    const peer = client.service.peers[0]!;
    await waitFor(() => peer.peer.denied === 'DENY', { timeoutMs: 10_000, what: 'DENY honoured' });
    const seen = upstream.service.server()!.counters.requests;
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(upstream.service.server()!.counters.requests, seen, 'no request after the DENY kiss');
    assert.equal(peer.peerStatus().usable, false);
    assert.equal(peer.peerStatus().lastKod, 'DENY');
    assert.equal(client.service.manager.state, 'INIT');
  } finally {
    await client.service.close();
    await upstream.service.close();
  }
});

test('a peer answering RATE makes us poll less often, and we still synchronise', async () => {
  const upstream = await startService({
    local_stratum: true,
    rate_limit: { enabled: true, average_interval: 2, burst: 3, kod_interval: 1 },
  });
  // iburst plus a 1/4 s poll exceeds 3 requests then one per 2 s.
  const client = await startService({
    upstream_peers: [{ address: `127.0.0.1:${upstream.port}`, minpoll: -2, maxpoll: 4 }],
  });
  try {
    const peer = client.service.peers[0]!;
    await waitFor(() => peer.peerStatus().lastKod === 'RATE', { timeoutMs: 10_000, what: 'RATE kiss' });
    assert.ok(peer.peer.poll >= -1, `poll raised from -2 to ${peer.peer.poll}`);
    assert.equal(peer.peer.denied, undefined, 'RATE does not demobilise');
    await waitFor(() => (upstream.service.manager.state === 'LOCKED' ? peer.peerStatus().reachable : false), {
      timeoutMs: 15_000,
      what: 'the peer still reachable after slowing down',
    });
    assert.ok(upstream.service.server()!.counters.kodRate >= 1);
  } finally {
    await client.service.close();
    await upstream.service.close();
  }
});
