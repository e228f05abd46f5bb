import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { requireTool, startProcess, type RunningProcess } from '@broadcast-ops/core/testing';

/**
 * chronyd recipes for tests and the bench: always `-x` (never touches the clock) or `-Q`
 * (query only), its own config, pidfile, driftfile and no command port, in a temp dir, on loopback.
 */

export interface ChronyServer {
  proc: RunningProcess;
  port: number;
  stop: () => Promise<void>;
}

/**
 * A chronyd serving NTP on 127.0.0.1/::1:`port` from its local clock at `stratum` (`local stratum`), or,
 * with `stratum: null`, only from the upstream servers given in `extra` (unsynchronised until then).
 */
export async function startChronyServer(
  dir: string,
  port: number,
  options: { stratum?: number | null; extra?: string[] } = {},
): Promise<ChronyServer> {
  const chronyd = requireTool('chronyd');
  mkdirSync(join(dir, 'run'), { recursive: true, mode: 0o700 });
  const conf = join(dir, 'server.conf');
  writeFileSync(
    conf,
    [
      `port ${port}`,
      'bindaddress 127.0.0.1',
      'bindaddress ::1',
      'allow 127.0.0.1',
      'allow ::1',
      ...(options.stratum === null ? [] : [`local stratum ${options.stratum ?? 8}`]),
      'cmdport 0',
      `bindcmdaddress ${join(dir, 'run', 'chronyd.sock')}`,
      `pidfile ${join(dir, 'server.pid')}`,
      `driftfile ${join(dir, 'server.drift')}`,
      ...(options.extra ?? []),
      '',
    ].join('\n'),
  );
  const proc = startProcess(chronyd, ['-x', '-d', '-u', 'root', '-f', conf]);
  await proc.waitForOutput(/chronyd version|Disabled control of system clock/i, 10_000);
  // chronyd answers as soon as its socket is open; give it a moment to bind.
  await new Promise((r) => setTimeout(r, 300));
  return {
    proc,
    port,
    stop: async () => {
      await proc.stop('SIGTERM');
    },
  };
}

/**
 * The config of a `chronyd -x` that follows one loopback upstream (`server … iburst` plus `serverOptions`,
 * e.g. `minpoll 2 maxpoll 2`) and serves NTP on 127.0.0.1:`port`, its own pidfile, driftfile and command
 * socket under `dir`; returns the config file's path.
 */
export function writeFollowerConf(
  dir: string,
  upstreamPort: number,
  port: number,
  serverOptions = '',
): string {
  mkdirSync(join(dir, 'run'), { recursive: true, mode: 0o700 });
  const conf = join(dir, 'chrony.conf');
  writeFileSync(
    conf,
    [
      `server 127.0.0.1 port ${upstreamPort} iburst${serverOptions ? ` ${serverOptions}` : ''}`,
      `port ${port}`,
      'bindaddress 127.0.0.1',
      'allow 127.0.0.1',
      'cmdport 0',
      `bindcmdaddress ${join(dir, 'run', 'chronyd.sock')}`,
      `pidfile ${join(dir, 'chronyd.pid')}`,
      `driftfile ${join(dir, 'chronyd.drift')}`,
      '',
    ].join('\n'),
  );
  return conf;
}

export interface ChronyQueryResult {
  offsetS: number | undefined;
  output: string;
  code: number | null;
}

/** `chronyd -Q` one-shot measurement against host:port; parses "System clock wrong by X seconds". */
export function chronyQuery(
  host: string,
  port: number,
  options: { timeoutS?: number; samples?: number } = {},
): Promise<ChronyQueryResult> {
  const chronyd = requireTool('chronyd');
  return new Promise((resolve) => {
    const child = spawn(
      chronyd,
      [
        '-Q',
        '-u',
        'root',
        '-t',
        String(options.timeoutS ?? 10),
        '-f',
        '/dev/null',
        `server ${host} port ${port} iburst maxsamples ${options.samples ?? 1}`,
        'bindcmdaddress /',
        'cmdport 0',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const killer = setTimeout(() => child.kill('SIGKILL'), ((options.timeoutS ?? 10) + 5) * 1000);
    child.on('exit', (code) => {
      clearTimeout(killer);
      const m = /System clock wrong by (-?[\d.]+) seconds/.exec(out);
      resolve({ offsetS: m?.[1] === undefined ? undefined : Number(m[1]), output: out, code });
    });
  });
}

export function medianOf(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}
