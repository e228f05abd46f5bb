/**
 * A service's verdict from one poll: green / amber / red, the reason in words and a few figures. Pure: the
 * io layer hands in what it fetched (packages/status/README.md "Verdicts" lists the rules per kind).
 */
import type { ServiceKind } from './service.ts';
import { parseSamples, sampleValue, type Sample } from './prom-text.ts';

export type Level = 'green' | 'amber' | 'red';

/** One fetched URL: the status and parsed body, or why there is none. */
export type Fetched = { ok: true; status: number; body: string } | { ok: false; error: string };

export interface PollInput {
  health: Fetched;
  metrics?: Fetched;
  devices?: Fetched;
}

export type Figure = string | number | boolean | null;

export interface Verdict {
  level: Level;
  reason: string;
  figures: Record<string, Figure>;
  /** playout-monitor only: devices by state. */
  devices?: { online: number; offline: number };
}

const METRIC_NAMES = new Set([
  'punch_sessions_live',
  'punch_peers',
  'telemetry_bridge_adapter_state',
  'telemetry_bridge_subscribers_current',
  'timesvc_ntp_stratum',
  'timesvc_ptp_port_state',
  'timesvc_gpsdo_locked',
]);

/** IEEE 1588-2008 §8.2.5.3.1 portState, as timesvc_ptp_port_state reports it. */
const PTP_STATES: Record<number, string> = {
  1: 'INITIALIZING',
  2: 'FAULTY',
  3: 'DISABLED',
  4: 'LISTENING',
  5: 'PRE_MASTER',
  6: 'MASTER',
  7: 'PASSIVE',
  8: 'UNCALIBRATED',
  9: 'SLAVE',
};

function parseJson(f: Fetched | undefined): unknown {
  if (!f?.ok) return undefined;
  try {
    return JSON.parse(f.body) as unknown;
  } catch {
    return undefined;
  }
}

function json(f: Fetched): Record<string, unknown> | undefined {
  const v = parseJson(f);
  return v !== null && typeof v === 'object' && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}

