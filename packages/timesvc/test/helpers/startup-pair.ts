import { performance } from 'node:perf_hooks';
import { silentLogger } from '@broadcast-ops/core';
import { freePort, requireTool, startProcess, type RunningProcess } from '@broadcast-ops/core/testing';
import { configSchema } from '../../src/config.ts';
import { createTimesvc, type TimesvcService } from '../../src/io/service.ts';
import { writeFollowerConf } from './chrony.ts';
import { OffsetUpstream, Probe, type ProbeRecord } from './offset-upstream.ts';

/**
 * A timesvc and a `chronyd -x`, each with its default polls (timesvc: poll 64 s with iburst; chrony:
 * minpoll 6, maxpoll 10, iburst), following one upstream at +20 ms with ±noiseS of path noise, each probed
 * every second against the upstream's truth; timesvc's update age sampled every second.
 */
export interface StartupPair {
  noiseS: number;
  t0: number;
  up: OffsetUpstream;
  service: TimesvcService;
  chrony: RunningProcess;
  probes: { timesvc: Probe; chronyd: Probe };
  /** [monotonic ms, timesvc update age s, its poll interval s] every second. */
  updateAge: [number, number, number][];
  /**
   * timesvc's reply fields each time they were replaced, read every second: [s since t0, root delay µs,
   * root dispersion µs at the replacement, its growth in ppm]. What a failed comparison with chronyd prints.
   */
  fields: [number, number, number, number][];
  stop: () => Promise<void>;
}

export async function startupPair(dir: string, noiseS: number, probeMs = 1000): Promise<StartupPair> {
  const up = await OffsetUpstream.start(0.02);
  up.noiseS = noiseS;
  const chronySocket = await up.listen();
  const chronyPort = await freePort('udp');
  const conf = writeFollowerConf(dir, up.portOf(chronySocket), chronyPort);
  const config = configSchema.parse({
    ntp: {
      port: 0,
      interface: '127.0.0.1',
      rate_limit: { enabled: false },
      upstream_peers: [{ address: up.address }],
    },
    web: { port: 0, bind_address: '127.0.0.1' },
  });
  const t0 = performance.now();
  const chrony = startProcess(requireTool('chronyd'), ['-x', '-d', '-u', 'root', '-f', conf]);
  const service = await createTimesvc(config, silentLogger());
  await service.start();
  const probes = {
    timesvc: new Probe(service.server()?.addresses[0]?.port ?? 0, up, probeMs),
    chronyd: new Probe(chronyPort, up, probeMs, chronySocket),
  };
  await Promise.all([probes.timesvc.start(), probes.chronyd.start()]);
  const updateAge: [number, number, number][] = [];
  // The update age as seen from outside: how long the last update (the clock manager's lastUpdateMs) has
  // stood, read every second.
  let lastUpdate: number | undefined;
  let changedAt = performance.now();
  const fields: [number, number, number, number][] = [];
  let lastFields: unknown;
  const ages = setInterval(() => {
    const snap = service.manager.snapshot();
    const now = performance.now();
    const s = service.manager.serverState;
    if (s !== lastFields && s.leap !== 3) {
      const r = (x: number): number => Math.round(x * 10) / 10;
      fields.push([
        r((now - t0) / 1000),
        r(s.rootDelayS * 1e6),
        r(s.rootDispersionS * 1e6),
        r((s.dispersionRateS ?? 0) * 1e6),
      ]);
    }
    lastFields = s;
    if (snap.lastUpdateMs !== lastUpdate) {
      lastUpdate = snap.lastUpdateMs;
      changedAt = now;
    }
    const poll = service.peers[0]?.peer.poll ?? 6;
    if (lastUpdate !== undefined) updateAge.push([now, (now - changedAt) / 1000, 2 ** poll]);
  }, 1000);
  return {
    noiseS,
    t0,
    up,
    service,
    chrony,
    probes,
    updateAge,
    fields,
    stop: async () => {
      clearInterval(ages);
      await Promise.all([probes.timesvc.stop(), probes.chronyd.stop()]);
      await service.close();
      await chrony.stop('SIGTERM');
      await up.close();
    },
  };
}

export interface ServerFigures {
  replies: number;
  synchronised: number;
  medianRootDispersionMs: number;
  /** The served root dispersion's 10th, 25th, 75th and 90th percentiles, ms. */
  rootDispersionPercentilesMs: [number, number, number, number];
  maxRootDispersionAfter10sMs: number;
  outsideBound: number;
  errorP50Ms: number;
}

function serverFigures(all: readonly ProbeRecord[], t0: number, untilS: number): ServerFigures {
  const records = all.filter((r) => r.atMs - t0 <= untilS * 1000);
  const synced = records.filter((r) => r.leap !== 3);
  const disp = synced.map((r) => r.rootDispersionS).sort((a, b) => a - b);
  const dispAt = (q: number): number => disp[Math.floor(q * disp.length)] ?? Number.NaN;
  const after10 = synced.filter((r) => r.atMs - t0 > 10_000).map((r) => r.rootDispersionS);
  const errs = synced.map((r) => Math.abs(r.errorS)).sort((a, b) => a - b);
  return {
    replies: records.length,
    synchronised: synced.length,
    medianRootDispersionMs: dispAt(0.5) * 1e3,
    rootDispersionPercentilesMs: [0.1, 0.25, 0.75, 0.9].map((q) => Math.round(dispAt(q) * 1e6) / 1e3) as [
      number,
      number,
      number,
      number,
    ],
    maxRootDispersionAfter10sMs: Math.max(0, ...after10) * 1e3,
    outsideBound: synced.filter(
      (r) => r.knowable && Math.abs(r.errorS) > r.rootDelayS / 2 + r.rootDispersionS + r.delayS / 2,
    ).length,
    errorP50Ms: (errs[errs.length >> 1] ?? Number.NaN) * 1e3,
  };
}

/** Both servers' figures over the first `untilS` seconds (all of the run by default). */
export function startupFigures(
  p: StartupPair,
  untilS = Number.POSITIVE_INFINITY,
): {
  timesvc: ServerFigures;
  chronyd: ServerFigures;
  maxUpdateAgeInPolls: number;
} {
  return {
    timesvc: serverFigures(p.probes.timesvc.records, p.t0, untilS),
    chronyd: serverFigures(p.probes.chronyd.records, p.t0, untilS),
    maxUpdateAgeInPolls: Math.max(
      0,
      ...p.updateAge.filter(([at]) => at - p.t0 <= untilS * 1000).map(([, age, poll]) => age / poll),
    ),
  };
}
