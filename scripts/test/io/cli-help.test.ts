/** Every CLI's help and version (the docs-truth rules of scripts/test/app/docs-truth.test.ts, on the binaries). */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '@broadcast-ops/core/testing';
import { FUTURE } from '../docs-patterns.ts';

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
