/**
 * `npm start`: starts every service package that declares a `toolkit.start` entry in its package.json, on
 * embedded defaults and the demo configs under config/, and stops them all on Ctrl-C (SIGINT) or SIGTERM. The
 * landing page (the first URL printed) is the status service (packages/status) on the landing port, started
 * with a config written from the port plan (data/stack/status-landing.json): each service's live health,
 * figures, pages and ports, and the notes of scripts/landing-notes.ts.
 *
 * package.json of a service:
 * `${NAME}` and `${NAME:-default}` in these entries are taken from the environment, so a port moved by an
 * environment variable is also the port printed and polled.
 *
 *   "toolkit": { "start": {
 *     "title": "punch: SRT session broker", "docs": "packages/punch/README.md",
 *     "args": ["serve", "--config", "config/x.json"], "env": { "X_PORT": "8787" },
 *     "ready": "http://127.0.0.1:8787/api/health",
 *     "urls": [{ "label": "Console", "url": "http://127.0.0.1:8787/", "page": true },
 *              { "label": "Session page", "url": "http://127.0.0.1:8787/s/<name>", "template": true }],
 *     "ports": [{ "label": "NTP", "proto": "udp", "port": 11123, "use": "what to point at it" }] } }
 *
 * Ports: before anything starts, every port the stack will listen on is tried; a busy one is named with the
 * service that wants it and the way out. `--port-offset N` (or BROADCAST_OPS_PORT_OFFSET=N) moves every demo
 * port by N: the ports in toolkit.start (URLs, `ports`, env values of *_PORT variables) and, in a copy under
 * data/stack/, every port in the config files passed as arguments (keys named `port`, `*Port`, `*_port`, the
 * values of a `*Ports` object, and the port of every loopback URL); the landing page (8600) moves with them.
 *
 * Service logs (JSON lines) go to data/logs/<service>.log; `npm start -- --verbose` also echoes them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  writeFileSync,
  type WriteStream,
} from 'node:fs';
import { createServer as createTcpServer } from 'node:net';
import { basename, extname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { readConfigFile, substituteEnv } from '@broadcast-ops/core';
import { probe } from './http-probe.ts';
import { landingNotes } from './landing-notes.ts';
import {
  LANDING_PORT,
  OFFSET_MAX,
  OFFSET_MIN,
  checkPlan,
  nextGoodOffset,
  describeRefusal,
  shiftPort as shiftPortBy,
  shiftUrl as shiftUrlBy,
  type Claim,
  type PlanService,
} from './port-plan.ts';

interface UrlEntry {
  label: string;
  url: string;
  /** A page for people (shown first on the landing page). */
  page?: boolean;
  /** Contains a placeholder such as <name>: shown, never fetched. */
  template?: boolean;
  note?: string;
  /**
   * A file (relative to the repository) holding the token this page needs for changes, e.g. playout-monitor's
   * generated admin token: the console line (never the landing page) shows the URL with `#token=<value>`,
   * read once the service is ready.
   */
  tokenFile?: string;
}

interface PortEntry {
  label: string;
  proto?: 'tcp' | 'udp';
  port?: number | string; // a string after ${VAR} substitution
  /** The stack sends to this port rather than listening on it. */
  outbound?: boolean;
  use: string;
}

interface StartEntry {
  title?: string;
  docs?: string;
  args?: string[];
  env?: Record<string, string>;
  ready?: string;
  urls?: UrlEntry[];
  ports?: PortEntry[];
}

interface Service {
  name: string;
  dir: string;
  bin: string;
  version: string;
  start: StartEntry;
}

const root = fileURLToPath(new URL('..', import.meta.url));
/** The status service, which serves the landing page whatever --packages names. */
const STATUS_DIR = join(root, 'packages', 'status');
const STATUS_BIN = 'broadcast-ops-status';
const OFFSET_ENV = 'BROADCAST_OPS_PORT_OFFSET';
const sourceMode = import.meta.resolve('@broadcast-ops/core').endsWith('.ts');

