/**
 * The one test runner: collects every *.test.ts under packages/<pkg>/test and scripts/test, installs the
 * missing system tools the selected tests need (scripts/setup-tools.sh), runs them in one `node --test` run
 * through tsx, and fails when it finds no test, because Node 20 does not expand globs and exits 0 on zero tests.
 *
 * Usage: tsx scripts/run-tests.ts [--tap <file>] [--times <file>] [--quick] [--skip-heavy] [--list]
 *                                  [path-filter ...]
 *   path-filter  substrings of the test file path; only matching files run
 *   --times      also write each top-level test's file and duration as JSON lines (file-times-reporter.mjs)
 *   --quick      only the quick tier: test/protocol, test/domain, test/app (`npm run test:quick`), in as many
 *                shared processes as the concurrency (quickShards below)
 *   --one-process-per-file  the quick files too in one process each, as the other tiers run (without it,
 *                the quick files of any run share processes: quickShards below)
 *   --skip-heavy leave out the heavy tier, test/interop
 *   --portable   only the quick tier and the portability set (scripts/test-portable.ts): what the matrix runs
 *                on the Node lines other than this machine's (README "Node.js versions")
 *   --list       print the selected files, and their count per tier per package, and run nothing
 *   --exclude    a path substring whose files do not run (repeatable); the matrix runs the long real-time
 *                file beside the suite this way
 *   --tools-only install the system tools the selected files need, then exit without running them; the
 *                matrix does this once before its lines start, so that a line in a network namespace of its
 *                own (no route to the package mirrors) finds every tool installed
 *
 * Tiers are folders (scripts/test-tiers.ts, docs/ARCHITECTURE.md "Tests mirror the layers").
 *
 * System tools: a test file needs the tools named in `requireTool('<binary>')` in it or in the test helpers
 * it imports (relative imports, followed); only those are installed, and none when no selected test needs one.
 *
 * Tests run the TypeScript sources: the test processes get `--conditions=source` on their command line (node
 * --test passes its own flags on to each file's process), which resolves @broadcast-ops/* to src/. The processes
 * the tests start (services, CLIs, agents) run the compiled dist/, built first when out of date (below).
 *
 * This runs the suite on the Node that runs this script (`npm run test:unit`). `npm test` runs it on every
 * supported Node line through scripts/test-matrix.ts, which passes `--tap` to read the totals back.
 * The spec reporter always writes to stdout (Node 20 would otherwise switch to TAP when stdout is not a
 * terminal), so the output ends in the same summary on every Node line.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { longestFirst, readDurations } from './test-order.ts';
import { PORTABLE } from './test-portable.ts';
import { TIERS, collectTests, isQuick, ownerOf, sourcesOf, tierOf } from './test-tiers.ts';

const root = fileURLToPath(new URL('..', import.meta.url));

const files = collectTests(root);
const { values: opts, positionals: filters } = parseArgs({
  options: {
    tap: { type: 'string' },
    times: { type: 'string' },
    quick: { type: 'boolean' },
    'one-process-per-file': { type: 'boolean' },
    'skip-heavy': { type: 'boolean' },
    portable: { type: 'boolean' },
    list: { type: 'boolean' },
    exclude: { type: 'string', multiple: true },
    'tools-only': { type: 'boolean' },
  },
  allowPositionals: true,
});

const outside = files.filter((f) => tierOf(f) === undefined);
if (outside.length > 0) {
  // scripts/test/app/test-tiers.test.ts fails on these; they run with the integration tier meanwhile.
  console.warn(`run-tests: ${outside.length} test files outside a tier folder: ${outside.join(' ')}`);
}

/**
 * Binaries named in `requireTool('x')` and `for (const tool of ['x', 'y'])` lists before requireTool(tool), and
 * chromium for `launchChromium(`.
 */
