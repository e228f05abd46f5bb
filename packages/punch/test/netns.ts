import { execFileSync, spawn, type ChildProcess } from 'node:child_process';

/**
 * Two network namespaces joined by a veth pair, created and deleted by the test that uses them (names
 * carry the pid and a tag, addresses from 198.18.0.0/15, RFC 2544's range for device tests, and only
 * inside the namespaces), and commands run inside them. The same construction as interop-video.test.ts.
 */
export const IP_A = '198.18.0.1';
export const IP_B = '198.18.0.2';

export function sh(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** A shell command inside a namespace, in its own process group so the whole pipeline can be signalled. */
export interface Group {
  output: () => string;
  exited: Promise<number | null>;
  signal: (s: NodeJS.Signals) => void;
  child: ChildProcess;
}

export function inNamespace(ns: string, cmd: string, cwd: string, stdoutToo = true): Group {
  const child = spawn('ip', ['netns', 'exec', ns, 'sh', '-c', cmd], {
    cwd,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const collect = (d: Buffer) => {
    out = (out + d.toString()).slice(-256 * 1024);
  };
  if (stdoutToo) child.stdout.on('data', collect);
  else child.stdout.resume();
  child.stderr.on('data', collect);
  const exited = new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  return {
    child,
    output: () => out,
    exited,
    signal: (s) => {
      try {
        if (child.pid !== undefined && child.exitCode === null) process.kill(-child.pid, s);
      } catch {
        /* already gone */
      }
    },
  };
}

/** Kills what runs in a namespace this test created, then deletes it; nothing when it is not there. */
export function removeNamespace(ns: string): void {
  try {
    // Only this test's processes run in these namespaces.
    for (const pid of sh('ip', ['netns', 'pids', ns]).split(/\s+/).filter(Boolean)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    sh('ip', ['netns', 'del', ns]);
  } catch {
    /* not there */
  }
}

export interface NamespacePair {
  a: string;
  b: string;
  vethA: string;
  vethB: string;
  remove: () => void;
}

export function createNamespaces(tag: string): NamespacePair {
  const run = `${process.pid % 100_000}`;
  const pair: NamespacePair = {
    a: `punch-${tag}a-${run}`,
    b: `punch-${tag}b-${run}`,
    vethA: `p${tag}a${run}`,
    vethB: `p${tag}b${run}`,
    remove: () => {
      for (const ns of [pair.a, pair.b]) removeNamespace(ns);
    },
  };
  pair.remove();
  sh('ip', ['netns', 'add', pair.a]);
  sh('ip', ['netns', 'add', pair.b]);
  sh('ip', ['link', 'add', pair.vethA, 'type', 'veth', 'peer', 'name', pair.vethB]);
  sh('ip', ['link', 'set', pair.vethA, 'netns', pair.a]);
  sh('ip', ['link', 'set', pair.vethB, 'netns', pair.b]);
  for (const [ns, dev, ip] of [
    [pair.a, pair.vethA, IP_A],
    [pair.b, pair.vethB, IP_B],
  ] as const) {
    sh('ip', ['-n', ns, 'addr', 'add', `${ip}/24`, 'dev', dev]);
    sh('ip', ['-n', ns, 'link', 'set', dev, 'up']);
    sh('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
  }
  return pair;
}
