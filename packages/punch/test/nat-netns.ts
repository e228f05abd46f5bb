import { execFileSync } from 'node:child_process';
import { removeNamespace, sh } from './netns.ts';

/**
 * The NAT matrix's network (docs/relay.md "NAT matrix"), in network namespaces created and deleted by the
 * test (names carry the pid): an "internet" router I, the broker's namespace R on a network of its own
 * (198.18.3.0/24), and per side s (1, 2) a gateway namespace G<s> on 198.18.s.0/24 with a private network
 * behind it to the peer's namespace P<s>. Addresses are from 198.18.0.0/15 (RFC 2544's range for device
 * tests; not refused by the relay's address policy) and 10.0.s.0/24 behind a NAT, only inside the
 * namespaces. The gateway's nftables ruleset is the NAT kind (`natRules`).
 */
export type NatKind = 'none' | 'full-cone' | 'address-restricted' | 'symmetric';

/** The SRT port both peers bind (the broker gives both ends of a stream the same port). */
export const MATRIX_SRT_PORT = 9200;

export interface NatSide {
  kind: NatKind;
  gw: string;
  peer: string;
  /** The peer's own address, and the address the rest of the network sees it from. */
  peerIp: string;
  publicIp: string;
  /** nft in the gateway, e.g. `nft('list', 'ruleset')` for the counters. */
  nft: (...args: string[]) => string;
  /** Packets counted by the first counter of a chain of the gateway's table. */
  counter: (chain: string) => number;
  remove: () => void;
}

export interface NatWorld {
  inet: string;
  broker: string;
  brokerIp: string;
  side: (s: 1 | 2, kind: NatKind) => NatSide;
  remove: () => void;
}

const run = `${process.pid % 100_000}`;
const ns = (tag: string) => `punch-nm${tag}-${run}`;