function toolsNeeded(text: string): string[] {
  const tools = new Set<string>();
  for (const m of text.matchAll(/requireTool\(\s*'([^']+)'/g)) tools.add(m[1] ?? '');
  for (const m of text.matchAll(/\[([^\]]*)\]\)?\s*\n?\s*requireTool\(\s*[a-z]\w*\s*\)/g)) {
    for (const t of (m[1] ?? '').matchAll(/'([^']+)'/g)) tools.add(t[1] ?? '');
  }
  // core's testing/browser launches Debian's chromium (requireTool inside the helper).
  if (/\blaunchChromium\(/.test(text)) tools.add('chromium');
  tools.delete('');
  return [...tools].sort();
}

const isHeavy = (f: string): boolean => tierOf(f) === 'interop';
const selected = files
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .filter((f) => !(opts.exclude ?? []).some((x) => f.includes(x)))
  .filter((f) => !opts.quick || isQuick(f))
  .filter((f) => !opts.portable || isQuick(f) || Object.hasOwn(PORTABLE, f));
// The longest files start first (scripts/test-order.ts), the 10-minute accuracy test before all.
selected.splice(0, selected.length, ...longestFirst(selected, readDurations(root), [/discipline-accuracy/]));
const heavySkipped = opts['skip-heavy'] ? selected.filter(isHeavy) : [];
if (heavySkipped.length > 0) {
  selected.splice(0, selected.length, ...selected.filter((f) => !isHeavy(f)));
  console.log(
    `run-tests: ${heavySkipped.length} heavy interop files left to this machine's Node line: ${heavySkipped.join(' ')}`,
  );
}

if (opts.list) {
  // Files per tier per package, then the files: what a run with these options would start.
  const owners = [...new Set(selected.map(ownerOf))].sort();
  console.log(['package'.padEnd(18), ...TIERS.map((t) => t.padStart(9))].join(''));
  for (const owner of owners) {
    const mine = selected.filter((f) => ownerOf(f) === owner);
    const row = TIERS.map((t) => String(mine.filter((f) => tierOf(f) === t).length).padStart(9));
    console.log([owner.padEnd(18), ...row].join(''));
  }
  for (const f of selected) console.log(`${(tierOf(f) ?? '-').padEnd(9)}${f}`);
  process.exit(0);
}

if (selected.length === 0) {
  console.error(
    `run-tests: no *.test.ts files found${filters.length ? ` matching ${filters.join(', ')}` : ''}`,
  );
  process.exit(1);
}

// Tools scripts/system-tools.txt lists (others, e.g. npm, come with Node and are not installed from apt).
const listed = new Set(
  readFileSync(join(root, 'scripts/system-tools.txt'), 'utf8')
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0] ?? '')
    .filter((b) => b !== '' && !b.startsWith('#')),
);
const needed = [...new Set(selected.flatMap((f) => toolsNeeded(sourcesOf(root, f))))]
  .filter((b) => listed.has(b))
  .sort();
if (needed.length > 0) {
  console.log(`run-tests: system tools the selected tests need: ${needed.join(' ')}`);
  const setup = spawnSync('bash', [join(root, 'scripts/setup-tools.sh'), ...needed], {
    stdio: 'inherit',
    cwd: root,
  });
  if (setup.status !== 0) {
    console.error('run-tests: system tool setup failed (see above)');
    process.exit(1);
  }
}

if (opts['tools-only']) {
  console.log(`run-tests: system tools ready for ${selected.length} test files`);
  process.exit(0);
}

/**
 * The services, CLIs and agents the tests start run compiled, as users run them: the bins run dist/ unless the
 * process itself resolves the `source` condition, and the condition is given to the test processes only (on
 * their command line, below), not through NODE_OPTIONS to what they start. So dist/ is brought up to date
 * first (scripts/build.mjs: a project whose inputs did not change is skipped, so this costs nothing after
 * `npm ci`). Starting a service through tsx cost 1-2.5 s of CPU more than compiled (punch's restart test: 22
 * CPU-s from sources, 10.6 compiled); the quick tier starts nothing, so it skips the build.
 */
