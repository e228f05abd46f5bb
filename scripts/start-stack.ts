/**
 * `npm start`: starts every service package that declares a `toolkit.start` entry in its package.json,
 * on embedded defaults and the demo configs under config/, prints each service's URLs, and stops them all
 * on Ctrl-C (SIGINT) or SIGTERM.
 *
 * package.json of a service:
 * `${NAME}` and `${NAME:-default}` in these entries are taken from the environment, so a port moved by an
 * environment variable is also the port printed and polled.
 *
 *   "toolkit": { "start": { "args": ["serve", "--config", "config/x.json"],
 *                           "env": { "X": "y" },
 *                           "ready": "http://127.0.0.1:8787/api/health",
 *                           "urls": [{ "label": "REST API", "url": "http://127.0.0.1:8787/" }] } }
 *
 * Service logs (JSON lines) go to data/logs/<service>.log; `npm start -- --verbose` also echoes them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  type WriteStream,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { substituteEnv } from '@broadcast-ops/core';

interface StartEntry {
  args?: string[];
  env?: Record<string, string>;
  ready?: string;
  urls?: { label: string; url: string }[];
}

interface Service {
  name: string;
  dir: string;
  bin: string;
  start: StartEntry;
}

const root = fileURLToPath(new URL('..', import.meta.url));
const { values } = parseArgs({
  options: {
    packages: { type: 'string' },
    verbose: { type: 'boolean', short: 'v' },
    'ready-timeout': { type: 'string' },
  },
});
const packagesDir = resolve(values.packages ?? join(root, 'packages'));
const readyTimeoutMs = Number(values['ready-timeout'] ?? 60_000);
const logDir = join(root, 'data', 'logs');

function discover(): Service[] {
  const services: Service[] = [];
  for (const dirName of readdirSync(packagesDir).sort()) {
    const dir = join(packagesDir, dirName);
    const pkgFile = join(dir, 'package.json');
    if (!existsSync(pkgFile)) continue;
    const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as {
      bin?: Record<string, string>;
      toolkit?: { start?: StartEntry };
    };
    const start = pkg.toolkit?.start;
    const binEntry = pkg.bin ? Object.entries(pkg.bin)[0] : undefined;
    if (!start || !binEntry) continue;
    services.push({
      name: binEntry[0],
      dir,
      bin: join(dir, binEntry[1]),
      start: substituteEnv(start, process.env, `${pkgFile} toolkit.start`) as StartEntry,
    });
  }
  return services;
}

async function ready(url: string, child: ChildProcess, deadline: number): Promise<boolean> {
  while (Date.now() < deadline && child.exitCode === null) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (res.status < 500) return true;
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

const services = discover();
if (services.length === 0) {
  console.log('start-stack: no service declares toolkit.start yet; nothing to run.');
  process.exit(0);
}
mkdirSync(logDir, { recursive: true });

const running: { service: Service; child: ChildProcess; log: WriteStream; exited: Promise<number | null> }[] =
  [];
let stopping = false;

async function stopAll(reason: string, code: number): Promise<never> {
  if (stopping) return new Promise<never>(() => undefined);
  stopping = true;
  console.log(`\nstart-stack: ${reason}; stopping ${running.length} service(s)`);
  for (const r of running) if (r.child.exitCode === null) r.child.kill('SIGTERM');
  const killer = setTimeout(() => {
    for (const r of running) if (r.child.exitCode === null) r.child.kill('SIGKILL');
  }, 15_000);
  const codes = await Promise.all(running.map((r) => r.exited));
  clearTimeout(killer);
  running.forEach((r, i) => {
    console.log(`start-stack: ${r.service.name} exited with ${codes[i] ?? 'signal'}`);
    r.log.end();
  });
  console.log(`start-stack: exit ${code}`);
  process.exit(code);
}

process.on('SIGINT', () => void stopAll('SIGINT', 0));
process.on('SIGTERM', () => void stopAll('SIGTERM', 0));

for (const service of services) {
  const log = createWriteStream(join(logDir, `${service.name}.log`), { flags: 'a' });
  const child = spawn(process.execPath, [service.bin, ...(service.start.args ?? [])], {
    cwd: root,
    env: { ...process.env, ...service.start.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Own process group: a terminal Ctrl-C reaches the launcher, which stops the services in order.
    detached: true,
  });
  for (const stream of [child.stdout, child.stderr]) {
    stream?.on('data', (d: Buffer) => {
      log.write(d);
      if (values.verbose) process.stdout.write(`[${service.name}] ${d.toString()}`);
    });
  }
  const exited = new Promise<number | null>((res) => child.once('exit', (c) => res(c)));
  void exited.then((c) => {
    if (!stopping) {
      console.error(
        `start-stack: ${service.name} exited unexpectedly with ${c}; see ${join(logDir, service.name + '.log')}`,
      );
      void stopAll(`${service.name} failed`, 1);
    }
  });
  running.push({ service, child, log, exited });
}

const deadline = Date.now() + readyTimeoutMs;
const results = await Promise.all(
  running.map(async (r) => {
    if (r.service.start.ready) return ready(r.service.start.ready, r.child, deadline);
    await new Promise((res) => setTimeout(res, 1500));
    return r.child.exitCode === null;
  }),
);
if (stopping) await new Promise(() => undefined);
console.log('\nBroadcast-ops toolkit is running:\n');
running.forEach((r, i) => {
  const state = results[i] ? 'up' : 'NOT READY';
  console.log(
    `  ${r.service.name.padEnd(18)} ${state}  (pid ${r.child.pid}, log data/logs/${r.service.name}.log)`,
  );
  for (const u of r.service.start.urls ?? []) console.log(`    ${u.label.padEnd(22)} ${u.url}`);
});
console.log('\nPress Ctrl-C to stop.');
if (results.some((ok) => !ok)) await stopAll('a service did not become ready', 1);
