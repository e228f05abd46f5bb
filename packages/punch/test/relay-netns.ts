import { join } from 'node:path';
import { repoRoot } from '@broadcast-ops/core/testing';
import type { DirectionFigures } from '../src/domain/relay-path-meter.ts';
import { inNamespace, removeNamespace, sh, type Group } from './netns.ts';

/**
 * Three network namespaces for the relay tests and bench: peer A and peer B each on a veth link of their own
 * to the relay's namespace R, and no route between A and B, so the relay is their only path. Names carry the
 * pid and a tag; addresses are from 198.18.0.0/15 (RFC 2544's range for device tests), only inside the
 * namespaces. These are not addresses the relay's policy refuses, so the tests run the default policy.
 */
export interface RelayTopology {
  a: string;
  r: string;
  b: string;
  /** Peer A's address and the relay's address on A's link; likewise for B. */
  ipA: string;
  relayA: string;
  ipB: string;
  relayB: string;
  remove: () => void;
}

export function createRelayTopology(tag: string): RelayTopology {
  const run = `${process.pid % 100_000}`;
  const t: RelayTopology = {
    a: `punch-${tag}A-${run}`,
    r: `punch-${tag}R-${run}`,
    b: `punch-${tag}B-${run}`,
    ipA: '198.18.1.1',
    relayA: '198.18.1.2',
    ipB: '198.18.2.1',
    relayB: '198.18.2.2',
    remove: () => {
      for (const ns of [t.a, t.r, t.b]) removeNamespace(ns);
    },
  };
  t.remove();
  for (const ns of [t.a, t.r, t.b]) {
    sh('ip', ['netns', 'add', ns]);
    sh('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
  }
  const links = [
    [t.a, `p${tag}a${run}`, t.ipA, `p${tag}ra${run}`, t.relayA],
    [t.b, `p${tag}b${run}`, t.ipB, `p${tag}rb${run}`, t.relayB],
  ] as const;
  for (const [ns, dev, ip, relayDev, relayIp] of links) {
    sh('ip', ['link', 'add', dev, 'type', 'veth', 'peer', 'name', relayDev]);
    sh('ip', ['link', 'set', dev, 'netns', ns]);
    sh('ip', ['link', 'set', relayDev, 'netns', t.r]);
    sh('ip', ['-n', ns, 'addr', 'add', `${ip}/24`, 'dev', dev]);
    sh('ip', ['-n', ns, 'link', 'set', dev, 'up']);
    sh('ip', ['-n', t.r, 'addr', 'add', `${relayIp}/24`, 'dev', relayDev]);
    sh('ip', ['-n', t.r, 'link', 'set', relayDev, 'up']);
  }
  return t;
}

/** The relay fixture (test/fixtures/relay-run.ts) in namespace `ns`, with the ports it bound. */
export async function startRelay(
  ns: string,
  peers: readonly [string, string],
  bytesPerSecond = 12_500_000,
): Promise<{ group: Group; ports: [number, number]; counters: () => RelayCounters | undefined }> {
  const fixture = join(repoRoot, 'packages/punch/test/fixtures/relay-run.ts');
  const group = inNamespace(
    ns,
    `exec ${process.execPath} --conditions=source --import tsx ${fixture} 0.0.0.0 ${peers[0]} ${peers[1]} ${bytesPerSecond}`,
    // From the repository, where `--import tsx` resolves.
    repoRoot,
  );
  const deadline = Date.now() + 30_000;
  for (;;) {
    const m = /^\{"ports":\[(\d+),(\d+)\]\}$/m.exec(group.output());
    if (m) {
      const counters = () => {
        const lines = group.output().match(/^\{"drops".*$/gm);
        const last = lines?.[lines.length - 1];
        return last ? (JSON.parse(last) as RelayCounters) : undefined;
      };
      return { group, ports: [Number(m[1]), Number(m[2])], counters };
    }
    if (Date.now() > deadline || group.child.exitCode !== null)
      throw new Error(`the relay fixture did not start:\n${group.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface RelayCounters {
  drops: Record<string, number>;
  sendQueueDrops: number;
  packets: [number, number];
  bytes: [number, number];
  latched: [{ address: string; port: number } | null, { address: string; port: number } | null];
  path?: [DirectionFigures, DirectionFigures];
}
