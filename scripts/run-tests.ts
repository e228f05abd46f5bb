/**
 * The one test runner: installs missing system tools (scripts/setup-tools.sh), collects every *.test.ts
 * under packages/<pkg>/test (and bench/ tests if any), runs them in one `node --test` run through tsx, and
 * fails when it finds no test, because Node 20 does not expand globs and exits 0 on zero tests.
 *
 * Usage: tsx scripts/run-tests.ts [--tap <file>] [path-filter ...]   (filters are substrings of the test file path)
 *
 * This runs the suite on the Node that runs this script (`npm run test:unit`). `npm test` runs it on every
 * supported Node line through scripts/test-matrix.ts, which passes `--tap` to read the totals back.
 * The spec reporter always writes to stdout (Node 20 would otherwise switch to TAP when stdout is not a
 * terminal), so the output ends in the same summary on every Node line.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = fileURLToPath(new URL('..', import.meta.url));

function collect(dir: string, out: string[]): void {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of entries) {
    if (name === 'node_modules' || name === 'fixtures') continue;
    const path = join(dir, name);
    const st = statSync(path);
    if (st.isDirectory()) collect(path, out);
    else if (name.endsWith('.test.ts')) out.push(path);
  }
}

const files: string[] = [];
for (const pkg of readdirSync(join(root, 'packages'))) collect(join(root, 'packages', pkg, 'test'), files);
collect(join(root, 'scripts', 'test'), files);
const { values: opts, positionals: filters } = parseArgs({
  options: { tap: { type: 'string' } },
  allowPositionals: true,
});
const selected = files
  .map((f) => relative(root, f))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();

if (selected.length === 0) {
  console.error(
    `run-tests: no *.test.ts files found${filters.length ? ` matching ${filters.join(', ')}` : ''}`,
  );
  process.exit(1);
}

const setup = spawnSync('bash', [join(root, 'scripts/setup-tools.sh')], { stdio: 'inherit', cwd: root });
if (setup.status !== 0) {
  console.error('run-tests: system tool setup failed (see above)');
  process.exit(1);
}

console.log(`run-tests: ${selected.length} test files`);
const result = spawnSync(
  process.execPath,
  [
    '--import',
    'tsx',
    '--test',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    ...(opts.tap ? ['--test-reporter=tap', `--test-reporter-destination=${opts.tap}`] : []),
    `--test-concurrency=${process.env['TEST_CONCURRENCY'] ?? '2'}`,
    // Node applies the timeout to each test file as a whole: the opt-in long scenarios need more.
    `--test-timeout=${process.env['TIMESVC_LONG_TESTS'] === '1' ? '900000' : '180000'}`,
    ...selected,
  ],
  { stdio: 'inherit', cwd: root, env: { ...process.env, NODE_ENV: 'test' } },
);
process.exit(result.status ?? 1);