const { values } = parseArgs({
  options: {
    packages: { type: 'string' },
    verbose: { type: 'boolean', short: 'v' },
    'ready-timeout': { type: 'string' },
    'port-offset': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  console.log(`npm start [-- options]: the whole toolkit on demo configs, with a landing page

  --port-offset <n>     move every demo port by n (also ${OFFSET_ENV}=n)
  --verbose, -v         echo the services' logs (always in data/logs/<service>.log)
  --ready-timeout <ms>  how long a service may take to answer its health URL (60000)`);
  process.exit(0);
}
const packagesDir = resolve(values.packages ?? join(root, 'packages'));
const readyTimeoutMs = Number(values['ready-timeout'] ?? 60_000);
const logDir = join(root, 'data', 'logs');
const offsetText = values['port-offset'] ?? (process.env[OFFSET_ENV] || '0');
const offset = Number(offsetText);
if (!Number.isInteger(offset) || offset < OFFSET_MIN || offset > OFFSET_MAX) {
  console.error(
    `start-stack: --port-offset / ${OFFSET_ENV} must be a whole number, e.g. 1000 (got "${offsetText}")`,
  );
  process.exit(2);
}
const landingPort = LANDING_PORT + offset;

function shiftPort(port: number): number {
  return shiftPortBy(port, offset);
}

function shiftUrl(url: string): string {
  return shiftUrlBy(url, offset);
}

/** Every port in a parsed config moved by the offset (see the header for which keys count as ports). */
function shiftConfigPorts(value: unknown, key = '', inPorts = false): unknown {
  if (Array.isArray(value)) return value.map((v) => shiftConfigPorts(v, key, inPorts));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, shiftConfigPorts(v, k, /Ports$/i.test(k))]),
    );
  }
  if (typeof value === 'number' && Number.isInteger(value) && (inPorts || /(^port|Port|_port)$/.test(key)))
    return shiftPort(value);
  // A loopback URL in a config names a demo port (e.g. the status service's list of the others).
  if (typeof value === 'string' && /^(?:https?|wss?):\/\/(?:127\.0\.0\.1|localhost|\[::1\]):\d+/.test(value))
    return shiftUrl(value);
  return value;
}

/** With an offset: config files among the arguments are copied to data/stack/ with their ports moved. */
function shiftArgs(name: string, args: string[]): string[] {
  if (offset === 0) return args;
  return args.map((arg) => {
    const file = resolve(root, arg);
    if (!/\.(json|ya?ml)$/i.test(arg) || !existsSync(file)) return arg;
    const dir = join(root, 'data', 'stack');
    mkdirSync(dir, { recursive: true });
    const out = join(dir, `${name}-${basename(arg, extname(arg))}.json`);
    writeFileSync(out, JSON.stringify(shiftConfigPorts(readConfigFile(file)), null, 2) + '\n');
    return out;
  });
}

/** The service a package declares in toolkit.start (`${VAR}` substituted), if any. */
function readService(dir: string): Service | undefined {
  const pkgFile = join(dir, 'package.json');
  if (!existsSync(pkgFile)) return undefined;
  const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as {
    version?: string;
    bin?: Record<string, string>;
    toolkit?: { start?: StartEntry };
  };
  const declared = pkg.toolkit?.start;
  const binEntry = pkg.bin ? Object.entries(pkg.bin)[0] : undefined;
  if (!declared || !binEntry) return undefined;
  const start = substituteEnv(declared, process.env, `${pkgFile} toolkit.start`) as StartEntry;
  // Users run the compiled entry point on plain node; under the `source` condition (tests) the bin,
  // which then runs src/ through tsx.
  const built = join(dir, 'dist', 'main.js');
  return {
    name: binEntry[0],
    dir,
    bin: !sourceMode && existsSync(built) ? built : join(dir, binEntry[1]),
    version: pkg.version ?? '',
    start,
  };
}

/** The service packages declaring toolkit.start, the status service (the landing page) first. */
function discover(): Service[] {
  const services: Service[] = [];
  for (const dirName of readdirSync(packagesDir).sort()) {
    const service = readService(join(packagesDir, dirName));
    if (service && service.name !== STATUS_BIN) services.push(service);
  }
  const status = readService(STATUS_DIR);
  return services.length > 0 && status ? [status, ...services] : services;
}

