import { execFileSync } from 'node:child_process';
import { requireTool } from '@broadcast-ops/core/testing';

/**
 * Two network namespaces joined by a veth pair, created for one test run and deleted by `remove()` (names
 * carry the pid and a counter, so parallel runs do not collide). No default route: traffic cannot leave.
 */
export interface NetnsPair {
  a: string;
  b: string;
  ifA: string;
  ifB: string;
  addrA: string;
  addrB: string;
  remove: () => void;
}

let counter = 0;

export function createNetnsPair(): NetnsPair {
  const ip = requireTool('ip');
  const id = `${process.pid % 100000}${counter++}`;
  const a = `tsgm${id}`;
  const b = `tssl${id}`;
  const ifA = `tva${id}`.slice(0, 15);
  const ifB = `tvb${id}`.slice(0, 15);
  const net = `10.99.${(process.pid + counter) % 250}`;
  const run = (...args: string[]): void => {
    execFileSync(ip, args, { stdio: 'pipe' });
  };
  const remove = (): void => {
    for (const ns of [a, b]) {
      try {
        run('netns', 'del', ns);
      } catch {
        /* already gone */
      }
    }
  };
  try {
    run('netns', 'add', a);
    run('netns', 'add', b);
    run('link', 'add', ifA, 'type', 'veth', 'peer', 'name', ifB);
    run('link', 'set', ifA, 'netns', a);
    run('link', 'set', ifB, 'netns', b);
    run('-n', a, 'addr', 'add', `${net}.1/24`, 'dev', ifA);
    run('-n', b, 'addr', 'add', `${net}.2/24`, 'dev', ifB);
    for (const ns of [a, b]) run('-n', ns, 'link', 'set', 'lo', 'up');
    run('-n', a, 'link', 'set', ifA, 'up');
    run('-n', b, 'link', 'set', ifB, 'up');
  } catch (err) {
    remove();
    throw err;
  }
  return { a, b, ifA, ifB, addrA: `${net}.1`, addrB: `${net}.2`, remove };
}

/** One member of a namespace bridge: its namespace, interface and address. */
export interface NetnsPort {
  ns: string;
  iface: string;
  addr: string;
}

/**
 * `count` network namespaces on one Linux bridge (a switch with `count` ports, in a namespace of its own),
 * created for one test and deleted by `remove()`. Multicast snooping is off, so every port sees every PTP
 * datagram as on an unmanaged switch. No default route: traffic cannot leave.
 */
export function createNetnsBridge(count: number): { ports: NetnsPort[]; remove: () => void } {
  const ip = requireTool('ip');
  const id = `${process.pid % 100000}${counter++}`;
  const br = `tsbr${id}`;
  const net = `10.98.${(process.pid + counter) % 250}`;
  const run = (...args: string[]): void => {
    execFileSync(ip, args, { stdio: 'pipe' });
  };
  const names = Array.from({ length: count }, (_, i) => `tsn${i}x${id}`);
  const remove = (): void => {
    for (const ns of [...names, br]) {
      try {
        run('netns', 'del', ns);
      } catch {
        /* already gone */
      }
    }
  };
  const ports: NetnsPort[] = [];
  try {
    run('netns', 'add', br);
    run('-n', br, 'link', 'add', 'br0', 'type', 'bridge', 'mcast_snooping', '0');
    run('-n', br, 'link', 'set', 'br0', 'up');
    names.forEach((ns, i) => {
      const inner = `tv${i}x${id}`.slice(0, 15);
      const outer = `tp${i}x${id}`.slice(0, 15);
      run('netns', 'add', ns);
      run('link', 'add', inner, 'type', 'veth', 'peer', 'name', outer);
      run('link', 'set', inner, 'netns', ns);
      run('link', 'set', outer, 'netns', br);
      run('-n', br, 'link', 'set', outer, 'master', 'br0');
      run('-n', br, 'link', 'set', outer, 'up');
      run('-n', ns, 'addr', 'add', `${net}.${i + 1}/24`, 'dev', inner);
      run('-n', ns, 'link', 'set', 'lo', 'up');
      run('-n', ns, 'link', 'set', inner, 'up');
      ports.push({ ns, iface: inner, addr: `${net}.${i + 1}` });
    });
  } catch (err) {
    remove();
    throw err;
  }
  return { ports, remove };
}