function addNamespace(name: string): void {
  removeNamespace(name);
  sh('ip', ['netns', 'add', name]);
  sh('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
  sh('ip', ['netns', 'exec', name, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
}

/** A veth link from `left` to `right`, named `ln`/`rn` inside them, with /24 addresses. */
function link(
  tag: string,
  left: string,
  ln: string,
  lip: string,
  right: string,
  rn: string,
  rip: string,
): void {
  const [l, r] = [`nm${tag}${run}l`, `nm${tag}${run}r`];
  sh('ip', ['link', 'add', l, 'type', 'veth', 'peer', 'name', r]);
  for (const [dev, space, name, ip] of [
    [l, left, ln, lip],
    [r, right, rn, rip],
  ] as const) {
    sh('ip', ['link', 'set', dev, 'netns', space]);
    sh('ip', ['-n', space, 'link', 'set', dev, 'name', name]);
    sh('ip', ['-n', space, 'addr', 'add', `${ip}/24`, 'dev', name]);
    sh('ip', ['-n', space, 'link', 'set', name, 'up']);
  }
}

/**
 * The gateway's ruleset for a NAT kind; `wan` faces the internet, `lan` the peer at `peerIp`, `pub` is the
 * gateway's public address (docs/relay.md "NAT matrix" explains each).
 */
export function natRules(kind: NatKind, peerIp: string, pub: string): string {
  const port = MATRIX_SRT_PORT;
  switch (kind) {
    case 'none':
      return '';
    case 'full-cone':
      // An explicit port map: the public SRT port always leads to the peer, from anyone, and the peer's
      // SRT port always leaves as that public port; everything else is masqueraded.
      return `table ip punchnat {
        chain nat_prerouting { type nat hook prerouting priority dstnat; policy accept;
          iifname "wan" udp dport ${port} counter dnat to ${peerIp}:${port}
        }
        chain nat_postrouting { type nat hook postrouting priority srcnat; policy accept;
          oifname "wan" ip saddr ${peerIp} udp sport ${port} counter snat to ${pub}:${port}
          oifname "wan" masquerade
        }
      }`;
    case 'address-restricted':
      // Endpoint-independent mapping: masquerade keeps the source port when the public tuple is free
      // (no random-fully), so the peer's SRT port leaves as the same public port to every destination.
      // Filtering by remote address only: the set `contacted` holds every address the private side has
      // sent to; anything from another address is dropped before conntrack sees it (priority raw, so an
      // unsolicited datagram creates no conntrack entry that would take the public port), and a datagram
      // from a contacted address to the public SRT port reaches the peer whatever its source port.
      return `table ip punchnat {
        set contacted { type ipv4_addr; flags dynamic, timeout; timeout 120s; }
        chain raw_prerouting { type filter hook prerouting priority raw; policy accept;
          iifname "wan" ip saddr != @contacted counter drop
        }
        chain filter_forward { type filter hook forward priority filter; policy accept;
          iifname "lan" oifname "wan" update @contacted { ip daddr }
        }
        chain nat_prerouting { type nat hook prerouting priority dstnat; policy accept;
          iifname "wan" udp dport ${port} counter dnat to ${peerIp}:${port}
        }
        chain nat_postrouting { type nat hook postrouting priority srcnat; policy accept;
          oifname "wan" masquerade
        }
      }`;
    case 'symmetric':
      // Endpoint-dependent mapping: every new flow gets a random public port (MASQUERADE --random-fully);
      // nothing unsolicited gets in (conntrack: only replies to a flow's own remote address and port).
      return `table ip punchnat {
        chain filter_input { type filter hook input priority filter; policy accept;
          iifname "wan" ct state new counter drop
        }
        chain filter_forward { type filter hook forward priority filter; policy accept;
          iifname "wan" ct state new counter drop
        }
        chain nat_postrouting { type nat hook postrouting priority srcnat; policy accept;
          oifname "wan" counter masquerade fully-random
        }
      }`;
  }
}

export function createNatWorld(): NatWorld {
  const inet = ns('I');
  const broker = ns('R');
  const brokerIp = '198.18.3.2';
  const sides: NatSide[] = [];
  const world: NatWorld = {
    inet,
    broker,
    brokerIp,
    side: (s, kind) => {
      const gw = ns(`G${s}`);
      const peer = ns(`P${s}`);
      const wan = `198.18.${s}.2`;
      // Without NAT the peer's network is public and routed by the internet router.
      const lanNet = kind === 'none' ? `198.19.${s}` : `10.0.${s}`;
      const side: NatSide = {
        kind,
        gw,
        peer,
        peerIp: `${lanNet}.2`,
        publicIp: kind === 'none' ? `${lanNet}.2` : wan,
        nft: (...args) => sh('ip', ['netns', 'exec', gw, 'nft', ...args]),
        counter: (chain) =>
          Number(
            /counter packets (\d+)/.exec(side.nft('list', 'chain', 'ip', 'punchnat', chain))?.[1] ?? NaN,
          ),
        remove: () => {
          for (const space of [peer, gw]) removeNamespace(space);
          try {
            sh('ip', ['-n', inet, 'route', 'del', `198.19.${s}.0/24`]);
          } catch {
            /* no route for a NAT side */
          }
        },
      };
      side.remove();
      addNamespace(gw);
      addNamespace(peer);
      link(`w${s}`, inet, `g${s}`, `198.18.${s}.1`, gw, 'wan', wan);
      link(`l${s}`, gw, 'lan', `${lanNet}.1`, peer, 'eth0', side.peerIp);
      sh('ip', ['-n', gw, 'route', 'add', 'default', 'via', `198.18.${s}.1`]);
      sh('ip', ['-n', peer, 'route', 'add', 'default', 'via', `${lanNet}.1`]);
      if (kind === 'none') sh('ip', ['-n', inet, 'route', 'add', `${lanNet}.0/24`, 'via', wan]);
      const rules = natRules(kind, side.peerIp, wan);
      if (rules)
        execFileSync('ip', ['netns', 'exec', gw, 'nft', '-f', '-'], {
          input: rules,
          encoding: 'utf8',
          stdio: ['pipe', 'pipe', 'pipe'],
        });
      sides.push(side);
      return side;
    },
    remove: () => {
      for (const side of sides.splice(0)) side.remove();
      for (const space of [broker, inet]) removeNamespace(space);
    },
  };
  world.remove();
  addNamespace(inet);
  addNamespace(broker);
  link('b', inet, 'r', '198.18.3.1', broker, 'eth0', brokerIp);
  sh('ip', ['-n', broker, 'route', 'add', 'default', 'via', '198.18.3.1']);
  return world;
}
