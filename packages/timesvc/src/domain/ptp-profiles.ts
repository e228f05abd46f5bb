/**
 * PTP profiles (docs/ptp.md "Profiles"): the values a profile sets and the range it allows for each port
 * setting. A setting left out of the configuration takes the profile's value; one given outside the
 * profile's range is refused by config validation with its key named.
 *
 * Sources: IEEE 1588-2008 Annex J.3 (the default Delay Request-Response profile), SMPTE ST 2059-2 and the
 * AES67 media profile as tabulated in AES-R16-2016 (the AES67/SMPTE compatibility report) and in switch and
 * gateway vendors' published profile tables. Where a source gives a value but no range, only that value is
 * allowed. logMinDelayReqInterval is held to logSyncInterval … logSyncInterval + 5 in every profile
 * (IEEE 1588-2008 §7.7.2.4); each profile's own bound applies on top. Left out, it follows a Sync interval
 * set slower than the profile's own delay-request value.
 */

export const PTP_PROFILES = ['default', 'smpte-2059-2', 'aes67', 'aes67-smpte'] as const;
export type PtpProfileName = (typeof PTP_PROFILES)[number];

/** [default, min, max] */
type Range = readonly [number, number, number];

export interface PtpProfile {
  /** What the profile is called in its source, for the status page. */
  title: string;
  domain: Range;
  log_announce_interval: Range;
  announce_receipt_timeout: Range;
  log_sync_interval: Range;
  log_min_delay_req_interval: Range;
  priority1: Range;
  priority2: Range;
  /** DiffServ code points for event (319) and general (320) messages; the profile's, or 0 (best effort). */
  dscp_event: Range;
  dscp_general: Range;
}

const ANY_DSCP = (v: number): Range => [v, 0, 63];

export const PROFILE_TABLE: Record<PtpProfileName, PtpProfile> = {
  default: {
    title: 'IEEE 1588-2008 default (Delay Request-Response, Annex J.3)',
    domain: [0, 0, 127],
    log_announce_interval: [1, 0, 4],
    announce_receipt_timeout: [3, 2, 255],
    log_sync_interval: [0, -1, 1],
    log_min_delay_req_interval: [0, -1, 6],
    priority1: [128, 0, 255],
    priority2: [128, 0, 255],
    dscp_event: ANY_DSCP(0),
    dscp_general: ANY_DSCP(0),
  },
  'smpte-2059-2': {
    title: 'SMPTE ST 2059-2',
    domain: [127, 0, 127],
    log_announce_interval: [-2, -3, 1],
    announce_receipt_timeout: [3, 2, 10],
    log_sync_interval: [-3, -7, -1],
    log_min_delay_req_interval: [-3, -7, 4],
    priority1: [128, 0, 255],
    priority2: [128, 0, 255],
    dscp_event: ANY_DSCP(0),
    dscp_general: ANY_DSCP(0),
  },
  aes67: {
    title: 'AES67 media profile',
    domain: [0, 0, 127],
    log_announce_interval: [1, 0, 4],
    announce_receipt_timeout: [3, 2, 10],
    log_sync_interval: [-3, -4, 1],
    log_min_delay_req_interval: [-3, -4, 6],
    priority1: [128, 0, 255],
    priority2: [128, 0, 255],
    // AES67 quality of service (DiffServ), as AES-R16-2016 tabulates it: event messages Expedited
    // Forwarding (46), general messages AF41 (34).
    dscp_event: ANY_DSCP(46),
    dscp_general: ANY_DSCP(34),
  },
  'aes67-smpte': {
    title: 'AES67 + SMPTE ST 2059-2 compatible (AES-R16-2016)',
    domain: [0, 0, 127],
    log_announce_interval: [0, 0, 1],
    announce_receipt_timeout: [3, 3, 3],
    log_sync_interval: [-3, -4, -1],
    log_min_delay_req_interval: [-3, -4, 4],
    priority1: [128, 0, 255],
    priority2: [128, 0, 255],
    dscp_event: ANY_DSCP(46),
    dscp_general: ANY_DSCP(34),
  },
};

export type ProfileKey = Exclude<keyof PtpProfile, 'title'>;
export const PROFILE_KEYS: readonly ProfileKey[] = [
  'domain',
  'log_announce_interval',
  'announce_receipt_timeout',
  'log_sync_interval',
  'log_min_delay_req_interval',
  'priority1',
  'priority2',
  'dscp_event',
  'dscp_general',
];

export type ProfileValues = Record<ProfileKey, number>;

export type ProfileResult =
  { ok: true; values: ProfileValues } | { ok: false; key: ProfileKey; message: string };

/** The profile's values with the given overrides, or the first override outside the profile's range. */
export function resolveProfile(
  name: PtpProfileName,
  given: { [K in ProfileKey]?: number | undefined },
): ProfileResult {
  const p = PROFILE_TABLE[name];
  const values = {} as ProfileValues;
  for (const key of PROFILE_KEYS) {
    const [dflt, min, max] = p[key];
    const v = given[key] ?? dflt;
    if (!Number.isInteger(v) || v < min || v > max)
      return {
        ok: false,
        key,
        message: `${v} is outside the ${name} profile's range ${min}…${max} (its value: ${dflt})`,
      };
    values[key] = v;
  }
  const sync = values.log_sync_interval;
  // Left out, the delay-request interval follows a slower Sync rather than refuse the profile's own value.
  if (given.log_min_delay_req_interval === undefined && values.log_min_delay_req_interval < sync)
    values.log_min_delay_req_interval = Math.min(sync, p.log_min_delay_req_interval[2]);
  const req = values.log_min_delay_req_interval;
  if (req < sync || req > sync + 5)
    return {
      ok: false,
      key: 'log_min_delay_req_interval',
      message: `${req} must lie within log_sync_interval (${sync}) … log_sync_interval + 5 (IEEE 1588-2008 §7.7.2.4)`,
    };
  return { ok: true, values };
}
