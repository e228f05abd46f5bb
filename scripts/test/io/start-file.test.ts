/**
 * The start file (docs/at-rest.md "One start file"): scripts/bundle-start.mjs bundles a package's compiled
 * dist/main.js into dist/main.bundle.cjs, and dist/start.cjs (scripts/start-launcher.cjs) runs it with V8's
 * code cache of the last start. On a package made here, so each case is the one it names: each module's
 * import.meta.url is its own file's; the cache is written after a start, used by the next, refused when
 * it is not this bundle's and replaced; the bundle is strict code, ASCII, and its own CommonJS wrapper; a package required by name through createRequire is bundled; a dependency's zlib, TLS or HTTP/2 and any module's node:crypto load on first use, one file per Node.js version; a cache that cannot be written costs
 * nothing; the cache may live elsewhere (BROADCAST_OPS_CODE_CACHE). The services' own start files are run by every test that starts a service through its bin, and
 * npm-start.test.ts checks their caches.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import { test } from 'node:test';
import { STARTED_EVENT } from '@broadcast-ops/core';
import { repoRoot, tempDir } from '@broadcast-ops/core/testing';

const bundleStart = pathToFileURL(join(repoRoot, 'scripts/bundle-start.mjs')).href;

/** A package `name` in `pkg`'s node_modules whose index.js is `source`. */
function dependency(pkg: string, name: string, source: string): void {
  const dir = join(pkg, 'node_modules', name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, main: 'index.js' }));
  writeFileSync(join(dir, 'index.js'), source);
}

/** A package with a start: dist/main.js reads a file beside a module of its own through import.meta.url. */
function fixture(root: string, main: string): string {
  const pkg = join(root, 'packages', 'demo');
  mkdirSync(join(pkg, 'dist', 'lib'), { recursive: true });
  writeFileSync(
    join(pkg, 'package.json'),
    JSON.stringify({ name: 'demo', bin: { demo: './bin/demo.mjs' }, toolkit: { start: {} } }),
  );
  writeFileSync(join(pkg, 'dist', 'lib', 'asset.txt'), 'beside lib/value.js');
  writeFileSync(
    join(pkg, 'dist', 'lib', 'value.js'),
    "import { readFileSync } from 'node:fs';\n" +
      "export const value = () => readFileSync(new URL('./asset.txt', import.meta.url), 'utf8');\n",
  );
  writeFileSync(join(pkg, 'dist', 'main.js'), main);
  // A dependency that requires zlib when loaded and uses it later (as ws does for permessage-deflate).
  dependency(
    pkg,
    'lazy-dep',
    "const zlib = require('zlib');\n" +
      'exports.gunzip = (b) => zlib.gunzipSync(b).toString();\n' +
      'exports.level = () => zlib.constants.Z_BEST_COMPRESSION;\n',
  );
  return pkg;
}

const STARTS = [
  "import { value } from './lib/value.js';",
  'console.log(`value: ${value()}`);',
  // Text that names import.meta.url (punch writes such a banner for its agent bundle) stays text.
  "if ('new URL(import.meta.url)' !== ['new URL(import', 'meta', 'url)'].join('.')) throw new Error('text changed');",
  `process.emit(${JSON.stringify(STARTED_EVENT)});`,
].join('\n');

