/**
 * The `npm start` port plan, pure: which ports the stack will listen on for a given `--port-offset`, and
 * whether a browser (or Node's `fetch`) will talk to them. No sockets, files or environment here; the launcher
 * (scripts/start-stack.ts) reads the packages' `toolkit.start` entries and tries the ports it gets from here.
 *
 * Browsers and Node's `fetch` (undici) refuse a URL whose port is on the Fetch standard's "bad port" list
 * (https://fetch.spec.whatwg.org/#port-blocking) with a network error before any connection is made: a demo
 * page, health URL or WebSocket moved onto one of them would be unreachable from the operator's browser, so a
 * plan that puts any TCP port there is refused before anything starts. UDP ports (NTP, OSC) are not fetched and
 * are not checked against the list.
 */

/** https://fetch.spec.whatwg.org/#port-blocking ("bad port"), as of the standard's 2024 revision. */
export const FETCH_BAD_PORTS: ReadonlySet<number> = new Set([
  0, 1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104,
  109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515,
  526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049,
  3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
]);

/** The landing page's port before any offset. */
export const LANDING_PORT = 8600;
/** The offsets `--port-offset` accepts. */
export const OFFSET_MIN = -8000;
export const OFFSET_MAX = 50_000;
/** Suggested offsets are multiples of this, as in the docs' examples. */
export const OFFSET_STEP = 100;

export interface PlanUrl {
  label: string;
  url: string;
}

export interface PlanPort {
  label: string;
  proto?: 'tcp' | 'udp';
  port?: number | string;
  /** The stack sends to this port rather than listening on it. */
  outbound?: boolean;
}

/** What the plan needs of a service's `toolkit.start` (after `${VAR}` substitution, before any offset). */
export interface PlanService {
  name: string;
  ready?: string;
  urls?: PlanUrl[];
  ports?: PlanPort[];
}

export interface Claim {
  service: string;
  label: string;
  proto: 'tcp' | 'udp';
  port: number;
}

export function shiftPort(port: number, offset: number): number {
  return port === 0 ? 0 : port + offset;
}

/** `scheme://host:PORT/...` with the port moved by the offset. */
export function shiftUrl(url: string, offset: number): string {
  return url.replace(/^(\w+:\/\/[^/:]+|\w+:\/\/\[[^\]]+\]):(\d+)/, (_m, head: string, port: string) => {
    return `${head}:${shiftPort(Number(port), offset)}`;
  });
}

/** Every port the stack listens on with this offset, with who wants it (first claim of a port wins). */
export function planClaims(services: readonly PlanService[], offset: number): Claim[] {
  const out = new Map<string, Claim>();
  const add = (c: Claim): void => {
    if (c.port !== 0 && !out.has(`${c.proto}/${c.port}`)) out.set(`${c.proto}/${c.port}`, c);
  };
  add({ service: 'start-stack', label: 'landing page', proto: 'tcp', port: shiftPort(LANDING_PORT, offset) });
  for (const s of services) {
    const urls = [...(s.urls ?? []), ...(s.ready ? [{ label: 'health', url: s.ready }] : [])];
    for (const u of urls) {
      const m = /^(?:https?|wss?):\/\/(?:127\.0\.0\.1|localhost|\[::1\]):(\d+)/.exec(shiftUrl(u.url, offset));
      if (m) add({ service: s.name, label: u.label, proto: 'tcp', port: Number(m[1]) });
    }
    for (const p of s.ports ?? []) {
      if (p.port !== undefined && p.proto && !p.outbound)
        add({ service: s.name, label: p.label, proto: p.proto, port: shiftPort(Number(p.port), offset) });
    }
  }
  return [...out.values()];
}

export interface Refusal {
  claim: Claim;
  why: string;
}

/** The claims a plan cannot keep: outside 1-65535, or a TCP port on the Fetch standard's bad-port list. */
export function refusals(claims: readonly Claim[]): Refusal[] {
  const out: Refusal[] = [];
  for (const claim of claims) {
    if (!Number.isInteger(claim.port) || claim.port < 1 || claim.port > 65_535)
      out.push({ claim, why: 'outside 1-65535' });
    else if (claim.proto === 'tcp' && FETCH_BAD_PORTS.has(claim.port))
      out.push({ claim, why: 'refused by browsers and fetch (Fetch standard "bad port")' });
  }
  return out;
}

export type PlanResult =
  | { ok: true; offset: number; claims: Claim[] }
  | { ok: false; offset: number; claims: Claim[]; refused: Refusal[]; suggestion: number | undefined };

/** The plan for an offset, or why not and the nearest offset above it (a multiple of OFFSET_STEP) that works. */
export function checkPlan(services: readonly PlanService[], offset: number): PlanResult {
  const claims = planClaims(services, offset);
  const refused = refusals(claims);
  if (refused.length === 0) return { ok: true, offset, claims };
  return { ok: false, offset, claims, refused, suggestion: nextGoodOffset(services, offset) };
}

/** The first multiple of OFFSET_STEP above `offset` (up to OFFSET_MAX) whose plan is not refused. */
export function nextGoodOffset(services: readonly PlanService[], offset: number): number | undefined {
  for (let o = (Math.floor(offset / OFFSET_STEP) + 1) * OFFSET_STEP; o <= OFFSET_MAX; o += OFFSET_STEP) {
    if (refusals(planClaims(services, o)).length === 0) return o;
  }
  return undefined;
}

/** The console text for a refused plan: each port named with its service and the way out. */
export function describeRefusal(result: Extract<PlanResult, { ok: false }>, envName: string): string {
  const rows = result.refused.map((r) => ({
    port: `${r.claim.port}/${r.claim.proto}`,
    service: r.claim.service,
    rest: `${r.claim.label}: ${r.why}`,
  }));
  const w = Math.max(...rows.map((r) => r.port.length));
  const sw = Math.max(...rows.map((r) => r.service.length));
  const lines = [
    `start-stack: --port-offset ${result.offset} puts ports where they cannot be used (nothing was started):`,
    ...rows.map((r) => `  ${r.port.padEnd(w)}  ${r.service.padEnd(sw)}  ${r.rest}`),
  ];
  if (result.suggestion !== undefined)
    lines.push(
      `Use a working offset: npm start -- --port-offset ${result.suggestion}   (or ${envName}=${result.suggestion} npm start)`,
    );
  else lines.push(`No offset above ${result.offset} up to ${OFFSET_MAX} works; try a smaller one.`);
  return lines.join('\n');
}