/** A service with every port moved by the offset (config files copied to data/stack/ with theirs moved). */
function shifted(service: Service): Service {
  const start = service.start;
  return {
    ...service,
    start: {
      ...start,
      args: shiftArgs(service.name, start.args ?? []),
      env: Object.fromEntries(
        Object.entries(start.env ?? {}).map(([k, v]) => [
          k,
          /PORT$/.test(k) && /^\d+$/.test(v) ? String(shiftPort(Number(v))) : v,
        ]),
      ),
      ...(start.ready ? { ready: shiftUrl(start.ready) } : {}),
      urls: (start.urls ?? []).map((u) => ({ ...u, url: shiftUrl(u.url) })),
      ports: (start.ports ?? []).map((p) =>
        p.port === undefined ? p : { ...p, port: shiftPort(Number(p.port)) },
      ),
    },
  };
}

/** Whether 127.0.0.1:port can be bound now (a wildcard listener elsewhere also makes it busy). */
function portFree(proto: 'tcp' | 'udp', port: number): Promise<boolean> {
  return new Promise((res) => {
    if (proto === 'udp') {
      const s = createSocket('udp4');
      s.once('error', () => res(false));
      s.bind(port, '127.0.0.1', () => s.close(() => res(true)));
      return;
    }
    const s = createTcpServer();
    s.once('error', () => res(false));
    s.listen({ port, host: '127.0.0.1', exclusive: true }, () => s.close(() => res(true)));
  });
}

function moveHint(): string {
  // The first offset at least 1000 further that the port plan accepts.
  const next = nextGoodOffset(plan, offset + 999) ?? offset + 1000;
  return (
    `Move every demo port: npm start -- --port-offset ${next}   (or ${OFFSET_ENV}=${next} npm start);\n` +
    `the landing page and every URL printed move with it.`
  );
}

/** The port named in an EADDRINUSE line of a service's log, if any. */
function busyPortInLog(file: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8').slice(-20_000);
  } catch {
    return undefined;
  }
  const m = /EADDRINUSE[^\n]*?(?:address already in use\s*)?([\d.:[\]a-f]*:(\d+))/i.exec(text);
  return m ? (m[2] ?? m[1]) : undefined;
}

// ----------------------------------------------------------------------------------------------------------
// Landing page: the status service's config, written from the (moved) plan.

/** The demo config's entry of a service (its metrics and devices URLs), ports moved by the offset. */
function demoStatusEntries(): Map<string, Record<string, unknown>> {
  const file = join(root, 'config', 'status.demo.json');
  if (!existsSync(file)) return new Map();
  const demo = shiftConfigPorts(readConfigFile(file)) as { services?: Record<string, unknown>[] };
  return new Map((demo.services ?? []).map((s) => [String(s['name']), s]));
}

const STATUS_KINDS = new Set(['punch', 'telemetry-bridge', 'playout-monitor', 'timesvc']);

/** The status service's config for the landing page: every other service with a health URL, links and ports. */
function landingConfig(list: Service[]): string {
  const demo = demoStatusEntries();
  const config = {
    listen: { host: '127.0.0.1', port: landingPort },
    pollIntervalMs: 2000,
    timeoutMs: 1500,
    notes: landingNotes(),
    services: list
      .filter((s) => s.name !== STATUS_BIN && s.start.ready)
      .map((s) => {
        const urls = s.start.urls ?? [];
        return {
          name: s.name,
          kind: STATUS_KINDS.has(s.name) ? s.name : 'http',
          health: s.start.ready,
          ...(urls.find((u) => u.page && !u.template)
            ? { page: urls.find((u) => u.page && !u.template)?.url }
            : {}),
          // config/status.demo.json knows the URLs that give the figures (health body, metrics, devices).
          ...(demo.get(s.name) ?? {}),
          ...(s.start.title ? { title: s.start.title } : {}),
          links: urls.map((u) => ({
            label: u.label,
            url: u.url,
            ...(u.page ? { page: true } : {}),
            ...(u.template ? { template: true } : {}),
          })),
          ports: (s.start.ports ?? []).map((p) => ({
            label: p.label,
            ...(p.proto ? { proto: p.proto } : {}),
            ...(p.port !== undefined ? { port: Number(p.port) } : {}),
            ...(p.outbound ? { outbound: true } : {}),
            use: p.use,
          })),
          ...(s.start.docs ? { docs: s.start.docs } : {}),
        };
      }),
  };
  const dir = join(root, 'data', 'stack');
  mkdirSync(dir, { recursive: true });
  const out = join(dir, 'status-landing.json');
  writeFileSync(out, JSON.stringify(config, null, 2) + '\n');
  return out;
}

