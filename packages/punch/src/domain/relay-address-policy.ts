import { BlockList, isIP } from 'node:net';

/**
 * Which peer addresses a relay allocation may send to (packages/punch/docs/relay.md, "Bounds"). A relay that
 * forwards to any address it is told is an open amplifier into the networks behind it, so, as coturn's
 * `denied-peer-ip` list does by default in its examples, destinations that are not globally routed are refused
 * unless the operator allows them: loopback, private-use (RFC 1918, RFC 6598 shared address space, RFC 4193
 * unique local), link-local (RFC 3927, RFC 4291), multicast, broadcast and unspecified addresses (RFC 6890's
 * special-purpose registry). `allow` takes CIDRs that are accepted even inside a refused range (a lab, or a
 * relay on the same private network as its peers).
 */
export type AddressRefusal =
  'not_an_ip' | 'loopback' | 'private' | 'link_local' | 'multicast' | 'unspecified';

const REFUSED: readonly (readonly [AddressRefusal, string, number, 'ipv4' | 'ipv6'])[] = [
  ['unspecified', '0.0.0.0', 8, 'ipv4'],
  ['loopback', '127.0.0.0', 8, 'ipv4'],
  ['private', '10.0.0.0', 8, 'ipv4'],
  ['private', '172.16.0.0', 12, 'ipv4'],
  ['private', '192.168.0.0', 16, 'ipv4'],
  ['private', '100.64.0.0', 10, 'ipv4'],
  ['link_local', '169.254.0.0', 16, 'ipv4'],
  ['multicast', '224.0.0.0', 4, 'ipv4'],
  // 240.0.0.0/4 (reserved) includes the limited broadcast address 255.255.255.255.
  ['multicast', '240.0.0.0', 4, 'ipv4'],
  ['unspecified', '::', 128, 'ipv6'],
  ['loopback', '::1', 128, 'ipv6'],
  ['private', 'fc00::', 7, 'ipv6'],
  ['link_local', 'fe80::', 10, 'ipv6'],
  ['multicast', 'ff00::', 8, 'ipv6'],
];

/** An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, as a dual-stack socket reports it) as plain IPv4. */
export function normaliseIp(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped?.[1] ?? address;
}

function parseCidr(cidr: string): { net: string; prefix: number; family: 'ipv4' | 'ipv6' } {
  const [net = '', prefixText] = cidr.split('/');
  const version = isIP(net);
  if (version === 0) throw new Error(`relay allow list: "${cidr}" is not an IP address or CIDR`);
  const max = version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max)
    throw new Error(`relay allow list: "${cidr}" has a prefix outside 0..${max}`);
  return { net, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

export class AddressPolicy {
  readonly #refused: { reason: AddressRefusal; list: BlockList }[];
  readonly #allowed = new BlockList();

  /** `allow`: CIDRs (or single addresses) accepted although a refused range holds them. Throws on a bad entry. */
  constructor(allow: readonly string[] = []) {
    const byReason = new Map<AddressRefusal, BlockList>();
    for (const [reason, net, prefix, family] of REFUSED) {
      const list = byReason.get(reason) ?? new BlockList();
      list.addSubnet(net, prefix, family);
      byReason.set(reason, list);
    }
    this.#refused = [...byReason].map(([reason, list]) => ({ reason, list }));
    for (const entry of allow) {
      const { net, prefix, family } = parseCidr(entry);
      this.#allowed.addSubnet(net, prefix, family);
    }
  }

  /** Why `address` may not be a relay destination, or undefined when it may. */
  refusal(address: string): AddressRefusal | undefined {
    const ip = normaliseIp(address);
    const version = isIP(ip);
    if (version === 0) return 'not_an_ip';
    const family = version === 4 ? 'ipv4' : 'ipv6';
    if (this.#allowed.check(ip, family)) return undefined;
    return this.#refused.find((r) => r.list.check(ip, family))?.reason;
  }
}
