/** What scripts/test/app/docs-truth.test.ts and io/cli-help.test.ts look for (see the former's header). */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { repoRoot } from '@broadcast-ops/core/testing';

const SKIP_DIRS = new Set(['node_modules', 'dist', 'data', '.git', 'build', 'fixtures']);

export function walk(dir: string, keep: (file: string) => boolean, out: string[] = []): string[] {
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
export const FUTURE = [
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
export const OUTSIDE = [
  /\bspec \d\b/i,
  /\bPart [A-D] "/,
  /\/work\/shared\b/,
  /\.\.\/shared\//,
  /\bshared\/(?:spec|reference)\b/,
  /\breference\/[a-z-]+\.md\b/,
  /\b\d-[a-z]+(?:-[a-z]+)+\.md\b/, // the spec documents' file names: a digit, a dash, dashed words, .md
];

export function offenders(files: string[], patterns: RegExp[]): string[] {
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
