/**
 * The services `npm start` runs: what each package declares in its package.json's `toolkit.start` (see
 * scripts/start-stack.ts for the format), and those declarations moved by a port offset. Reading package.json
 * files is the only I/O here; moving ports is pure (copies of config files are written by the caller).
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { substituteEnv } from '@broadcast-ops/core';
import { shiftPort, shiftUrl, type PlanService } from './plan.ts';

export interface UrlEntry {
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

export interface PortEntry {
  label: string;
  proto?: 'tcp' | 'udp';
  port?: number | string; // a string after ${VAR} substitution
  /** The stack sends to this port rather than listening on it. */
  outbound?: boolean;
  use: string;
}

export interface StartEntry {
  title?: string;
  docs?: string;
  args?: string[];
  env?: Record<string, string>;
  ready?: string;
  urls?: UrlEntry[];
  ports?: PortEntry[];
}

export interface StackService {
  name: string;
  dir: string;
  bin: string;
  version: string;
  start: StartEntry;
}

/** The status service's binary: it serves the landing page whatever `--packages` names. */
export const STATUS_BIN = 'broadcast-ops-status';

/**
 * The service a package declares in toolkit.start (`${VAR}` substituted from `env`), if any. Users run the
 * compiled entry point on plain node; under the `source` condition (tests) the bin, which runs src/ through tsx.
 */
export function readService(
  dir: string,
  env: NodeJS.ProcessEnv,
  sourceMode: boolean,
): StackService | undefined {
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
  const start = substituteEnv(declared, env, `${pkgFile} toolkit.start`) as StartEntry;
  const built = join(dir, 'dist', 'start.cjs');
  return {
    name: binEntry[0],
    dir,
    bin: !sourceMode && existsSync(built) ? built : join(dir, binEntry[1]),
    version: pkg.version ?? '',
    start,
  };
}

/** The service packages under `packagesDir` declaring toolkit.start, the status service (landing page) first. */
export function discover(
  packagesDir: string,
  statusDir: string,
  env: NodeJS.ProcessEnv,
  sourceMode: boolean,
): StackService[] {
  const services: StackService[] = [];
  for (const dirName of readdirSync(packagesDir).sort()) {
    const service = readService(join(packagesDir, dirName), env, sourceMode);
    if (service && service.name !== STATUS_BIN) services.push(service);
  }
  const status = readService(statusDir, env, sourceMode);
  return services.length > 0 && status ? [status, ...services] : services;
}

/** What the port plan (plan.ts) needs of each service. */
export function planOf(services: readonly StackService[]): PlanService[] {
  return services.map((s) => ({
    name: s.name,
    ...(s.start.ready ? { ready: s.start.ready } : {}),
    urls: s.start.urls ?? [],
    ports: s.start.ports ?? [],
  }));
}

/**
 * Every port in a parsed config moved by the offset: keys named `port`, `*Port`, `*_port`, every number in a
 * `*Ports` object or array (playout's `defaultPorts`), and the port of every loopback URL (e.g. the status
 * service's list of the others).
 */
export function shiftConfigPorts(value: unknown, offset: number, key = '', inPorts = false): unknown {
  if (Array.isArray(value)) return value.map((v) => shiftConfigPorts(v, offset, key, inPorts));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [
        k,
        shiftConfigPorts(v, offset, k, inPorts || /Ports$/i.test(k)),
      ]),
    );
  }
  if (typeof value === 'number' && Number.isInteger(value) && (inPorts || /(^port|Port|_port)$/.test(key)))
    return shiftPort(value, offset);
  if (typeof value === 'string' && /^(?:https?|wss?):\/\/(?:127\.0\.0\.1|localhost|\[::1\]):\d+/.test(value))
    return shiftUrl(value, offset);
  return value;
}

/**
 * A service with every port moved by the offset: its toolkit.start URLs, `ports`, `*_PORT` env values, and
 * the config files among its arguments, which `copyConfig(service, arg)` replaces by a moved copy (returning
 * the copy's path, or the argument itself when it is not a config file).
 */
export function shiftService(
  service: StackService,
  offset: number,
  copyConfig: (service: string, arg: string) => string,
): StackService {
  if (offset === 0) return service;
  const start = service.start;
  return {
    ...service,
    start: {
      ...start,
      args: (start.args ?? []).map((arg) => copyConfig(service.name, arg)),
      env: Object.fromEntries(
        Object.entries(start.env ?? {}).map(([k, v]) => [
          k,
          /PORT$/.test(k) && /^\d+$/.test(v) ? String(shiftPort(Number(v), offset)) : v,
        ]),
      ),
      ...(start.ready ? { ready: shiftUrl(start.ready, offset) } : {}),
      urls: (start.urls ?? []).map((u) => ({ ...u, url: shiftUrl(u.url, offset) })),
      ports: (start.ports ?? []).map((p) =>
        p.port === undefined ? p : { ...p, port: shiftPort(Number(p.port), offset) },
      ),
    },
  };
}

/**
 * A service's environment: toolkit.start's env entries are defaults that a variable set in the launcher's own
 * environment overrides (e.g. PUNCH_HOST=0.0.0.0 for join links other machines can open), except the *_PORT
 * ones, which the port plan owns (move them with --port-offset).
 */
export function serviceEnv(defaults: Record<string, string>, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...env };
  for (const [k, v] of Object.entries(defaults)) if (/PORT$/.test(k) || !env[k]) out[k] = v;
  return out;
}
