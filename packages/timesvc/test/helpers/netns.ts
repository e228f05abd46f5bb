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
