/**
 * Test tiers, chosen by folder (docs/ARCHITECTURE.md "Tests mirror the layers"): every *.test.ts sits in
 * packages/<pkg>/test/<tier>/ or scripts/test/<tier>/.
 *
 * - protocol/, domain/, app/: the quick tier (`npm run test:quick`): ManualClock, no sockets, no child
 *   processes, no browser, no system tool;
 * - io/: integration: real sockets on 127.0.0.1:0, processes, files;
 * - interop/: heavy: real third-party tools, chromium, network namespaces, the whole stack started again and
 *   again, the task-guide walks. They prove our protocols against other implementations, which does not
 *   change with the Node line, so the other lines' runs leave them out (`--portable`, scripts/test-portable.ts). Tests that run the
 *   compiled files (`dist/`, as installed) are here too: the other lines' trees (scripts/node-matrix.ts) keep
 *   no build output.
 *
 * NOT_QUICK is a check, not a selector: scripts/test/app/test-tiers.test.ts fails when a quick-tier file or a
 * test helper it imports matches it.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

export const QUICK_TIERS = ['protocol', 'domain', 'app'] as const;
export const TIERS = [...QUICK_TIERS, 'io', 'interop'] as const;
export type Tier = (typeof TIERS)[number];

/** Every *.test.ts under packages/<pkg>/test and scripts/test (fixtures left out), repo-relative, sorted. */
export function collectTests(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    let entries: string[];
    try {
      entries = readdirSync(dir);
    } catch {
      return;
    }
    for (const name of entries) {
      if (name === 'node_modules' || name === 'fixtures') continue;
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.test.ts')) out.push(relative(root, path));
    }
  };
  for (const pkg of readdirSync(join(root, 'packages'))) walk(join(root, 'packages', pkg, 'test'));
  walk(join(root, 'scripts', 'test'));
  return out.sort();
}

/** The tier folder a test file sits in (`undefined` when it sits outside one); path repo-relative. */
export function tierOf(file: string): Tier | undefined {
  const m = /^(?:packages\/[^/]+|scripts)\/test\/([^/]+)\//.exec(file.split('\\').join('/'));
  const tier = m?.[1];
  return TIERS.find((t) => t === tier);
}

export const isQuick = (file: string): boolean =>
  (QUICK_TIERS as readonly string[]).includes(tierOf(file) ?? '');

/** The package (or "scripts") a test file belongs to. */
export const ownerOf = (file: string): string => /^packages\/([^/]+)\//.exec(file)?.[1] ?? 'scripts';

/**
 * Code without its comments and the contents of its string literals, so that a socket call quoted as data (a
 * lint snippet, a log line) does not count; a template literal's `${…}` parts are dropped with it.
 */
export function codeOf(text: string): string {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const c = text[i] ?? '';
    const next = text[i + 1] ?? '';
    if (c === '/' && next === '/') {
      const end = text.indexOf('\n', i);
      i = end === -1 ? text.length : end;
    } else if (c === '/' && next === '*') {
      const end = text.indexOf('*/', i + 2);
      i = end === -1 ? text.length : end + 2;
    } else if (c === "'" || c === '"' || c === '`') {
      let j = i + 1;
      while (j < text.length && text[j] !== c && (c === '`' || text[j] !== '\n'))
        j += text[j] === '\\' ? 2 : 1;
      out += c + c;
      i = j + 1;
    } else {
      out += c;
      i += 1;
    }
  }
  return out;
}

/** The text of a test file and of every test helper it imports (relative imports under test/, followed). */
export function sourcesOf(root: string, file: string, seen = new Set<string>()): string {
  const abs = resolve(root, file);
  if (seen.has(abs)) return '';
  seen.add(abs);
  let text: string;
  try {
    text = readFileSync(abs, 'utf8');
  } catch {
    return '';
  }
  let all = text;
  // Import statements only (a line starting with import, export or the `}` of a multi-line import): an
  // import quoted in a string (a lint snippet) is data.
  for (const m of text.matchAll(/^\s*(?:import|export|\})[^'"\n]*\bfrom\s+'(\.{1,2}\/[^']+)'/gm)) {
    const target = resolve(dirname(abs), m[1] ?? '');
    // Only helpers under a test directory: the code under test is what the test is about, not its needs.
    if (/\/test\//.test(relative(root, target))) all += '\n' + sourcesOf(root, target, seen);
  }
  return all;
}

/**
 * A hook at a quick file's top level (prettier puts a top-level call at the start of a line): the quick tier
 * runs many files in one process (scripts/run-tests.ts quickShards), and there a top-level `before`, `after`,
 * `beforeEach` or `afterEach` belongs to the whole process, not to its file: an `after` that closes the
 * file's service can run while another of its tests still uses it. A quick file keeps its hooks in a
 * `describe` (or a test's `t.after`). scripts/test/app/test-tiers.test.ts fails on one.
 */
export const TOP_LEVEL_HOOK = /^(?:before|after|beforeEach|afterEach)\(/m;

/**
 * Not a quick test: uses a system tool, starts a process, a browser or a network namespace, or opens a
 * socket (a server on loopback, a client connecting to one, the test helpers that start a whole service).
 */
export const NOT_QUICK = new RegExp(
  [
    String.raw`requireTool\(|startProcess\(|spawn(Sync)?\(|execFile|fork\(|playwright|unshare|\.browser\.`,
    String.raw`\.listen\(|createServer|createSocket|new WebSocket|\bconnect\(|startTest\w*\(`,
    String.raw`start(Monitor|Bridge|Rig|Timesvc|Broker|Stack)\w*\(`,
  ].join('|'),
);