if (selected.some((f) => !isQuick(f))) {
  const build = spawnSync(process.execPath, [join(root, 'scripts/build.mjs')], {
    stdio: 'inherit',
    cwd: root,
  });
  if (build.status !== 0) {
    console.error('run-tests: the build failed (see above); the processes the tests start run dist/');
    process.exit(1);
  }
}
console.log(
  `run-tests: ${selected.length} test files${
    opts.quick
      ? ' (quick: protocol, domain and app tiers)'
      : opts.portable
        ? ' (the quick tier and the portability set)'
        : ''
  }`,
);
/**
 * The quick tier in a few shared processes instead of one per file. Starting node with tsx and loading a
 * service's module graph costs about a second of CPU per file, more than most quick files' tests (109 files:
 * 157 s of CPU one process per file, 31 s in one process, same 555 tests passing). Quick tests may share a
 * process because the tier's contract is that they touch nothing outside it: no socket, process, file or wall-
 * clock timer (scripts/test/app/test-tiers.test.ts). The files are dealt into `n` entry modules, largest first
 * to the lightest shard, each importing its files in turn; node --test runs each entry as one process.
 */
function quickShards(list: readonly string[], n: number): { entries: string[]; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'quick-tier-'));
  const sized = list.map((f) => ({ f, size: statSync(join(root, f)).size })).sort((a, b) => b.size - a.size);
  const shards = Array.from({ length: Math.max(1, n) }, () => ({ size: 0, files: [] as string[] }));
  for (const { f, size } of sized) {
    const lightest = shards.reduce((a, b) => (b.size < a.size ? b : a));
    lightest.files.push(f);
    lightest.size += size;
  }
  const entries = shards
    .filter((s) => s.files.length > 0)
    .map((s, i) => {
      const entry = join(dir, `quick-${i + 1}.test.mjs`);
      const lines = s.files
        .sort()
        .map((f) => `await import(${JSON.stringify(pathToFileURL(join(root, f)).href)});`);
      writeFileSync(
        entry,
        `// The quick tier, shard ${i + 1} (scripts/run-tests.ts quickShards)\n${lines.join('\n')}\n`,
      );
      return entry;
    });
  return { entries, dir };
}

const concurrency = Number(process.env['TEST_CONCURRENCY'] ?? '2');
// Every run shares processes for its quick files (the whole run when --quick, the matrix's lines too); the
// other tiers keep one process per file. The shards go last: they are short, and the long files start first.
const quickFiles = opts['one-process-per-file'] ? [] : selected.filter(isQuick);
const shared = quickFiles.length > 0 ? quickShards(quickFiles, concurrency) : null;
const perFile = shared ? selected.filter((f) => !isQuick(f)) : selected;
const result = spawnSync(
  process.execPath,
  [
    '--conditions=source',
    '--import',
    'tsx',
    '--test',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    ...(opts.tap ? ['--test-reporter=tap', `--test-reporter-destination=${opts.tap}`] : []),
    ...(opts.times
      ? [
          `--test-reporter=${join(root, 'scripts/file-times-reporter.mjs')}`,
          `--test-reporter-destination=${opts.times}`,
        ]
      : []),
    `--test-concurrency=${concurrency}`,
    // Per file and per test: generous, so that a loaded machine (load average 10-20) slows tests down
    // without failing them; a hung test still ends. The opt-in long timesvc scenarios need more.
    `--test-timeout=${process.env['TIMESVC_LONG_TESTS'] === '1' ? '900000' : '600000'}`,
    ...perFile,
    ...(shared ? shared.entries : []),
  ],
  {
    stdio: 'inherit',
    cwd: root,
    env: {
      ...process.env,
      NODE_ENV: 'test',
    },
  },
);
if (shared) rmSync(shared.dir, { recursive: true, force: true });
process.exit(result.status ?? 1);
