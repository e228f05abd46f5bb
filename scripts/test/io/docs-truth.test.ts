/**
 * Docs that match the code:
 * - no document, config comment or CLI help calls something future work by pointing at an issue ("next issue",
 *   "later issues", "NTS later", "and later NTS/PTP"): what is built is described, what is not is named as a
 *   known limit in the service's README;
 * - no source file cites a document outside the repository (a numbered spec, its parts, the shared spec and
 *   reference folders, paths of the machine the code was written on): comments point to the repository's own
 *   docs, which carry the facts.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '@broadcast-ops/core/testing';

const SKIP_DIRS = new Set(['node_modules', 'dist', 'data', '.git', 'build', 'fixtures']);

function walk(dir: string, keep: (file: string) => boolean, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (SKIP_DIRS.has(name)) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, keep, out);
    else if (keep(path)) out.push(path);
  }
  return out;
}

const FEATURES = String.raw`(?:NTS|NTS-KE|PTP|GPSDO|Redis|WebSocket|signalling|Ember\+|TSL(?: UMD)?|Companion|outputs?|dashboard|console|adapter|pages)`;
/** Phrases that call a feature future work by pointing at an issue. */
const FUTURE = [
  /\bnext issue\b/i,
  /\b(?:a |the )?later issues?\b/i,
  /\bfuture issues?\b/i,
  /\bin the [a-z-]+ issue\b/i,
  /\buntil the (?:[A-Za-z+-]+ )?issue\b/i,
  new RegExp(String.raw`\b${FEATURES}(?:,? (?:and|or) ${FEATURES})* later\b`, 'i'),
  new RegExp(String.raw`\band later ${FEATURES}\b`, 'i'),
  new RegExp(String.raw`\b${FEATURES} in later\b`, 'i'),
];

/** Citations of documents that are not in the repository. */
const OUTSIDE = [
  /\bspec \d\b/i,
  /\bPart [A-D] "/,
  /\/work\/shared\b/,
  /\.\.\/shared\//,
  /\bshared\/(?:spec|reference)\b/,
  /\breference\/[a-z-]+\.md\b/,
  /\b\d-[a-z]+(?:-[a-z]+)+\.md\b/, // the spec documents' file names: a digit, a dash, dashed words, .md
];

function offenders(files: string[], patterns: RegExp[]): string[] {
  const found: string[] = [];
  for (const file of files) {
    const lines = readFileSync(file, 'utf8').split('\n');
    lines.forEach((line, i) => {
      for (const p of patterns) {
        if (p.test(line)) found.push(`${relative(repoRoot, file)}:${i + 1}: ${line.trim()}`);
      }
    });
  }
  return found;
}

test('no doc or config comment calls a feature future work by pointing at an issue', () => {
  const docs = walk(repoRoot, (f) => /\.(md|ya?ml)$/.test(f) || /\.demo\.json$/.test(f));
  assert.ok(docs.some((f) => f.endsWith('README.md')));
  assert.deepEqual(offenders(docs, FUTURE), []);
});

test('every CLI: help fits 80 columns and calls nothing future work; --version prints the package version', async () => {
  const bins: { name: string; bin: string; version: string }[] = [];
  for (const dir of readdirSync(join(repoRoot, 'packages'))) {
    const pkgFile = join(repoRoot, 'packages', dir, 'package.json');
    if (!existsSync(pkgFile)) continue;
    const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as {
      version: string;
      bin?: Record<string, string>;
    };
    for (const [name, bin] of Object.entries(pkg.bin ?? {}))
      bins.push({ name, bin: join(repoRoot, 'packages', dir, bin), version: pkg.version });
  }
  assert.equal(bins.length, 5);
  await Promise.all(
    bins.map(async ({ name, bin, version }) => {
      const help = await run(bin, ['--help']);
      assert.equal(help.code, 0, `${name} --help: ${help.stderr}`);
      assert.deepEqual(
        FUTURE.filter((p) => p.test(help.stdout)),
        [],
        `${name} --help:\n${help.stdout}`,
      );
      for (const line of help.stdout.split('\n')) assert.ok(line.length <= 80, `${name} --help: "${line}"`);
      const v = await run(bin, ['--version']);
      assert.equal(v.code, 0, `${name} --version: ${v.stderr}`);
      assert.equal(v.stdout, `${name} ${version}\n`);
    }),
  );
});

function run(bin: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

test('no source file cites a document outside the repository', () => {
  const sources = walk(repoRoot, (f) => /\.(ts|mjs|js|c|h|sh|css|html)$/.test(f)).filter(
    (f) => !relative(repoRoot, f).startsWith('scripts/test/io/docs-truth.test.ts'),
  );
  assert.ok(sources.length > 100);
  assert.deepEqual(offenders(sources, OUTSIDE), []);
});

test('the patterns catch what they are meant to catch (and leave ordinary prose alone)', () => {
  for (const line of [
    'WebSocket signalling (next issue)',
    'NTS, PTP, GPSDO in later issues',
    'with a clock manager (GPSDO, NTS, PTP later)',
    'an NTPv4 (and later NTS/PTP) time server',
    'HTTP health now; WebSocket and the pages in the outputs issue',
  ])
    assert.ok(
      FUTURE.some((p) => p.test(line)),
      line,
    );
  for (const line of ['a later restart reads the file', 'the next packet', 'retry later'])
    assert.ok(!FUTURE.some((p) => p.test(line)), line);
  for (const line of [
    // Built from parts, so that this file does not itself cite what the check forbids.
    [' * Configuration (spec', '2 Part B "Configuration file")'].join(' '),
    ['// see ../shared', 'reference', 'time-service.md'].join('/'),
    ['// facts from 3', 'time-service.md'].join('-'),
  ])
    assert.ok(
      OUTSIDE.some((p) => p.test(line)),
      line,
    );
  assert.ok(!OUTSIDE.some((p) => p.test('// RFC 5905 §7.3; README "NTP server"')));
});
