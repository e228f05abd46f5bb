#!/usr/bin/env node
'use strict';
/**
 * A service's start file (`packages/<service>/dist/start.cjs`, copied there by scripts/bundle-start.mjs):
 * runs the service's whole start from one CommonJS file, `main.bundle.cjs` beside it, compiled with V8's
 * code cache of an earlier start of the same file on the same Node.js (docs/at-rest.md "One start file").
 *
 * The cache is an optimisation only. It is kept in `v8-cache/` beside the bundle (or the directory
 * `BROADCAST_OPS_CODE_CACHE` names: the systemd units', whose code directory is read-only), one file per Node.js
 * version, named after the bundle's size and modification time (a rebuilt bundle is another name, and V8
 * itself refuses data from another V8 version, other flags or another source length). Without it, or when
 * V8 refuses it, the bundle is compiled from its text as any script; then, once the service has started
 * (core's runService emits `broadcast-ops:started`), the compiled code is written for the next start. A
 * directory that cannot be written (a read-only install) means no cache, nothing else.
 * `NODE_DEBUG=broadcast-ops-start` says on stderr which of these happened.
 */
const {
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} = require('node:fs');
const Module = require('node:module');
const { join } = require('node:path');
const { debuglog } = require('node:util');
const vm = require('node:vm');

const debug = debuglog('broadcast-ops-start');

const bundle = join(__dirname, 'main.bundle.cjs');
const cacheDir = process.env.BROADCAST_OPS_CODE_CACHE || join(__dirname, 'v8-cache');
const st = statSync(bundle);
const suffix = `.${process.version}-${process.arch}.bin`;
const cacheFile = join(cacheDir, `main.bundle-${st.size}-${Math.round(st.mtimeMs)}${suffix}`);

let cachedData;
try {
  cachedData = readFileSync(cacheFile);
} catch {
  cachedData = undefined;
}
// The bundle is ASCII and carries its own CommonJS wrapper (scripts/bundle-start.mjs): read as Latin-1,
// its text is one flat string copied once, as V8 compiles it.
const script = new vm.Script(readFileSync(bundle, 'latin1'), {
  filename: bundle,
  cachedData,
  importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
});

debug(
  'code cache %s: %s',
  cachedData === undefined ? 'none' : script.cachedDataRejected === true ? 'refused' : 'used',
  cacheFile,
);
if (cachedData === undefined || script.cachedDataRejected === true) {
  process.once('broadcast-ops:started', () => {
    try {
      const data = script.createCachedData();
      mkdirSync(cacheDir, { recursive: true });
      // This Node.js version's older files go: one file per version, whatever the number of rebuilds.
      for (const name of readdirSync(cacheDir))
        if (name.endsWith(suffix)) rmSync(join(cacheDir, name), { force: true });
      const partial = `${cacheFile}.${process.pid}.partial`;
      writeFileSync(partial, data);
      renameSync(partial, cacheFile);
      debug('code cache written: %s (%d bytes)', cacheFile, data.length);
    } catch (err) {
      // No cache: the next start compiles from the text, as this one did.
      debug('code cache not written: %s', err instanceof Error ? err.message : String(err));
    }
  });
}

const main = new Module(bundle, module);
main.filename = bundle;
main.paths = Module._nodeModulePaths(__dirname);
script
  .runInThisContext()
  .call(main.exports, main.exports, Module.createRequire(bundle), main, bundle, __dirname);
