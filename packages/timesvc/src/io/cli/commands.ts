/**
 * The `timesvc` binary's sub-commands besides `serve` (docs/cli.md): `check-config`, the chronyc-like client
 * commands reading a running server's web API (`sources`, `sourcestats`, `tracking`, `ntpdata`, `clients`,
 * `serverstats`), `hash-password` and `query`. main.ts hands them to `runService` as the definition's
 * `commands`.
 */
import { ConfigError, type CliCommand } from '@broadcast-ops/core';
import { loadTimesvcConfig, parseHostPort } from '../../config.ts';
import { labCredentialUse } from '../web/lab-credential.ts';
import { hashPassword } from '../web/passwords.ts';
import type { NtpDataRow, PeerRow, ServerStatsStatus, ClientsStatus, TrackingStatus } from './format.ts';

/**
 * The formatting (format.ts) and the NTP client (query.ts) load when a command runs: `serve` runs none of
 * them, and main.ts hands these definitions to `runService` at every start (docs/performance.md "At rest").
 */
type Format = typeof import('./format.ts');
const format = (): Promise<Format> => import('./format.ts');

const apiOptions = {
  url: {
    type: 'string' as const,
    description: 'web API of the server (default $TIMESVC_URL or http://127.0.0.1:8080)',
  },
  user: {
    type: 'string' as const,
    description: 'log in as this user (default $TIMESVC_USER); password from $TIMESVC_PASSWORD',
  },
  token: {
    type: 'string' as const,
    description: 'a token from /api/auth/login instead (default $TIMESVC_TOKEN)',
  },
};

async function fromApi(
  values: Record<string, unknown>,
  path: string,
  print: (f: Format, body: unknown) => string,
): Promise<void> {
  try {
    const f = await format();
    const body = await f.apiGet<unknown>(f.apiTarget(values, process.env), path);
    process.stdout.write(values['json'] ? JSON.stringify(body, null, 2) + '\n' : print(f, body));
  } catch (err) {
    process.stderr.write(`timesvc: ${(err as Error).message}\n`);
    process.exitCode = 1;
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    chunks.push(chunk as Buffer);
    size += (chunk as Buffer).length;
    if (size > 4096) break;
  }
  return Buffer.concat(chunks).toString('utf8').split(/\r?\n/)[0] ?? '';
}

const configOption = {
  config: {
    type: 'string' as const,
    short: 'c',
    description: 'YAML or JSON config file (default: embedded defaults)',
  },
};

function load(values: Record<string, unknown>): ReturnType<typeof loadTimesvcConfig> | undefined {
  const file = typeof values['config'] === 'string' ? values['config'] : undefined;
  try {
    return loadTimesvcConfig(file);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`timesvc: ${err.message}\n`);
      process.exitCode = 2;
      return undefined;
    }
    throw err;
  }
}

export const timesvcCommands: Record<string, CliCommand> = {
  'check-config': {
    summary: 'Validate a config file and print the effective configuration (secrets hidden)',
    options: configOption,
    run: async ({ values }) => {
      const config = load(values);
      if (!config) return;
      const shown = {
        ...config,
        web: { ...config.web, jwt_secret: config.web.jwt_secret ? '[set]' : '' },
        nts: { ...config.nts, cookie_key: config.nts.cookie_key ? '[set]' : '' },
      };
      process.stdout.write(JSON.stringify(shown, null, 2) + '\n');
      const warnings = (await format()).configWarnings(config);
      for (const w of await labCredentialUse(config)) {
        warnings.push(`${w}: the documented lab credential; change it before production use`);
      }
      for (const w of warnings) process.stderr.write(`warning: ${w}\n`);
    },
  },
  sources: {
    summary: 'Upstream sources of a running server, like chronyc sources (--json for the API body)',
    options: { ...apiOptions, json: { type: 'boolean' as const, description: 'print the API JSON' } },
    run: ({ values }) => fromApi(values, '/api/peers', (f, b) => f.formatSources(b as PeerRow[])),
  },
  sourcestats: {
    summary: 'Sample statistics per source, like chronyc sourcestats',
    options: { ...apiOptions, json: { type: 'boolean' as const, description: 'print the API JSON' } },
    run: ({ values }) => fromApi(values, '/api/peers', (f, b) => f.formatSourcestats(b as PeerRow[])),
  },
  tracking: {
    summary: 'The served clock of a running server, like chronyc tracking',
    options: { ...apiOptions, json: { type: 'boolean' as const, description: 'print the API JSON' } },
    run: ({ values }) => fromApi(values, '/api/status', (f, b) => f.formatTracking(b as TrackingStatus)),
  },
  ntpdata: {
    summary: 'The last NTP reply and packet totals per source, like chronyc ntpdata [address]',
    positionals: '[address]',
    options: { ...apiOptions, json: { type: 'boolean' as const, description: 'print the API JSON' } },
    run: ({ values, positionals }) =>
      fromApi(values, '/api/peers', (f, b) => f.formatNtpdata(b as NtpDataRow[], positionals[0])),
  },
  clients: {
    summary: 'The NTP clients of a running server (its client log), like chronyc clients',
    options: { ...apiOptions, json: { type: 'boolean' as const, description: 'print the API JSON' } },
    run: ({ values }) => fromApi(values, '/api/clients', (f, b) => f.formatClients(b as ClientsStatus)),
  },
  serverstats: {
    summary: 'NTP server counters of a running server, like chronyc serverstats',
    options: { ...apiOptions, json: { type: 'boolean' as const, description: 'print the API JSON' } },
    run: ({ values }) =>
      fromApi(values, '/api/status', (f, b) => f.formatServerstats(b as ServerStatsStatus)),
  },
  'hash-password': {
    summary: 'Read a password from stdin (one line) and print its scrypt hash for web.users[].password_hash',
    run: async () => {
      if (process.stdin.isTTY) process.stderr.write('password (input is shown; pipe it to hide it): ');
      const password = await readStdin();
      if (password.length < 8) {
        process.stderr.write('timesvc hash-password: give a password of at least 8 characters on stdin\n');
        process.exitCode = 2;
        return;
      }
      process.stdout.write((await hashPassword(password)) + '\n');
    },
  },
  query: {
    summary: 'Ask an NTP server for the time once and print offset, delay, stratum, refid',
    positionals: '<host[:port]>',
    options: {
      count: { type: 'string', description: 'number of queries (default 1, max 20)' },
      json: { type: 'boolean', description: 'one JSON object per sample (the full decoded reply)' },
    },
    run: async ({ positionals, values }) => {
      const hp = parseHostPort(positionals[0] ?? '', 123);
      if (!hp) {
        process.stderr.write('timesvc query: give host or host:port\n');
        process.exitCode = 2;
        return;
      }
      const count = Math.max(1, Math.min(20, Number(values['count'] ?? 1) || 1));
      const [{ queryServer }, { formatQuery }] = await Promise.all([import('../query.ts'), format()]);
      for (let i = 0; i < count; i++) {
        try {
          const r = await queryServer(hp.host, hp.port, 2000);
          process.stdout.write(values['json'] ? JSON.stringify(r) + '\n' : formatQuery(hp.host, hp.port, r));
        } catch (err) {
          process.stderr.write(`timesvc query: ${(err as Error).message}\n`);
          process.exitCode = 1;
        }
      }
    },
  },
};
