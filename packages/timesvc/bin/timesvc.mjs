#!/usr/bin/env node
// Runs the compiled service (dist/, built by `npm run build`, which `npm ci` runs) on plain node.
// Under the `source` export condition (`node --conditions=source`) it runs src/ through tsx instead. The
// test runner gives the condition to the test processes only, so the services they start run dist/, which
// the runner rebuilds first (scripts/run-tests.ts).
if (import.meta.resolve('@broadcast-ops/core').endsWith('.ts')) {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/main.ts');
} else {
  // The start file: dist/main.js and what it imports in one file, run with V8's code cache of the last
  // start (the build writes it, docs/at-rest.md "One start file").
  const start = new URL('../dist/start.cjs', import.meta.url);
  const { existsSync } = await import('node:fs');
  if (!existsSync(start)) {
    process.stderr.write(`${start.pathname} is missing: run \`npm run build\` (or \`npm ci\`) first\n`);
    process.exit(1);
  }
  const { createRequire } = await import('node:module');
  createRequire(import.meta.url)(start.pathname);
}
