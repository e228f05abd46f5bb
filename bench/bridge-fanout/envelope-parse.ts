/**
 * The cost of checking one client frame (`parseClientFrame`: depth scan, JSON.parse, the zod schema), per kind
 * of frame, beside the anchor measured in the same process: `JSON.parse` of the same text. With `--against`
 * (repeatable), other copies of protocol/envelope.ts (e.g. an older checkout's) are timed too, each in its own
 * process, taking turns round by round (docs/performance.md "Parsing the envelope").
 *
 *   npx tsx bench/bridge-fanout/envelope-parse.ts [--rounds 5] [--against <path of envelope.ts>]...
 */
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const HERE = fileURLToPath(import.meta.url);
const OWN = resolve(HERE, '../../../packages/telemetry-bridge/src/protocol/envelope.ts');
const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    against: { type: 'string', multiple: true },
    child: { type: 'string' },
  },
});

const pad = 'x'.repeat(120);
const FRAMES: Record<string, string> = {
  state: JSON.stringify({
    id: 'p1',
    type: 'state',
    path: 'app.pub.custom.k1',
    payload: { value: { i: 1, t: 1.5, pad } },
    timestamp: 1_700_000_000_000,
  }),
  command: JSON.stringify({
    id: 'c1',
    type: 'command',
    target: 'companion.satellite',
    path: 'companion.satellite.press',
    payload: { action: 'press', params: { page: 1, row: 2 } },
    timestamp: 1_700_000_000_000,
    ttl: 5000,
    idempotencyKey: 'k1',
  }),
  subscribe: JSON.stringify({
    id: 's',
    type: 'subscribe',
    path: 'hub.subscriptions',
    payload: { patterns: ['app.pub.custom.**', 'companion.*.state'], snapshot: true },
    timestamp: 1,
  }),
  handshake: JSON.stringify({ type: 'handshake', name: 'app', version: '1', clientId: 'abcdefgh123' }),
  refused: JSON.stringify({
    id: 'b',
    type: 'state',
    path: 'Bad.Path',
    payload: { value: 1 },
    timestamp: -1,
    extra: 1,
  }),
};
const N = 20_000;

/** One process, one module: ns per frame (median of 9 batches of N) and the JSON.parse anchor. */
async function child(modulePath: string): Promise<void> {
  const mod = (await import(pathToFileURL(modulePath).href)) as { parseClientFrame: (t: string) => unknown };
  const time = (f: () => void): number => {
    const batches: number[] = [];
    for (let b = 0; b < 9; b++) {
      const t0 = performance.now();
      for (let i = 0; i < N; i++) f();
      batches.push(((performance.now() - t0) * 1e6) / N);
    }
    return batches.sort((a, b) => a - b)[4] as number;
  };
  for (const f of Object.values(FRAMES)) for (let i = 0; i < N; i++) mod.parseClientFrame(f); // warm-up
  const out: Record<string, [number, number]> = {};
  for (const [kind, f] of Object.entries(FRAMES)) {
    out[kind] = [time(() => void mod.parseClientFrame(f)), time(() => void JSON.parse(f))];
  }
  process.stdout.write(JSON.stringify(out));
}

function runChild(modulePath: string): Record<string, [number, number]> {
  const text = execFileSync(process.execPath, ['--import', 'tsx', HERE, '--child', modulePath], {
    encoding: 'utf8',
    env: { ...process.env, NODE_OPTIONS: '--conditions=source' },
  });
  return JSON.parse(text) as Record<string, [number, number]>;
}

if (values.child !== undefined) {
  await child(values.child);
} else {
  const modules: [string, string][] = [['this tree', OWN]];
  for (const [i, path] of (values.against ?? []).entries()) modules.push([`against ${i + 1}`, resolve(path)]);
  const rounds = Number(values.rounds);
  const results = new Map<string, Record<string, [number, number]>[]>(modules.map(([n]) => [n, []]));
  for (let r = 0; r < rounds; r++)
    for (const [name, path] of modules) results.get(name)?.push(runChild(path));
  const median = (xs: number[]): number => xs.sort((a, b) => a - b)[xs.length >> 1] as number;
  for (const [name, path] of modules) {
    console.log(`${name} (${path}), median of ${rounds} processes:`);
    for (const kind of Object.keys(FRAMES)) {
      const rs = results.get(name) ?? [];
      const parse = median(rs.map((x) => (x[kind] as [number, number])[0]));
      const anchor = median(rs.map((x) => (x[kind] as [number, number])[1]));
      console.log(
        `  ${kind.padEnd(9)} ${(parse / 1000).toFixed(2).padStart(6)} µs per frame` +
          `  (anchor JSON.parse of the same text ${(anchor / 1000).toFixed(2)} µs; ${(parse / anchor).toFixed(1)}×)`,
      );
    }
  }
}
