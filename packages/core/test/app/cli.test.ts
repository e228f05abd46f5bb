import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HELP_WIDTH, packageVersion, runCli, usage, type CliCommand } from '../../src/cli.ts';
import { repoRoot } from '../../src/testing/index.ts';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';

const commands: Record<string, CliCommand> = {
  serve: {
    summary: 'Start the service with a summary long enough to need wrapping in an eighty column terminal',
    options: {
      config: { type: 'string', short: 'c', description: 'configuration file (JSON or YAML)' },
      'a-very-long-option-name-indeed': { type: 'string', description: 'gets its own line' },
    },
    run: () => undefined,
  },
};

async function capture(fn: () => Promise<void>): Promise<string> {
  const chunks: string[] = [];
  const original = process.stdout.write.bind(process.stdout);
  Reflect.set(process.stdout, 'write', (chunk: string) => {
    chunks.push(chunk);
    return true;
  });
  try {
    await fn();
  } finally {
    Reflect.set(process.stdout, 'write', original);
  }
  return chunks.join('');
}

test('help fits 80 columns and names --version and --help', () => {
  const text = usage('svc', 'a service description that is also rather long so that it wraps once', commands);
  for (const line of text.split('\n')) assert.ok(line.length <= HELP_WIDTH, `too wide: "${line}"`);
  assert.equal(HELP_WIDTH, 80);
  assert.match(text, /--version/);
  assert.match(text, /-h, --help/);
  assert.match(text, /^ {6}--a-very-long-option-name-indeed <value>\n {30}gets its own line$/m);
  assert.match(text, /^ {6}-c, --config <value> +configuration file/m);
});

test('--version prints the version given, exit code untouched, before any command parsing', async () => {
  process.exitCode = undefined;
  const out = await capture(() => runCli('svc', 'd', commands, ['--version'], 'serve', { version: '1.2.3' }));
  assert.equal(out, 'svc 1.2.3\n');
  assert.equal(process.exitCode, undefined);
});

test('packageVersion finds the nearest package.json above a bin', () => {
  const bin = join(repoRoot, 'packages/timesvc/bin/timesvc.mjs');
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'packages/timesvc/package.json'), 'utf8')) as {
    version: string;
  };
  assert.equal(packageVersion(bin), pkg.version);
  assert.equal(packageVersion('/nonexistent/file'), undefined);
});
