// The PTP and NTS code loads only when the configuration enables it (src/io/service.ts loadOptionalCode,
// docs/performance.md "Third pass"). Each case runs in a child process with a module load hook that records
// every module loaded, since a module once loaded stays loaded for the rest of a process.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

const src = (path: string): string => new URL(`../../src/${path}`, import.meta.url).href;

/** What main.ts imports to run the service. */
const MAIN_IMPORTS = ['app.ts', 'config.ts', 'io/cli/commands.ts', 'io/web/log-ring.ts'];

/** Modules of the PTP and NTS code that only their sections' `enabled` may load. */
const OPTIONAL = [
  /\/io\/ptp\.ts$/,
  /\/io\/ptp-metrics\.ts$/,
  /\/domain\/ptp-bmca\.ts$/,
  /\/io\/nts-service\.ts$/,
  /\/io\/nts-ke-server\.ts$/,
  /\/domain\/nts-responder\.ts$/,
  /\/domain\/nts-cookies\.ts$/,
  /\/io\/nts-peer\.ts$/,
  /\/io\/nts-ke-client\.ts$/,
  /^node:tls$/,
];

/**
 * Loads main.ts's imports, then `loadOptionalCode` with `config` (its ptp, nts and peer parts are all it
 * reads); returns the modules loaded by each step.
 */
function loaded(config: unknown): { atStart: string[]; optional: string[]; keys: string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'timesvc-optional-'));
  const log = join(dir, 'loaded.txt');
  try {
    const hook = `import { appendFileSync } from 'node:fs';
      export async function load(url, context, next) {
        appendFileSync(${JSON.stringify(log)}, url + '\\n');
        return next(url, context);
      }`;
    const script = `
      import { register } from 'node:module';
      import { appendFileSync } from 'node:fs';
      register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hook)}));
      await Promise.all(${JSON.stringify(MAIN_IMPORTS.map(src))}.map((u) => import(u)));
      const { loadOptionalCode } = await import(${JSON.stringify(src('io/service.ts'))});
      appendFileSync(${JSON.stringify(log)}, '--\\n');
      const code = await loadOptionalCode(${JSON.stringify(config)});
      console.log(JSON.stringify(Object.keys(code)));`;
    const out = execFileSync(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', '--input-type=module', '-e', script],
      { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } },
    );
    const [atStart = '', optional = ''] = readFileSync(log, 'utf8').split('--\n');
    return {
      atStart: atStart.split('\n').filter(Boolean),
      optional: optional.split('\n').filter(Boolean),
      keys: JSON.parse(out) as string[],
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The CLI's formatting and NTP client, which only its sub-commands use (not `serve`). */
const CLI_ONLY = [/\/io\/cli\/format\.ts$/, /\/io\/query\.ts$/];

const off = { ptp: { enabled: false }, nts: { enabled: false }, ntp: { enabled: true, upstream_peers: [] } };

test("PTP and NTS off (the demo): none of their code loads, at start or after; nor the CLI's", () => {
  const seen = loaded(off);
  assert.ok(
    seen.atStart.some((u) => u.endsWith('/io/service.ts')),
    'the hook saw the service load',
  );
  for (const pattern of OPTIONAL) {
    const hit = [...seen.atStart, ...seen.optional].filter((u) => pattern.test(u));
    assert.deepEqual(hit, [], `${String(pattern)} loaded with PTP and NTS off`);
  }
  assert.deepEqual(seen.keys, []);
  for (const pattern of CLI_ONLY) {
    const hit = seen.atStart.filter((u) => pattern.test(u));
    assert.deepEqual(hit, [], `${String(pattern)} loaded by the service's start`);
  }
});

test('each enabled part loads its code, and only its own', () => {
  const all = loaded({
    ptp: { enabled: true },
    nts: { enabled: true },
    ntp: { enabled: true, upstream_peers: [{ nts_enabled: true }] },
  });
  assert.deepEqual(all.keys.sort(), ['ntsPeer', 'ntsServer', 'ptp']);
  for (const pattern of OPTIONAL) {
    assert.ok(
      all.optional.some((u) => pattern.test(u)),
      `${String(pattern)} loaded with PTP, NTS and an NTS peer on`,
    );
  }
  const ptpOnly = loaded({ ...off, ptp: { enabled: true } });
  assert.deepEqual(ptpOnly.keys, ['ptp']);
  assert.ok(ptpOnly.optional.some((u) => /\/io\/ptp\.ts$/.test(u)));
  assert.ok(!ptpOnly.optional.some((u) => /\/nts-|^node:tls$/.test(u)), ptpOnly.optional.join('\n'));
  const ntsPeerOnly = loaded({ ...off, ntp: { enabled: true, upstream_peers: [{ nts_enabled: true }] } });
  assert.deepEqual(ntsPeerOnly.keys, ['ntsPeer']);
  assert.ok(!ntsPeerOnly.optional.some((u) => /\/io\/nts-service\.ts$|\/ptp/.test(u)));
});