function samplesOf(f: Fetched | undefined): Sample[] {
  return f?.ok && f.status === 200 ? parseSamples(f.body, METRIC_NAMES) : [];
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

/** Seconds in words at a useful precision: 12 µs, 3.4 ms, 1.2 s. */
export function formatSeconds(s: number): string {
  const a = Math.abs(s);
  if (a < 1e-3) return `${(s * 1e6).toFixed(a < 1e-5 ? 1 : 0)} µs`;
  if (a < 1) return `${(s * 1e3).toFixed(1)} ms`;
  return `${s.toFixed(1)} s`;
}

function worst(a: Level, b: Level): Level {
  const rank = { green: 0, amber: 1, red: 2 } as const;
  return rank[a] >= rank[b] ? a : b;
}

export function verdict(kind: ServiceKind, input: PollInput): Verdict {
  const h = input.health;
  if (!h.ok) return { level: 'red', reason: `no answer: ${h.error}`, figures: {} };
  const body = json(h);
  const samples = samplesOf(input.metrics);
  switch (kind) {
    case 'timesvc':
      return timesvc(h.status, body, samples);
    case 'punch':
      return punch(h.status, body, samples);
    case 'telemetry-bridge':
      return bridge(h.status, body, samples);
    case 'playout-monitor':
      return playout(h.status, body, input.devices);
    case 'http':
      return h.status >= 200 && h.status < 300
        ? { level: 'green', reason: `HTTP ${h.status}`, figures: {} }
        : { level: 'red', reason: `HTTP ${h.status}`, figures: {} };
  }
}

/** packages/timesvc/README.md "Endpoints and metrics": clock_state, estimated_error_s, reference. */
function timesvc(status: number, body: Record<string, unknown> | undefined, samples: Sample[]): Verdict {
  // timesvc writes the state in lower case (`locked`); shown in upper case as in its docs.
  const state = str(body?.['clock_state'])?.toUpperCase();
  if (!state)
    return { level: 'red', reason: `HTTP ${status}: no clock_state in the health body`, figures: {} };
  const error = num(body?.['estimated_error_s']);
  const stratum = sampleValue(samples, 'timesvc_ntp_stratum');
  const ptp = sampleValue(samples, 'timesvc_ptp_port_state');
  const gpsdo = sampleValue(samples, 'timesvc_gpsdo_locked');
  const figures: Record<string, Figure> = {
    clock_state: state,
    estimated_error: error === undefined ? null : formatSeconds(error),
    reference: str(body?.['reference']) ?? null,
    stratum: stratum ?? null,
  };
  if (ptp !== undefined) figures['ptp_state'] = PTP_STATES[ptp] ?? String(ptp);
  if (gpsdo !== undefined) figures['gpsdo'] = gpsdo === 1 ? 'locked' : 'not locked';
  const err = error === undefined ? '' : `, estimated error ${formatSeconds(error)}`;
  if (state === 'LOCKED') return { level: 'green', reason: `LOCKED${err}`, figures };
  if (state === 'HOLDOVER') return { level: 'amber', reason: `HOLDOVER: reference lost${err}`, figures };
  return { level: 'red', reason: `${state}: clients are served "unsynchronised"${err}`, figures };
}

/** packages/punch/README.md: /api/health `ok` or `degraded` (store failing); punch_peers{presence}. */
function punch(status: number, body: Record<string, unknown> | undefined, samples: Sample[]): Verdict {
  const live = sampleValue(samples, 'punch_sessions_live');
  const present = sampleValue(samples, 'punch_peers', { presence: 'present' });
  const absent = sampleValue(samples, 'punch_peers', { presence: 'absent' });
  const figures: Record<string, Figure> = {
    sessions: live ?? null,
    peers_present: present ?? null,
    peers_gone: absent ?? null,
  };
  const s = str(body?.['status']);
  if (s === 'ok' && status === 200) {
    if (absent !== undefined && absent > 0)
      return { level: 'amber', reason: `${absent} peer(s) of a live stream gone (grace period)`, figures };
    return { level: 'green', reason: `ok, ${live ?? '?'} live session(s)`, figures };
  }
  if (s === 'degraded') {
    const store = body?.['store'] as Record<string, unknown> | undefined;
    return { level: 'amber', reason: `degraded: store ${str(store?.['error']) ?? 'failing'}`, figures };
  }
  return { level: 'red', reason: `HTTP ${status}${s ? ` ${s}` : ''}`, figures };
}

/** telemetry-bridge /health: status healthy | degraded | unhealthy (503), dependencies[]. */
function bridge(status: number, body: Record<string, unknown> | undefined, samples: Sample[]): Verdict {
  const companion = sampleValue(samples, 'telemetry_bridge_adapter_state', {
    adapter: 'companion.satellite',
  });
  const clients =
    sampleValue(samples, 'telemetry_bridge_subscribers_current') ??
    num((body?.['metrics'] as Record<string, unknown> | undefined)?.['clients']);
  const figures: Record<string, Figure> = {
    companion: companion === undefined ? null : companion === 1 ? 'connected' : 'lost',
    clients: clients ?? null,
  };
  const s = str(body?.['status']);
  const deps = Array.isArray(body?.['dependencies'])
    ? (body['dependencies'] as Record<string, unknown>[])
    : [];
  const bad = deps
    .filter((d) => d['status'] !== 'healthy')
    .map(
      (d) =>
        `${str(d['name']) ?? '?'} ${str(d['status']) ?? ''}${str(d['error']) ? ` (${str(d['error'])})` : ''}`,
    );
  let level: Level = s === 'healthy' ? 'green' : s === 'degraded' ? 'amber' : 'red';
  const reasons = s === 'healthy' ? [] : [bad.join(', ') || `HTTP ${status} ${s ?? ''}`.trim()];
  if (companion === 0) {
    level = worst(level, 'amber');
    reasons.push('Companion link lost');
  }
  return { level, reason: reasons.join('; ') || `healthy, ${clients ?? '?'} client(s)`, figures };
}

/** playout-monitor /health (spec: healthy when a device is connected) and /api/devices (reasons). */
function playout(
  status: number,
  body: Record<string, unknown> | undefined,
  devicesF: Fetched | undefined,
): Verdict {
  const devicesBody = parseJson(devicesF);
  const fromHealth = (body?.['devices'] as Record<string, unknown> | undefined)?.['list'];
  const list = (
    Array.isArray(devicesBody) ? devicesBody : Array.isArray(fromHealth) ? fromHealth : []
  ) as Record<string, unknown>[];
  if (status !== 200 || !body)
    return { level: 'red', reason: `HTTP ${status}`, figures: {}, devices: { online: 0, offline: 0 } };
  const offline = list.filter((d) => d['connected'] !== true);
  const online = list.length - offline.length;
  const figures: Record<string, Figure> = { devices: list.length, online, offline: offline.length };
  const devices = { online, offline: offline.length };
  if (list.length === 0) return { level: 'amber', reason: 'no devices configured', figures, devices };
  if (offline.length === 0)
    return { level: 'green', reason: `${online} of ${list.length} devices online`, figures, devices };
  const names = offline
    .slice(0, 3)
    .map(
      (d) => `${str(d['name']) ?? `#${String(d['id'])}`}${str(d['reason']) ? ` (${str(d['reason'])})` : ''}`,
    )
    .join(', ');
  const more = offline.length > 3 ? ` and ${offline.length - 3} more` : '';
  return {
    level: online === 0 ? 'red' : 'amber',
    reason: `${offline.length} of ${list.length} devices offline: ${names}${more}`,
    figures,
    devices,
  };
}
