import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { repoRoot, tempDir } from '@broadcast-ops/core/testing';
import {
  INSTALL_STAMP,
  PINNED,
  TREES_PER_VERSION,
  childEnv,
  installKey,
  pruneTrees,
  resolveTargets,
  syncTree,
} from '../../node-matrix.ts';

function write(root: string, rel: string, text: string): void {
  mkdirSync(dirname(join(root, rel)), { recursive: true });
  writeFileSync(join(root, rel), text);
}

test('the pinned builds are exactly the lines package.json engines supports, each at or above its floor', () => {
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
    engines: { node: string };
  };
  const floors = pkg.engines.node.split('||').map((r) => {
    const m = /^\s*\^(\d+)\.(\d+)\.(\d+)\s*$/.exec(r);
    assert.ok(m, `engines range "${r}" is not of the form ^x.y.z`);
    return m.slice(1).map(Number);
  });
  assert.deepEqual(Object.keys(PINNED).sort(), floors.map((f) => String(f[0])).sort());
  for (const floor of floors) {
    const pin = (PINNED[String(floor[0])] ?? '').split('.').map(Number);
    const cmp = pin.map((v, i) => v - (floor[i] ?? 0)).find((d) => d !== 0) ?? 0;
    assert.ok(cmp >= 0, `pin ${pin.join('.')} is below the engines floor ${floor.join('.')}`);
  }
});

test("version selection: the host's own line runs on the host, the others on their pins", () => {
  assert.deepEqual(resolveTargets(['20', '22', '24'], '22.1.0'), [
    { version: PINNED['20'], host: false },
    { version: '22.1.0', host: true },
    { version: PINNED['24'], host: false },
  ]);
  assert.deepEqual(resolveTargets(['host', 'v24', '23.11.1'], '20.20.2'), [
    { version: '20.20.2', host: true },
    { version: PINNED['24'], host: false },
    { version: '23.11.1', host: false },
  ]);
  assert.throws(() => resolveTargets(['19'], '20.20.2'), /unknown Node selection "19"/);
});

test("a child's environment: no parent npm settings, that Node first on PATH, node-gyp on its headers", () => {
  const env = childEnv(
    {
      PATH: '/usr/bin',
      HOME: '/root',
      npm_config_local_prefix: '/work/main',
      NPM_CONFIG_NODEDIR: '/usr',
      npm_execpath: '/x/npm-cli.js',
      INIT_CWD: '/work/main',
    },
    '/cache/node/v24.21.0',
  );
  assert.deepEqual(env, {
    PATH: '/cache/node/v24.21.0/bin:/usr/bin',
    HOME: '/root',
    npm_package_config_node_gyp_nodedir: '/cache/node/v24.21.0',
  });
  assert.deepEqual(childEnv({ PATH: '/usr/bin', npm_lifecycle_event: 'test' }, null), { PATH: '/usr/bin' });
});

test('install key: follows the Node version, lockfile, manifests and native sources, not other files', () => {
  const src = tempDir();
  try {
    const files = [
      'package-lock.json',
      'package.json',
      'packages/t/binding.gyp',
      'packages/t/native/a.c',
      'packages/t/src/x.ts',
    ];
    for (const f of files) write(src.path, f, `${f} v1`);
    const base = installKey('24.21.0', src.path, files);
    assert.equal(installKey('24.21.0', src.path, files), base);
    assert.notEqual(installKey('22.23.3', src.path, files), base);
    write(src.path, 'packages/t/src/x.ts', 'changed');
    assert.equal(installKey('24.21.0', src.path, files), base, 'a source file does not force npm ci');
    const manifest = (extra: object): void =>
      write(src.path, 'package.json', JSON.stringify({ name: 'r', dependencies: { a: '^1.0.0' }, ...extra }));
    manifest({ scripts: { test: 'x' } });
    const withManifest = installKey('24.21.0', src.path, files);
    manifest({ scripts: { test: 'y', 'bench:z': 'tsx z.ts' }, toolkit: { start: {} }, description: 'd' });
    assert.equal(
      installKey('24.21.0', src.path, files),
      withManifest,
      'scripts and tool settings keep the install',
    );
    for (const extra of [
      { scripts: { test: 'x', postinstall: 'p' } },
      { overrides: { b: '2' } },
      { dependencies: {} },
    ]) {
      manifest(extra);
      assert.notEqual(installKey('24.21.0', src.path, files), withManifest, JSON.stringify(extra));
    }
    write(src.path, 'package.json', 'package.json v1');
    for (const f of files.slice(0, 4)) {
      const before = readFileSync(join(src.path, f), 'utf8');
      write(src.path, f, 'changed');
      assert.notEqual(installKey('24.21.0', src.path, files), base, f);
      write(src.path, f, before);
    }
  } finally {
    src.remove();
  }
});

test('tree sync keeps the install (node_modules, build/) and replaces every other file', () => {
  const src = tempDir();
  const tree = tempDir();
  try {
    write(src.path, 'README.md', 'new readme');
    write(src.path, 'packages/a/src/new.ts', 'new');
    for (const f of [
      'node_modules/x/i.js',
      'packages/a/node_modules/y/i.js',
      'packages/a/build/Release/a.node',
    ])
      write(tree.path, f, 'installed');
    for (const f of ['README.md', 'stale.txt', 'packages/a/src/old.ts', 'data/logs/a.log'])
      write(tree.path, f, 'old');
    syncTree(src.path, tree.path, ['README.md', 'packages/a/src/new.ts']);
    for (const f of [
      'node_modules/x/i.js',
      'packages/a/node_modules/y/i.js',
      'packages/a/build/Release/a.node',
    ])
      assert.equal(readFileSync(join(tree.path, f), 'utf8'), 'installed', f);
    for (const f of ['stale.txt', 'packages/a/src/old.ts', 'data'])
      assert.ok(!existsSync(join(tree.path, f)), f);
    assert.equal(readFileSync(join(tree.path, 'README.md'), 'utf8'), 'new readme');
    assert.equal(readFileSync(join(tree.path, 'packages/a/src/new.ts'), 'utf8'), 'new');
  } finally {
    src.remove();
    tree.remove();
  }
});

test('old trees of a version are pruned least recently used first; the current, locked and other versions stay', () => {
  const dir = tempDir();
  try {
    const ages: [string, number][] = [
      ['v24.21.0-aaaa', 1],
      ['v24.21.0-bbbb', 50],
      ['v24.21.0-cccc', 100],
      ['v24.21.0-dddd', 200],
      ['v22.23.3-eeee', 300],
    ];
    for (const [name, ageS] of ages) {
      write(dir.path, join(name, INSTALL_STAMP), name);
      const t = new Date(Date.now() - ageS * 1000);
      utimesSync(join(dir.path, name, INSTALL_STAMP), t, t);
    }
    mkdirSync(join(dir.path, 'v24.21.0-dddd.lock')); // in use by another run
    pruneTrees(dir.path, '24.21.0', join(dir.path, 'v24.21.0-cccc'));
    assert.equal(TREES_PER_VERSION, 2);
    // Kept: the current tree (cccc), the most recently used other one (aaaa), the locked one, the other version.
    assert.deepEqual(readdirSync(dir.path).sort(), [
      'v22.23.3-eeee',
      'v24.21.0-aaaa',
      'v24.21.0-cccc',
      'v24.21.0-dddd',
      'v24.21.0-dddd.lock',
    ]);
  } finally {
    dir.remove();
  }
});
