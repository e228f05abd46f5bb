import { BlockList, isIP } from 'node:net';

/**
 * The client's address, one function for every transport (HTTP requests now, WebSocket upgrades next):
 * the address peers learn, the address logged, and (reduced to a key) the address rate limits count.
 *
 * `X-Forwarded-For` (de-facto standard; RFC 7239 §5.2 describes the same list for `Forwarded: for=`) is a
 * comma-separated list that every proxy *appends* to: `client, proxy1, proxy2`, and the socket peer is the
 * last proxy. Only entries written by proxies we trust can be believed; anything left of them may be forged
 * by the client. So the chain is read from the right: the socket peer, then the header's entries from
 * right to left, skipping those that are trusted proxies; the first untrusted one is the client. "Trusted"
 * is either a count of proxy hops in front of the broker, or a list of proxy networks (CIDR). With neither,
 * the header is ignored and the socket's address is the client.
 *
 * Addresses are normalised: IPv4-mapped IPv6 (`::ffff:192.0.2.1`) becomes IPv4, brackets and ports are
 * stripped from header entries.
 */
export type TrustPolicy =
  | { kind: 'none' }
  | { kind: 'hops'; hops: number }
  | { kind: 'networks'; networks: BlockList; cidrs: string[] };

export function normaliseAddress(raw: string): string {
  let a = raw.trim();
  if (a.startsWith('[')) {
    const end = a.indexOf(']');
    a = end > 0 ? a.slice(1, end) : a;
  } else if (a.includes('.') && a.split(':').length === 2) {
    a = a.slice(0, a.indexOf(':')); // IPv4 with a port
  }
  const zone = a.indexOf('%');
  if (zone > 0 && a.includes(':')) a = a.slice(0, zone);
  if (a.toLowerCase().startsWith('::ffff:') && isIP(a.slice(7)) === 4) a = a.slice(7);
  return a.toLowerCase();
}

function isTrusted(policy: TrustPolicy, address: string): boolean {
  if (policy.kind !== 'networks') return false;
  const family = isIP(address);
  return family !== 0 && policy.networks.check(address, family === 6 ? 'ipv6' : 'ipv4');
}

/** The client's address from the socket peer and the `X-Forwarded-For` header(s), under `policy`. */
export function clientAddress(
  socketAddress: string | undefined,
  forwardedFor: string | string[] | undefined,
  policy: TrustPolicy,
): string {
  const peer = normaliseAddress(socketAddress ?? '');
  if (policy.kind === 'none' || forwardedFor === undefined) return peer || 'unknown';
  const header = Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor;
  // At most 32 entries are read (a header is bounded by the server's header size limit anyway).
  const entries = header
    .split(',')
    .slice(-32)
    .map((e) => normaliseAddress(e))
    .filter((e) => e !== '');
  // The chain from the client side to us: header entries, then the socket peer (the nearest proxy).
  const chain = [...entries, peer];
  if (policy.kind === 'hops') {
    // The right-most `hops` addresses are our proxies; the one before them is the client.
    const index = chain.length - 1 - policy.hops;
    const candidate = chain[Math.max(0, index)] ?? peer;
    return isIP(candidate) !== 0 ? candidate : peer || 'unknown';
  }
  if (!isTrusted(policy, peer)) return peer || 'unknown';
  let nearestValid = peer;
  for (let i = chain.length - 2; i >= 0; i--) {
    const a = chain[i] ?? '';
    if (isIP(a) === 0) return nearestValid; // garbage left of a trusted proxy: the proxy is the client
    if (!isTrusted(policy, a)) return a;
    nearestValid = a;
  }
  return nearestValid;
}

/**
 * Parse `PUNCH_TRUST_PROXY`: `off`/`0` (default): ignore the header; `on` = 1 hop; a number N = N hops;
 * otherwise a comma-separated list of networks (`10.0.0.0/8, 2001:db8::/32`, a bare address = /32 or /128).
 */
export function parseTrustPolicy(value: string | number | boolean): TrustPolicy {
  if (value === false || value === 0) return { kind: 'none' };
  if (value === true) return { kind: 'hops', hops: 1 };
  const v = String(value).trim().toLowerCase();
  if (v === '' || v === 'off' || v === 'no' || v === 'false' || v === '0') return { kind: 'none' };
  if (v === 'on' || v === 'yes' || v === 'true') return { kind: 'hops', hops: 1 };
  if (/^\d+$/.test(v)) {
    const hops = Number(v);
    if (hops > 10) throw new Error('trustProxy: at most 10 proxy hops');
    return hops === 0 ? { kind: 'none' } : { kind: 'hops', hops };
  }
  const networks = new BlockList();
  const cidrs: string[] = [];
  for (const part of v
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const [addr = '', bitsRaw] = part.split('/');
    const family = isIP(addr);
    if (family === 0) throw new Error(`trustProxy: "${part}" is neither a hop count nor an address/network`);
    const max = family === 4 ? 32 : 128;
    const bits = bitsRaw === undefined ? max : Number(bitsRaw);
    if (!Number.isInteger(bits) || bits < 0 || bits > max)
      throw new Error(`trustProxy: bad prefix in "${part}"`);
    networks.addSubnet(addr, bits, family === 4 ? 'ipv4' : 'ipv6');
    cidrs.push(`${addr}/${bits}`);
  }
  if (cidrs.length === 0) return { kind: 'none' };
  return { kind: 'networks', networks, cidrs };
}

function ipv6ToBigInt(address: string): bigint | undefined {
  let a = address;
  // An embedded IPv4 tail (`::ffff:1.2.3.4`, `64:ff9b::1.2.3.4`) becomes two groups.
  const lastColon = a.lastIndexOf(':');
  const tail = a.slice(lastColon + 1);
  if (tail.includes('.')) {
    const o = tail.split('.').map(Number);
    if (o.length !== 4 || o.some((x) => !(x >= 0 && x <= 255))) return undefined;
    const [b0 = 0, b1 = 0, b2 = 0, b3 = 0] = o;
    a = `${a.slice(0, lastColon + 1)}${((b0 << 8) | b1).toString(16)}:${((b2 << 8) | b3).toString(16)}`;
  }
  const halves = a.split('::');
  if (halves.length > 2) return undefined;
  const head = halves[0] ? halves[0].split(':') : [];
  const rest = halves.length === 2 && halves[1] ? halves[1].split(':') : [];
  const fill = 8 - head.length - rest.length;
  if (fill < 0 || (halves.length === 1 && fill !== 0)) return undefined;
  const groups = [...head, ...Array<string>(fill).fill('0'), ...rest];
  let v = 0n;
  for (const g of groups) v = (v << 16n) | BigInt(parseInt(g || '0', 16));
  return v;
}

/**
 * The rate-limit key of an address: IPv4 as is; IPv6 reduced to its first `ipv6PrefixBits` bits (default
 * 64: one subscriber or LAN usually gets a whole /64, so its addresses share one limit; RFC 6177 §2).
 */
export function rateLimitKey(address: string, ipv6PrefixBits = 64): string {
  if (isIP(address) !== 6) return address;
  const v = ipv6ToBigInt(address);
  if (v === undefined) return address;
  const bits = BigInt(Math.max(0, Math.min(128, ipv6PrefixBits)));
  const masked = bits === 0n ? 0n : (v >> (128n - bits)) << (128n - bits);
  return `${masked.toString(16).padStart(32, '0')}/${bits}`;
}