function bundle(pkg: string): { status: number | null; stderr: string } {
  const r = spawnSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const { bundleStart, startPackages } = await import(${JSON.stringify(bundleStart)});
       for (const p of startPackages(${JSON.stringify(join(pkg, '..'))})) await bundleStart(p);`,
    ],
    { cwd: repoRoot, encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } },
  );
  return { status: r.status, stderr: r.stderr };
}

/** Run the start file; `cache` is what the launcher said of the code cache (NODE_DEBUG). */
function start(
  pkg: string,
  env: NodeJS.ProcessEnv = {},
  cwd?: string,
): { status: number | null; stdout: string; stderr: string; cache: string[] } {
  const r = spawnSync(process.execPath, [join(pkg, 'dist', 'start.cjs')], {
    encoding: 'utf8',
    ...(cwd === undefined ? {} : { cwd }),
    env: { ...process.env, NODE_OPTIONS: '', NODE_DEBUG: 'broadcast-ops-start', ...env },
  });
  const cache = [...r.stderr.matchAll(/code cache (none|used|refused|written|not written)/g)].map(
    (m) => m[1] ?? '',
  );
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, cache };
}

const cacheFiles = (pkg: string): string[] => {
  try {
    return readdirSync(join(pkg, 'dist', 'v8-cache'));
  } catch {
    return [];
  }
};

test('the start file runs the bundle; each module keeps its own import.meta.url; other import.meta is refused', (t) => {
  const tmp = tempDir('start-file-');
  t.after(() => tmp.remove());
  const pkg = fixture(tmp.path, STARTS);
  const b = bundle(pkg);
  assert.equal(b.status, 0, b.stderr);
  assert.ok(readFileSync(join(pkg, 'dist', 'main.bundle.cjs'), 'utf8').length > 0);
  const r = start(pkg);
  assert.equal(r.status, 0);
  assert.equal(r.stdout, 'value: beside lib/value.js\n');

  // A dependency left to Node (qrcode is one) loaded with import(), from a process started elsewhere.
  const ext = join(pkg, 'node_modules', 'qrcode');
  mkdirSync(ext, { recursive: true });
  writeFileSync(join(ext, 'package.json'), JSON.stringify({ name: 'qrcode', main: 'index.js' }));
  writeFileSync(join(ext, 'index.js'), "exports.name = 'the external qrcode';\n");
  writeFileSync(
    join(pkg, 'dist', 'main.js'),
    "import('qrcode').then((m) => console.log(`loaded: ${m.default.name}`));\n",
  );
  assert.equal(bundle(pkg).status, 0);
  const e = start(pkg, {}, '/');
  assert.equal(e.stdout, 'loaded: the external qrcode\n', e.stderr);

  // A dependency's top-level require of zlib loads zlib on its first use, and then works as zlib.
  const lazy = tempDir('start-file-lazy-');
  t.after(() => lazy.remove());
  const uses = fixture(
    lazy.path,
    [
      "import { gunzip, level } from 'lazy-dep';",
      "const loaded = () => process.moduleLoadList.includes('NativeModule zlib');",
      'console.log(`before: ${loaded()}`);',
      'console.log(`level: ${level()}`);',
      'console.log(`after: ${loaded()}`);',
      `console.log(\`round trip: \${gunzip(Buffer.from('${gzipSync('ok').toString('base64')}', 'base64'))}\`);`,
    ].join('\n'),
  );
  assert.equal(bundle(uses).status, 0);
  const l = start(uses);
  assert.equal(l.stdout, 'before: false\nlevel: 9\nafter: true\nround trip: ok\n');

  // A package a module requires by name through createRequire (core's YAML parser) is in the bundle:
  // the start still finds it with the package gone from node_modules.
  const own = tempDir('start-file-require-');
  t.after(() => own.remove());
  const byName = fixture(
    own.path,
    "import { createRequire } from 'node:module';\n" +
      "console.log(`level: ${createRequire(import.meta.url)('lazy-dep').level()}`);\n",
  );
  assert.equal(bundle(byName).status, 0);
  rmSync(join(byName, 'node_modules', 'lazy-dep'), { recursive: true });
  const n = start(byName);
  assert.equal(n.stdout, 'level: 9\n', n.stderr);

  const other = tempDir('start-file-meta-');
  t.after(() => other.remove());
  const refused = fixture(other.path, 'console.log(import.meta.dirname);\n');
  const rb = bundle(refused);
  assert.notEqual(rb.status, 0);
  assert.match(rb.stderr, /\[empty-import-meta\]/);
});

test('node:crypto loads on its first use: named imports of ours, a dependency destructuring it, a local of the same name left alone', (t) => {
  const tmp = tempDir('start-file-crypto-');
  t.after(() => tmp.remove());
  const pkg = fixture(
    tmp.path,
    [
      "import { createHash as hash, randomBytes } from 'node:crypto';",
      "import { digest } from 'crypto-dep';",
      "const loaded = () => process.moduleLoadList.includes('NativeModule crypto');",
      'console.log(`before: ${loaded()}`);',
      // A parameter named like an import is the parameter, not the module's function.
      'function twice(randomBytes) { return randomBytes * 2; }',
      'console.log(`local: ${twice(21)} ${loaded()}`);',
      'console.log(`dependency: ${digest("ok")}`);',
      'console.log(`after: ${loaded()}`);',
      "console.log(`own: ${hash('sha256').update('ok').digest('hex').slice(0, 8)} ${randomBytes(4).length}`);",
    ].join('\n'),
  );
  // A dependency that destructures crypto when loaded, as ws does (its sender, server and socket).
  dependency(
    pkg,
    'crypto-dep',
    "const { createHash, randomBytes: rb } = require('crypto');\n" +
      "exports.digest = (s) => `${createHash('sha1').update(s).digest('hex').slice(0, 8)} ${rb(2).length}`;\n",
  );
  const b = bundle(pkg);
  assert.equal(b.status, 0, b.stderr);
  const r = start(pkg);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(
    r.stdout,
    'before: false\nlocal: 42 false\ndependency: 7a85f476 2\nafter: true\nown: 2689367b 4\n',
  );
});

