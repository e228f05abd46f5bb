/**
 * `npm start`: starts every service package that declares a `toolkit.start` entry in its package.json, on
 * embedded defaults and the demo configs under config/, and stops them all on Ctrl-C (SIGINT) or SIGTERM. The
 * landing page (the first URL printed) is the status service (packages/status) on the landing port, started
 * with a config written from the port plan (data/stack/status-landing.json): each service's live health,
 * figures, pages and ports, and the notes of scripts/stack/landing-notes.ts.
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
 *
 * This file is the order of things; the parts are in scripts/stack/: `services.ts` (the declarations and
 * moving them by the offset), `plan.ts` (the pure port plan), `landing.ts` (the landing page's config),
 * `supervisor.ts` (children, readiness, stopping) and `console-text.ts` (what is printed).
 */
import { createSocket } from 'node:dgram';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createTcpServer } from 'node:net';
import { basename, extname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { readConfigFile } from '@broadcast-ops/core';
import { busyPortsText, runningText } from './stack/console-text.ts';
import { demoStatusEntries, landingConfig } from './stack/landing.ts';
import {
  LANDING_PORT,
  OFFSET_MAX,
  OFFSET_MIN,
  checkPlan,
  describeRefusal,
  nextGoodOffset,
  type Claim,
} from './stack/plan.ts';
import {
  STATUS_BIN,
  discover,
  planOf,
  shiftConfigPorts,
  shiftService,
  type UrlEntry,
} from './stack/services.ts';
import { Supervisor } from './stack/supervisor.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const OFFSET_ENV = 'BROADCAST_OPS_PORT_OFFSET';
const sourceMode = import.meta.resolve('@broadcast-ops/core').endsWith('.ts');
const never = (): Promise<never> => new Promise<never>(() => undefined);

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
const stackDir = join(root, 'data', 'stack');
const offsetText = values['port-offset'] ?? (process.env[OFFSET_ENV] || '0');
const offset = Number(offsetText);
if (!Number.isInteger(offset) || offset < OFFSET_MIN || offset > OFFSET_MAX) {
  console.error(
    `start-stack: --port-offset / ${OFFSET_ENV} must be a whole number, e.g. 1000 (got "${offsetText}")`,
  );
  process.exit(2);
}
const landingPort = LANDING_PORT + offset;

/** With an offset: a config file among a service's arguments is copied to data/stack/ with its ports moved. */
function copyConfig(name: string, arg: string): string {
  const file = resolve(root, arg);
  if (!/\.(json|ya?ml)$/i.test(arg) || !existsSync(file)) return arg;
  mkdirSync(stackDir, { recursive: true });
  const out = join(stackDir, `${name}-${basename(arg, extname(arg))}.json`);
  writeFileSync(out, JSON.stringify(shiftConfigPorts(readConfigFile(file), offset), null, 2) + '\n');
  return out;
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

const declared = discover(packagesDir, join(root, 'packages', 'status'), process.env, sourceMode);
if (declared.length === 0) {
  console.log('start-stack: no service declares toolkit.start yet; nothing to run.');
  process.exit(0);
}
const plan = planOf(declared);

function moveHint(): string {
  // The first offset at least 1000 further that the port plan accepts.
  const next = nextGoodOffset(plan, offset + 999) ?? offset + 1000;
  return (
    `Move every demo port: npm start -- --port-offset ${next}   (or ${OFFSET_ENV}=${next} npm start);\n` +
    `the landing page and every URL printed move with it.`
  );
}

// The plan is checked before anything is written or started: a port browsers refuse, or one outside
// 1-65535, is named with a working offset (scripts/stack/plan.ts).
const checked = checkPlan(plan, offset);
if (!checked.ok) {
  console.error(describeRefusal(checked, OFFSET_ENV));
  process.exit(2);
}
const services = declared
  .map((s) => shiftService(s, offset, copyConfig))
  .map((s) =>
    s.name === STATUS_BIN
      ? { ...s, start: { ...s.start, args: ['--config', 'data/stack/status-landing.json'] } }
      : s,
  );

// Every port is tried before anything starts: a busy one is named here, not only in a service's log.
const busy: Claim[] = [];
for (const c of checked.claims) if (!(await portFree(c.proto, c.port))) busy.push(c);
if (busy.length > 0) {
  console.error(busyPortsText(busy, moveHint()));
  process.exit(1);
}

mkdirSync(logDir, { recursive: true });
mkdirSync(stackDir, { recursive: true });
const landing = landingConfig(
  services,
  landingPort,
  demoStatusEntries(join(root, 'config', 'status.demo.json'), offset),
);
writeFileSync(join(stackDir, 'status-landing.json'), JSON.stringify(landing, null, 2) + '\n');

const supervisor = new Supervisor({
  root,
  logDir,
  verbose: values.verbose === true,
  moveHint,
  onStopped: (code) => process.exit(code),
});
process.on('SIGINT', () => void supervisor.stopAll('SIGINT', 0));
process.on('SIGTERM', () => void supervisor.stopAll('SIGTERM', 0));
for (const service of services) supervisor.start(service);

const deadline = Date.now() + readyTimeoutMs;
const results = await Promise.all(
  supervisor.running.map(async (r) => {
    if (r.service.start.ready) return supervisor.ready(r, deadline);
    await new Promise((res) => setTimeout(res, 1500));
    return r.child.exitCode === null;
  }),
);
if (supervisor.stopping) await never();

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

console.log(
  runningText(
    supervisor.running.map((r, i) => ({ service: r.service, pid: r.child.pid, up: results[i] === true })),
    `http://127.0.0.1:${landingPort}/`,
    offset,
    withToken,
  ),
);
const dead = supervisor.running.filter((r) => r.child.exitCode !== null || r.child.signalCode !== null);
if (dead.length > 0) {
  // A service that died is reported by its exit handler (with the reason from its log), which stops the
  // stack; on a loaded machine its log may still be flushing when the readiness check ends.
  await Promise.race([Promise.all(dead.map((r) => r.reported)), new Promise((r) => setTimeout(r, 10_000))]);
  await supervisor.stopAll('a service did not become ready', 1);
  await never();
}
// A slow service is reported, not a reason to stop the others: it keeps running, the landing page shows its
// health live, and the console says when it answers.
supervisor.running.forEach((r, i) => {
  if (results[i] || !r.service.start.ready) return;
  console.error(
    `start-stack: ${r.service.name} did not become ready within ${Math.round(readyTimeoutMs / 1000)} s; ` +
      `it keeps running (the others are not stopped) and the landing page shows its health; see data/logs/${r.service.name}.log`,
  );
  const since = Date.now();
  void supervisor.ready(r, Number.POSITIVE_INFINITY).then((ok) => {
    if (ok && !supervisor.stopping)
      console.log(
        `start-stack: ${r.service.name} is up (${Math.round((Date.now() - since + readyTimeoutMs) / 1000)} s after start)`,
      );
  });
});
