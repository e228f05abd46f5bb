/**
 * Who may talk to the bridge from a browser (docs/protocol.md "Host and Origin"). Both the HTTP API and the
 * WebSocket upgrade require a Host header that names this host (core's Host guard: an IP literal,
 * `localhost`, this machine's hostname or a configured name; else 421), so a rebinding DNS name cannot reach
 * it from another site's page. The
 * upgrade also checks `Origin` (RFC 6455 §4.2.1 item 8, §10.2): browsers always send it, other clients
 * usually do not; a present Origin must be this host (same scheme-less host and port as the Host header)
 * or one of the configured allowed origins, else the handshake is refused with 403.
 */
import { hostAllowed } from '@broadcast-ops/core';

/** `scheme://host[:port]` as browsers serialise an origin (RFC 6454 §6.2), lower case, default port dropped. */
export function normaliseOrigin(origin: string): string | undefined {
  let u: URL;
  try {
    u = new URL(origin);
  } catch {
    return undefined;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return undefined;
  if (u.pathname !== '/' || u.search !== '' || u.hash !== '' || u.username !== '' || u.password !== '')
    return undefined;
  return u.origin.toLowerCase();
}

/** A refusal's status: 421 for the Host (core's Host guard), 403 for the Origin. */
export type UpgradeVerdict = { ok: true } | { ok: false; status: 403 | 421; reason: string };

/**
 * The upgrade rule: Host as for the HTTP API; an absent Origin is a non-browser client and passes; a
 * present one must be `http(s)://<the Host header>` or in `allowedOrigins` (exact, normalised).
 */
export function upgradeAllowed(
  headers: { host?: string | undefined; origin?: string | string[] | undefined },
  allowedHosts: readonly string[],
  allowedOrigins: readonly string[],
): UpgradeVerdict {
  if (!hostAllowed(headers.host, allowedHosts))
    return { ok: false, status: 421, reason: 'Host header not accepted' };
  const raw = headers.origin;
  if (raw === undefined) return { ok: true };
  if (Array.isArray(raw)) return { ok: false, status: 403, reason: 'more than one Origin header' };
  const origin = normaliseOrigin(raw);
  if (origin === undefined) return { ok: false, status: 403, reason: 'Origin not accepted' };
  const host = (headers.host ?? '').toLowerCase();
  const own = new Set([`http://${host}`, `https://${host}`]);
  // A default port is dropped from a serialised origin but may be written in Host.
  if (host.endsWith(':80')) own.add(`http://${host.slice(0, -3)}`);
  if (host.endsWith(':443')) own.add(`https://${host.slice(0, -4)}`);
  if (own.has(origin)) return { ok: true };
  if (allowedOrigins.some((a) => normaliseOrigin(a) === origin)) return { ok: true };
  return { ok: false, status: 403, reason: 'Origin not accepted' };
}

/** An address only this machine can reach (127.0.0.0/8, ::1, localhost). */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}
