import { BlockList, isIP } from 'node:net';
import { unmapIpv4 } from './ip-address.ts';

/**
 * `ntp.allowed_networks` (README "Configuration"): CIDR blocks whose clients get time; an empty list allows all.
 * Anyone else gets a DENY kiss (RFC 5905 §7.4 kiss codes; README "NTP server"). IPv4-mapped IPv6 sources are matched as IPv4.
 */
export class AccessList {
  readonly #list = new BlockList();
  readonly #empty: boolean;
  /** The networks as parsed (the native responder matches the same ones). */
  readonly networks: readonly ParsedNetwork[];

  constructor(networks: readonly string[]) {
    this.#empty = networks.length === 0;
    this.networks = networks.map(parseNetwork);
    for (const parsed of this.networks) this.#list.addSubnet(parsed.address, parsed.prefix, parsed.family);
  }

  allows(address: string): boolean {
    if (this.#empty) return true;
    const a = unmapIpv4(address);
    const family = isIP(a);
    if (family === 0) return false;
    return this.#list.check(a, family === 4 ? 'ipv4' : 'ipv6');
  }
}

export interface ParsedNetwork {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

/** `10.0.0.0/8`, `2001:db8::/32`, or a bare address (a /32 or /128). Throws RangeError with the text. */
export function parseNetwork(text: string): ParsedNetwork {
  const [address = '', prefixText, extra] = text.trim().split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined) throw new RangeError(`"${text}" is not an IP network (CIDR)`);
  const max = family === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max || (prefixText ?? '0').trim() === '') {
    throw new RangeError(`"${text}": prefix length must be 0-${max}`);
  }
  return { address, prefix, family: family === 4 ? 'ipv4' : 'ipv6' };
}