test('the bundle runs as its modules were written: strict, its text as written, its own CommonJS wrapper', async (t) => {
  const tmp = tempDir('start-file-strict-');
  t.after(() => tmp.remove());
  const pkg = fixture(
    tmp.path,
    [
      // An ES module is strict: a write to a frozen object throws (in sloppy code it is ignored).
      'const frozen = Object.freeze({ a: 1 });',
      'let threw = false;',
      'try { frozen.a = 2; } catch { threw = true; }',
      'console.log(`strict: ${threw}`);',
      "console.log(`text: ${'caf\u00e9 \u2713'} café ✓`);",
    ].join('\n'),
  );
  assert.equal(bundle(pkg).status, 0);
  const text = readFileSync(join(pkg, 'dist', 'main.bundle.cjs'));
  // ASCII throughout (the launcher reads it as Latin-1), and its own wrapper on the first line.
  assert.equal(
    text.findIndex((b) => b > 0x7f),
    -1,
  );
  assert.match(
    text.toString('latin1'),
    /^\(function \(exports, require, module, __filename, __dirname\) \{ 'use strict';\n/,
  );
  const r = start(pkg);
  assert.equal(r.stdout, 'strict: true\ntext: café ✓ café ✓\n', r.stderr);

  // A file that is not ASCII is refused by the build's check, not read wrong by the launcher.
  const { assertAscii } = (await import(bundleStart)) as { assertAscii: (file: string) => void };
  const bad = join(tmp.path, 'not-ascii.cjs');
  writeFileSync(bad, "console.log('café');\n");
  assert.throws(() => assertAscii(bad), /byte 0xc3 at 16 is not ASCII/);
});

test('the code cache: written after a start, used by the next, refused and replaced when not this bundle’s, one per Node.js version', (t) => {
  const tmp = tempDir('start-cache-');
  t.after(() => tmp.remove());
  const pkg = fixture(tmp.path, STARTS);
  assert.equal(bundle(pkg).status, 0);

  const first = start(pkg);
  assert.equal(first.stdout, 'value: beside lib/value.js\n');
  assert.deepEqual(first.cache, ['none', 'written']);
  const [file, ...more] = cacheFiles(pkg);
  assert.ok(file !== undefined && more.length === 0, cacheFiles(pkg).join(', '));
  assert.match(file, new RegExp(`\\.${process.version}-${process.arch}\\.bin$`));

  assert.deepEqual(start(pkg).cache, ['used']);

  // Data V8 cannot take (another bundle's, a torn write): refused, the start goes on, and it is replaced.
  writeFileSync(join(pkg, 'dist', 'v8-cache', file), Buffer.alloc(4096, 7));
  const refused = start(pkg);
  assert.equal(refused.stdout, 'value: beside lib/value.js\n');
  assert.deepEqual(refused.cache, ['refused', 'written']);
  assert.deepEqual(start(pkg).cache, ['used']);

  // A rebuilt bundle is another cache file; the old one goes, the directory keeps one per version.
  const later = new Date(Date.now() + 5_000);
  utimesSync(join(pkg, 'dist', 'main.bundle.cjs'), later, later);
  assert.deepEqual(start(pkg).cache, ['none', 'written']);
  assert.equal(cacheFiles(pkg).length, 1);
  assert.notEqual(cacheFiles(pkg)[0], file);
  assert.deepEqual(start(pkg).cache, ['used']);

  // Elsewhere when the code directory is read-only (the systemd units name their state directory).
  const elsewhere = join(tmp.path, 'state', 'v8-cache');
  assert.deepEqual(start(pkg, { BROADCAST_OPS_CODE_CACHE: elsewhere }).cache, ['none', 'written']);
  assert.equal(readdirSync(elsewhere).length, 1);
  assert.deepEqual(start(pkg, { BROADCAST_OPS_CODE_CACHE: elsewhere }).cache, ['used']);
});

test('a cache that cannot be written, or a process that never starts, costs nothing but the cache', (t) => {
  const tmp = tempDir('start-nocache-');
  t.after(() => tmp.remove());
  const pkg = fixture(tmp.path, STARTS);
  assert.equal(bundle(pkg).status, 0);
  // A file where the cache directory would be (root ignores permissions, so not a read-only directory).
  writeFileSync(join(pkg, 'dist', 'v8-cache'), 'not a directory');
  const r = start(pkg);
  assert.equal(r.status, 0);
  assert.equal(r.stdout, 'value: beside lib/value.js\n');
  assert.deepEqual(r.cache, ['none', 'not written']);
  rmSync(join(pkg, 'dist', 'v8-cache'));

  // A run that ends before its service has started (a sub-command, a refused configuration) writes none.
  writeFileSync(join(pkg, 'dist', 'main.js'), "console.log('no start');\n");
  assert.equal(bundle(pkg).status, 0);
  const sub = start(pkg);
  assert.equal(sub.stdout, 'no start\n');
  assert.deepEqual(sub.cache, ['none']);
  assert.deepEqual(cacheFiles(pkg), []);
});