// ----------------------------------------------------------------------------------------------------------

async function ready(url: string, child: ChildProcess, deadline: number): Promise<boolean> {
  while (Date.now() < deadline && child.exitCode === null && child.signalCode === null) {
    const r = await probe(url, 1000);
    if (r.ok && r.status < 500) return true;
    await new Promise((res) => setTimeout(res, 200));
  }
  return false;
}

const declared = discover();
if (declared.length === 0) {
  console.log('start-stack: no service declares toolkit.start yet; nothing to run.');
  process.exit(0);
}
const plan: PlanService[] = declared.map((s) => ({
  name: s.name,
  ...(s.start.ready ? { ready: s.start.ready } : {}),
  urls: s.start.urls ?? [],
  ports: s.start.ports ?? [],
}));

// The plan is checked before anything is written or started: a port browsers refuse, or one outside
// 1-65535, is named with a working offset (scripts/port-plan.ts).
const checked = checkPlan(plan, offset);
if (!checked.ok) {
  console.error(describeRefusal(checked, OFFSET_ENV));
  process.exit(2);
}
const services = declared
  .map(shifted)
  .map((s) =>
    s.name === STATUS_BIN
      ? { ...s, start: { ...s.start, args: ['--config', 'data/stack/status-landing.json'] } }
      : s,
  );

/**
 * A service's environment: toolkit.start's env entries are defaults that a variable set in the launcher's own
 * environment overrides (e.g. PUNCH_HOST=0.0.0.0 for join links other machines can open), except the *_PORT
 * ones, which the port plan owns (move them with --port-offset).
 */
function serviceEnv(defaults: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const [k, v] of Object.entries(defaults)) if (/PORT$/.test(k) || !process.env[k]) env[k] = v;
  return env;
}

// Every port is tried before anything starts: a busy one is named here, not only in a service's log.
const busy: Claim[] = [];
for (const c of checked.claims) if (!(await portFree(c.proto, c.port))) busy.push(c);
if (busy.length > 0) {
  const w = Math.max(...busy.map((c) => `${c.port}/${c.proto}`.length));
  const sw = Math.max(...busy.map((c) => c.service.length));
  console.error('start-stack: ports in use by another program:');
  for (const c of busy)
    console.error(`  ${`${c.port}/${c.proto}`.padEnd(w)}  ${c.service.padEnd(sw)}  ${c.label}`);
  console.error(moveHint());
  process.exit(1);
}

mkdirSync(logDir, { recursive: true });

interface Running {
  service: Service;
  child: ChildProcess;
  log: WriteStream;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves once an unexpected exit has been reported (reason and log; at once when stopping). */
  reported: Promise<void>;
}
const running: Running[] = [];
let stopping = false;

function describeExit(e: { code: number | null; signal: NodeJS.Signals | null }): string {
  return e.signal ? `signal ${e.signal}` : String(e.code);
}

async function stopAll(reason: string, code: number): Promise<never> {
  if (stopping) return new Promise<never>(() => undefined);
  stopping = true;
  console.log(`\nstart-stack: ${reason}; stopping ${running.length} service(s)`);
  for (const r of running) if (r.child.exitCode === null) r.child.kill('SIGTERM');
  const killer = setTimeout(() => {
    for (const r of running) if (r.child.exitCode === null) r.child.kill('SIGKILL');
  }, 15_000);
  const exits = await Promise.all(running.map((r) => r.exited));
  clearTimeout(killer);
  running.forEach((r, i) => {
    const e = exits[i] ?? { code: null, signal: null };
    console.log(`start-stack: ${r.service.name} exited with ${describeExit(e)}`);
    r.log.end();
  });
  console.log(`start-stack: exit ${code}`);
  process.exit(code);
}

process.on('SIGINT', () => void stopAll('SIGINT', 0));
process.on('SIGTERM', () => void stopAll('SIGTERM', 0));

