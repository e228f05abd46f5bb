/**
 * The order a run starts its files in. `node --test --test-concurrency=N` starts files in the order given, so a
 * long file started last runs alone at the end while the other slots have nothing left to do. Files start
 * longest first (the classic longest-processing-time rule), by the seconds each took in a measured run,
 * kept in scripts/test-durations.json; a file the table does not know (new since) counts as 0 s and starts
 * after the known ones, in name order. The table only orders: a stale or missing entry costs some wall
 * time, never a test.
 *
 * Refresh the table from a run's per-file times (run-tests.ts --times):
 *   tsx scripts/test-order.ts --write <times.jsonl> [more.jsonl ...]
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readFileTimes } from './file-times.ts';

export type Durations = Readonly<Record<string, number>>;

/** The table in `root`, or an empty one when it is missing or unreadable (the order then falls back to names). */
export function readDurations(root: string): Durations {
  try {
    const parsed = JSON.parse(readFileSync(join(root, 'scripts/test-durations.json'), 'utf8')) as unknown;
    if (typeof parsed !== 'object' || parsed === null) return {};
    return Object.fromEntries(
      Object.entries(parsed).filter(
        (e): e is [string, number] => typeof e[1] === 'number' && Number.isFinite(e[1]),
      ),
    );
  } catch {
    return {};
  }
}

/** `files` longest first by `durations`, ties and unknown files in name order; `first` files lead whatever they took. */
export function longestFirst(
  files: readonly string[],
  durations: Durations,
  first: readonly RegExp[] = [],
): string[] {
  const lead = (f: string): number => {
    const i = first.findIndex((re) => re.test(f));
    return i === -1 ? first.length : i;
  };
  return [...files].sort(
    (a, b) => lead(a) - lead(b) || (durations[b] ?? 0) - (durations[a] ?? 0) || a.localeCompare(b),
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  if (args[0] !== '--write' || args.length < 2) {
    console.error('usage: tsx scripts/test-order.ts --write <times.jsonl> [more.jsonl ...]');
    process.exit(2);
  }
  const root = fileURLToPath(new URL('..', import.meta.url));
  const table: Record<string, number> = { ...readDurations(root) };
  for (const file of args.slice(1)) {
    for (const t of readFileTimes(readFileSync(file, 'utf8'), root))
      table[t.file] = Math.round(t.seconds * 10) / 10;
  }
  const sorted = Object.fromEntries(Object.entries(table).sort(([a], [b]) => a.localeCompare(b)));
  writeFileSync(join(root, 'scripts/test-durations.json'), `${JSON.stringify(sorted, null, 2)}\n`);
  console.log(`test-order: ${Object.keys(sorted).length} files in scripts/test-durations.json`);
}
