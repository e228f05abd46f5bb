import { createHash } from 'node:crypto';

/** Textual IP address helpers shared by the rate limiter, the access list and the refid rule. */

/**
 * An IPv4-mapped IPv6 address as IPv4: `::ffff:a.b.c.d` as dual-stack sockets report IPv4 clients, and any
 * other spelling of ::ffff:0:0/96 (`::ffff:c000:201`, `0:0:0:0:0:ffff:0:0`), so that the text and the raw
 * address bytes (ip-address.ts addressText, the native thread's records) name one client the same way.
 */
export function unmapIpv4(address: string): string {
  if (!address.includes(':')) return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped?.[1]) return mapped[1];
  const g = expandIpv6(address);
  if (!g || g.slice(0, 5).some((x) => x !== 0) || g[5] !== 0xffff) return address;
  const [hi = 0, lo = 0] = g.slice(6);
  return `${hi >>> 8}.${hi & 0xff}.${lo >>> 8}.${lo & 0xff}`;
}

/** Expand textual IPv6 (with `::` and an optional `%zone`) to eight 16-bit groups, or undefined. */
export function expandIpv6(text: string): number[] | undefined {
  const addr = text.split('%')[0] ?? '';
  let tail: number[] = [];
  let body = addr;
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(addr);
  if (v4) {
    const o = v4.slice(1, 5).map(Number);
    if (o.some((x) => x > 255)) return undefined;
    tail = [((o[0] ?? 0) << 8) | (o[1] ?? 0), ((o[2] ?? 0) << 8) | (o[3] ?? 0)];
    body = addr.slice(0, v4.index);
    if (body.endsWith(':') && !body.endsWith('::')) body = body.slice(0, -1);
  }
  const parse = (s: string): number[] | undefined => {
    if (s === '') return [];
    const parts = s.split(':');
    const out: number[] = [];
    for (const p of parts) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(p)) return undefined;
      out.push(parseInt(p, 16));
    }
    return out;
  };
  const halves = body.split('::');
  if (halves.length > 2) return undefined;
  const head = parse(halves[0] ?? '');
  if (head === undefined) return undefined;
  if (halves.length === 1) {
    const all = [...head, ...tail];
    return all.length === 8 ? all : undefined;
  }
  const rest = parse(halves[1] ?? '');
  if (rest === undefined) return undefined;
  const known = head.length + rest.length + tail.length;
  if (known > 7) return undefined;
  return [...head, ...new Array<number>(8 - known).fill(0), ...rest, ...tail];
}

/** RFC 5952 text of the IPv6 address at a[o, o + 16): lower case, the longest run of zero groups as "::". */
export function ipv6Text(a: Uint8Array, o: number): string {
  const g: number[] = [];
  for (let i = 0; i < 8; i++) g.push(((a[o + 2 * i] ?? 0) << 8) | (a[o + 2 * i + 1] ?? 0));
  // IPv4-mapped addresses are printed with a dotted tail, as Node does (::ffff:192.0.2.1).
  if (g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff) {
    return `::ffff:${a[o + 12]}.${a[o + 13]}.${a[o + 14]}.${a[o + 15]}`;
  }
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (from: number, to: number): string =>
    g
      .slice(from, to)
      .map((v) => v.toString(16))
      .join(':');
  if (bestStart < 0) return hex(0, 8);
  return `${hex(0, bestStart)}::${hex(bestStart + bestLen, 8)}`;
}

/**
 * The refid for an upstream server at `address` (RFC 5905 §7.3): an IPv4 address as a u32, or the first
 * four octets of the MD5 hash of an IPv6 address.
 */
export function addressRefId(address: string): number {
  if (!address.includes(':')) return ipv4RefId(address);
  const bytes = Buffer.alloc(16);
  (expandIpv6(address) ?? []).forEach((g, i) => bytes.writeUInt16BE(g & 0xffff, i * 2));
  return createHash('md5').update(bytes).digest().readUInt32BE(0);
}

/** The refid for an IPv4 system peer (RFC 5905 §7.3): its address as a u32. */
export function ipv4RefId(address: string): number {
  const parts = address.split('.').map(Number);
  return (((parts[0] ?? 0) << 24) | ((parts[1] ?? 0) << 16) | ((parts[2] ?? 0) << 8) | (parts[3] ?? 0)) >>> 0;
}