landingConfig(services);

for (const service of services) {
  const logFile = join(logDir, `${service.name}.log`);
  const log = createWriteStream(logFile, { flags: 'a' });
  const child = spawn(process.execPath, [service.bin, ...(service.start.args ?? [])], {
    cwd: root,
    env: serviceEnv(service.start.env ?? {}),
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
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
    child.once('exit', (code, signal) => res({ code, signal })),
  );
  const reported = exited.then(async (e) => {
    if (stopping) return;
    // The log stream flushes on end; read it afterwards for the reason.
    await new Promise<void>((done) => log.end(done));
    if (stopping) return;
    console.error(
      `start-stack: ${service.name} exited unexpectedly with ${describeExit(e)}; see data/logs/${service.name}.log`,
    );
    const port = busyPortInLog(logFile);
    if (port) {
      console.error(
        `start-stack: ${service.name} could not listen: port ${port} is in use by another program.`,
      );
      console.error(moveHint());
    }
    void stopAll(`${service.name} failed`, 1);
  });
  running.push({ service, child, log, exited, reported });
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

/** The URL with the page's token appended when it has a token file that exists (console only). */
function withToken(u: UrlEntry): string {
  if (!u.tokenFile) return u.url;
  try {
    const token = readFileSync(join(root, u.tokenFile), 'utf8').trim();
    return token ? `${u.url}#token=${encodeURIComponent(token)}` : u.url;
  } catch {
    return u.url;
  }
}

// Aligned output: one label column wide enough for the longest label.
const landingUrl = `http://127.0.0.1:${landingPort}/`;
const labels = running.flatMap((r) => [
  ...(r.service.start.urls ?? []).filter((u) => !u.template).map((u) => u.label),
]);
const labelWidth = Math.max('Landing page'.length, ...labels.map((l) => l.length)) + 2;
const nameWidth = Math.max(...running.map((r) => r.service.name.length)) + 2;
console.log(
  `\nBroadcast-ops toolkit is running${offset ? ` (ports moved by ${offset})` : ''}. Start here:\n`,
);
console.log(`  ${'Landing page'.padEnd(labelWidth + 2)}${landingUrl}\n`);
running.forEach((r, i) => {
  const state = results[i] ? 'up' : 'NOT READY yet';
  console.log(
    `  ${r.service.name.padEnd(nameWidth)}${state}  (pid ${r.child.pid}, log data/logs/${r.service.name}.log)`,
  );
  for (const u of r.service.start.urls ?? []) {
    if (!u.template) console.log(`    ${u.label.padEnd(labelWidth)}${withToken(u)}`);
  }
  for (const p of r.service.start.ports ?? []) {
    if (p.port !== undefined)
      console.log(
        `    ${p.label.padEnd(labelWidth)}${p.proto ?? ''} ${p.port}${p.outbound ? ' (sent to)' : ''}`,
      );
  }
});
console.log('\nPress Ctrl-C to stop.');
const dead = running.filter((r) => r.child.exitCode !== null || r.child.signalCode !== null);
if (dead.length > 0) {
  // A service that died is reported by its exit handler (with the reason from its log), which stops the
  // stack; on a loaded machine its log may still be flushing when the readiness check ends.
  await Promise.race([Promise.all(dead.map((r) => r.reported)), new Promise((r) => setTimeout(r, 10_000))]);
  await stopAll('a service did not become ready', 1);
}
// A slow service is reported, not a reason to stop the others: it keeps running, the landing page shows its
// health live, and the console says when it answers.
running.forEach((r, i) => {
  if (results[i] || !r.service.start.ready) return;
  console.error(
    `start-stack: ${r.service.name} did not become ready within ${Math.round(readyTimeoutMs / 1000)} s; ` +
      `it keeps running (the others are not stopped) and the landing page shows its health; see data/logs/${r.service.name}.log`,
  );
  const url = r.service.start.ready;
  const since = Date.now();
  void ready(url, r.child, Number.POSITIVE_INFINITY).then((ok) => {
    if (ok && !stopping)
      console.log(
        `start-stack: ${r.service.name} is up (${Math.round((Date.now() - since + readyTimeoutMs) / 1000)} s after start)`,
      );
  });
});
