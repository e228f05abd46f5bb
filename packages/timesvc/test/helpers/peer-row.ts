// A `timesvc sources` row for the format tests, socket-free (helpers/cli.ts re-exports it).
import type { PeerRow } from '../../src/io/cli/format.ts';

/** A row of `GET /api/peers` as the CLI reads it: a reachable stratum-2 source, `over` replacing fields. */
export function peerRow(over: Partial<PeerRow> = {}, stats: Partial<PeerRow['sourcestats']> = {}): PeerRow {
  return {
    address: '192.0.2.1:123',
    stratum: 2,
    poll: 6,
    reach: 255,
    reachable: true,
    selected: false,
    verdict: 'candidate',
    offset_us: 12,
    jitter_us: 3,
    root_distance_us: 900,
    last_sample_age_s: 300,
    last_rx_age_s: 20,
    nts_enabled: false,
    ...over,
    sourcestats: {
      samples: 0,
      span_s: 0,
      frequency_ppm: null,
      skew_ppm: null,
      offset_us: null,
      stddev_us: null,
      ...stats,
    },
  };
}
