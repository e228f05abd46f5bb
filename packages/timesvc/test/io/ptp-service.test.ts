import assert from 'node:assert/strict';
import { test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import { waitFor } from '@broadcast-ops/core/testing';
import { configSchema } from '../../src/config.ts';
import { queryServer } from '../../src/io/query.ts';
import { createTimesvc } from '../../src/io/service.ts';

test('PTP on an interface that does not exist: the port is FAULTY with the error, NTP still serves; metrics say so', async () => {
  const config = configSchema.parse({
    ntp: { port: 0, interface: '127.0.0.1', ref_id: 'GPS' },
    gpsdo: { enabled: true, type: 'dummy' },
    ptp: { enabled: true, interface: 'nonexistent0', clock_class: 248 },
    web: { port: 0, bind_address: '127.0.0.1' },
  });
  const service = await createTimesvc(config, silentLogger());
  try {
    await service.start();
    const st = service.ptp()?.status();
    assert.equal(st?.running, false);
    assert.equal(st?.port_state, 'FAULTY');
    assert.match(st?.error ?? '', /nonexistent0/);
    assert.equal(st?.bmca, true);
    // What the port would announce (UTC) against the kernel's clock: the dummy GPSDO keeps them together.
    assert.ok(typeof st?.offset_from_kernel_ns === 'number', 'offset from the kernel in the status');
    assert.ok(Math.abs(st.offset_from_kernel_ns) < 5e6, `${st.offset_from_kernel_ns} ns`);
    assert.equal(st?.timestamping, 'software');
    const m = await service.registry.metrics();
    assert.match(m, /timesvc_ptp_port_state 2/);
    assert.match(m, /timesvc_ptp_sync_total 0/);
    assert.doesNotMatch(m, /timesvc_ptp_offset_nanoseconds -?\d/);
    // The same clock-quality model as NTP: free-running class until the GPSDO has locked the clock, then 6.
    assert.equal(service.clockQuality().clockClass, 248);
    await waitFor(() => service.manager.state === 'LOCKED', { timeoutMs: 30_000, intervalMs: 100 });
    assert.equal(service.clockQuality().clockClass, 6);
    assert.equal(service.ptp()?.status().clock_class, 6);
    assert.match(await service.registry.metrics(), /timesvc_ptp_clock_class 6/);
    const q = await queryServer('127.0.0.1', service.server()?.addresses[0]?.port ?? 0);
    assert.equal(q.stratum, 1);
  } finally {
    await service.close();
  }
});
