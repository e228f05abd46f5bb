/**
 * The build's last step (scripts/build.mjs): each service's start from one file. For every package whose
 * package.json declares `toolkit.start` and a `bin`, esbuild bundles its compiled `dist/main.js` with what
 * it imports into `dist/main.bundle.cjs` (CommonJS, so V8's code cache applies to it on Node 20 as on 22 and
 * 24), with `dist/main.bundle.cjs.map` beside it, and copies scripts/start-launcher.cjs to `dist/start.cjs`,
 * which runs it. Why, and what it saves: docs/at-rest.md "One start file".
 *
 * - Each module's `import.meta.url` becomes its own compiled file's URL (dist/ and node_modules stay where
 *   they are), so a path built from it (pages, package.json, the native addon) names the same file as
 *   from dist/main.js.
 * - Left to Node's own loader (external): native addons (`*.node`; better-sqlite3's is named by its path,
 *   punch's io/sqlite-driver.ts), and the packages a service loads only when it needs them, which would
 *   otherwise be read and compiled at every start (core's schema compilers, the Redis client, the QR
 *   encoder, fastify's `inject`, esbuild itself). A package a
 *   module requires by name with its own `createRequire` (core's YAML parser, prom-client's files) is
 *   bundled, and still runs only when that code runs.
 * - ASCII text in its own CommonJS wrapper, so the launcher reads it as Latin-1 and compiles it as read.
 * - Whitespace and syntax are minified, names are not: a stack trace still names its functions, and
 *   `node --enable-source-maps` maps it back to the compiled files through the map (at-rest.md says why
 *   minifying at all: V8 reads a smaller cache faster).
 */
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));

/** Loaded by Node when used, not read into the start file (see above). */
export const EXTERNAL = [
  'ioredis',
  'fast-json-stringify',
  '@fastify/ajv-compiler',
  'ajv',
  'ajv-formats',
  'light-my-request',
  'qrcode',
  'esbuild',
  '*.node',
];

/** The packages under `packagesDir` whose start is bundled: `toolkit.start` and a `bin`, built. */
export function startPackages(packagesDir) {
  const out = [];
  for (const name of readdirSync(packagesDir).sort()) {
    const file = join(packagesDir, name, 'package.json');
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, 'utf8'));
    if (pkg.toolkit?.start && pkg.bin && existsSync(join(packagesDir, name, 'dist', 'main.js')))
      out.push(join(packagesDir, name));
  }
  return out;
}

/**
 * Node's TLS, HTTP/2 and zlib modules, which fastify (`lib/server.js`: `https`, `http2`) and ws
 * (`https`, `tls`, and `zlib` for permessage-deflate, which the services turn off) require when loaded, for
 * servers and clients that a service configured without TLS, HTTP/2 or compression never makes. In
 * node_modules, a top-level `const x = require('<one of them>')` becomes a stand-in that requires the module
 * on its first property read (calls, classes and constants are properties), so it costs nothing until used.
 */
const LAZY_BUILTIN = /^const (\w+) = require\((['"])(?:node:)?(https|http2|tls|zlib)\2\);?$/gm;

/**
 * Builtins named by their functions and classes and read on use: `import { a, b as c } from 'node:crypto'`
 * in a module of ours, `const { a, b: c } = require('crypto')` in node_modules (ws's sender, server and
 * socket destructure crypto when loaded). The statement becomes one stand-in (`__lazyNamed`, in the footer)
 * and every free use of a name a read of it where it is used (`c(...)` is `__lazy_crypto0.b(...)`: esbuild's
 * `define` on that module, which leaves a local of the same name alone), so the builtin loads with the
 * first call: a service that calls none before it listens starts without it (docs/at-rest.md "One start
 * file"). After that call each name is a plain property of the stand-in, as it was of the module.
 */
const ON_USE = ['crypto', 'dns/promises', 'tty'];
const ids = ON_USE.map((m) => m.replace('/', '\\/')).join('|');
const NAMED_IMPORT = new RegExp(`^import \\{([^}]*)\\} from (['"])node:(${ids})\\2;?$`, 'gm');
const NAMED_REQUIRE = new RegExp(
  `^(?:const|var|let) \\{([^}]*)\\} = require\\((['"])(?:node:)?(${ids})\\2\\);?$`,
  'gm',
);

/** `a, b as c` (an import) or `a, b: c` (a destructuring), as [local, exported] pairs; undefined if neither. */
function namedBindings(list, separator) {
  const out = [];
  for (const part of list
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean)) {
    const m = part.match(separator === 'as' ? /^(\w+)(?:\s+as\s+(\w+))?$/ : /^(\w+)(?:\s*:\s*(\w+))?$/);
    if (!m) return undefined;
    out.push([m[2] ?? m[1], m[1]]);
  }
  return out.length > 0 ? out : undefined;
}

/** The module's text with the builtins of ON_USE read on use, or undefined when it names none of them. */
async function builtinsOnUse(text, file) {
  const define = {};
  let body = text;
  let n = 0;
  for (const m of [...text.matchAll(NAMED_IMPORT), ...text.matchAll(NAMED_REQUIRE)]) {
    const pairs = namedBindings(m[1], m[0].startsWith('import') ? 'as' : ':');
    if (!pairs) continue;
    const holder = `__lazy_${m[3].replace('/', '_')}${n++}`;
    for (const [local, name] of pairs) define[local] = `${holder}.${name}`;
    const names = JSON.stringify([...new Set(pairs.map(([, name]) => name))]);
    body = body.replace(m[0], `const ${holder} = __lazyNamed('node:${m[3]}', ${names});`);
  }
  if (n === 0) return undefined;
  const { code } = await esbuild.transform(body, { loader: 'js', sourcefile: file, define });
  return code;
}

/** `createRequire(import.meta.url)('<package>')`, a package by name (not a relative path). */
const CREATE_REQUIRE_BY_NAME = /\bcreateRequire\(import\.meta\.url\)\((['"])([@a-z][\w./@-]*)\1\)/g;

/**
 * Each bundled module as it goes into the bundle: its `import.meta.url` (as code: esbuild's `define`, so
 * text such as a banner written for another bundle is left alone) the URL of the file it came from; the
 * builtins above, in node_modules, required on first use. Any other `import.meta` would be empty in
 * CommonJS: esbuild's warning for it is an error in this build (`logOverride` below).
 */
function sourcePlugin(outfile) {
  return {
    name: 'start-file-sources',
    setup(build) {
      build.onLoad({ filter: /\.[mc]?js$/ }, async (args) => {
        const text = readFileSync(args.path, 'utf8');
        let contents = text;
        if (/[/\\]node_modules[/\\]/.test(args.path))
          contents = contents.replace(LAZY_BUILTIN, "const $1 = __lazyBuiltin('node:$3');");
        contents = (await builtinsOnUse(contents, args.path)) ?? contents;
        // A package a module loads on use through its own require (core's YAML parser: config.ts), by
        // name: bundled like an import, still loaded only when that code runs (esbuild's lazy CommonJS
        // wrapper); an external one stays Node's to load.
        contents = contents.replace(CREATE_REQUIRE_BY_NAME, 'require($1$2$1)');
        if (contents.includes('import.meta.url')) {
          const rel = JSON.stringify(relative(dirname(outfile), args.path));
          const { code } = await esbuild.transform(contents, {
            loader: 'js',
            sourcefile: args.path,
            define: { 'import.meta.url': '__importMetaUrl' },
          });
          contents = `const __importMetaUrl = __moduleUrl(${rel});\n${code}`;
        }
        return contents === text ? undefined : { contents, loader: 'js' };
      });
    },
  };
}

/**
 * The launcher reads the bundle as Latin-1 (scripts/start-launcher.cjs): a one-byte string copied once,
 * where UTF-8 decoding costs a second copy (docs/at-rest.md "One start file"). Both read ASCII alike, and
 * esbuild writes ASCII (`charset: 'ascii'`); a byte above 0x7f would be read wrong, so it fails the build.
 */
export function assertAscii(file) {
  const bytes = readFileSync(file);
  const at = bytes.findIndex((b) => b > 0x7f);
  if (at >= 0) throw new Error(`${file}: byte 0x${bytes[at].toString(16)} at ${at} is not ASCII`);
}

/**
 * The bundle is its own CommonJS wrapper (`Module.wrap`'s): the banner opens it, and the footer closes it.
 * The banner's `"use strict"` keeps the bundled ES modules strict, as they are when Node loads them (esbuild
 * writes CommonJS without one unless told, here by tsconfig's `strict`, and then as the file's first
 * statement, which a banner before it would turn into an expression; docs/at-rest.md "One start file"). The
 * helpers each module's code may call are function declarations in the footer, in scope (hoisted) from the
 * first line: `__moduleUrl` (the `import.meta.url` of the file a module came from), `__lazyBuiltin`
 * (a builtin loaded on its first property read) and `__lazyNamed` (a builtin's named members, the builtin
 * loaded by the first read of any of them, each a plain property after it).
 */
const BANNER = "(function (exports, require, module, __filename, __dirname) { 'use strict';";
const FOOTER = [
  "function __moduleUrl(rel) { return require('node:url').pathToFileURL(require('node:path').join(__dirname, rel)).href; }",
  'function __lazyBuiltin(id) { let m; const load = () => (m ??= require(id));',
  '  return new Proxy({}, { get: (_, k) => load()[k], has: (_, k) => k in load(),',
  '    ownKeys: () => Reflect.ownKeys(load()),',
  '    getOwnPropertyDescriptor: (_, k) => ({ ...Reflect.getOwnPropertyDescriptor(load(), k), configurable: true }) }); }',
  'function __lazyNamed(id, names) { const o = {}; const load = () => { const m = require(id);',
  '    for (const k of names) Object.defineProperty(o, k, { value: m[k], enumerable: true }); };',
  '  for (const k of names) Object.defineProperty(o, k, { get: () => (load(), o[k]), configurable: true, enumerable: true });',
  '  return o; }',
  '});',
].join('\n');

/**
 * What a bundle was made from: every input file (sizes and modification times: a dependency updated by
 * `npm ci` is one), this file, the launcher and esbuild's version.
 */
function inputsKey(inputs) {
  const hash = createHash('sha256').update(esbuild.version).update(JSON.stringify(EXTERNAL));
  for (const f of [fileURLToPath(import.meta.url), join(here, 'start-launcher.cjs'), ...inputs]) {
    try {
      const st = statSync(f);
      hash.update(`${f}\0${st.size}\0${st.mtimeMs}\n`);
    } catch {
      hash.update(`${f}\0gone\n`);
    }
  }
  return hash.digest('hex');
}

/**
 * Bundle one package's start unless its bundle is up to date with its inputs (`dist/.bundle-key`); returns
 * the bundle's size in bytes, or undefined when nothing had to be done.
 */
export async function bundleStart(pkgDir) {
  const dist = join(pkgDir, 'dist');
  const outfile = join(dist, 'main.bundle.cjs');
  const stamp = join(dist, '.bundle-key');
  if (existsSync(stamp) && existsSync(outfile) && existsSync(join(dist, 'start.cjs'))) {
    const last = JSON.parse(readFileSync(stamp, 'utf8'));
    if (last.key === inputsKey(last.inputs)) return undefined;
  }
  rmSync(join(dist, 'v8-cache'), { recursive: true, force: true });
  const result = await esbuild.build({
    entryPoints: [join(dist, 'main.js')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    // The oldest Node.js the toolkit runs on (README): one dist/ serves 20, 22 and 24.
    target: 'node20',
    external: EXTERNAL,
    minifyWhitespace: true,
    minifySyntax: true,
    sourcemap: 'linked',
    // The bundle is its own CommonJS wrapper (BANNER, FOOTER): the launcher compiles the file's text as
    // read, one flat string, where `Module.wrap` would make V8 copy it (1.5 MB) into a new one first.
    banner: { js: BANNER },
    footer: { js: FOOTER },
    // Non-ASCII characters escaped, so the launcher may read the file as Latin-1 (checked below).
    charset: 'ascii',
    plugins: [sourcePlugin(outfile)],
    // No `import()` left to Node's ES module loader, which a script run by vm.Script resolves from
    // elsewhere: an external one becomes a `require` (every external is CommonJS).
    supported: { 'dynamic-import': false },
    logOverride: { 'empty-import-meta': 'error' },
    logLevel: 'error',
    metafile: true,
  });
  assertAscii(outfile);
  copyFileSync(join(here, 'start-launcher.cjs'), join(dist, 'start.cjs'));
  const inputs = Object.keys(result.metafile.inputs).map((f) => resolve(f));
  writeFileSync(stamp, JSON.stringify({ key: inputsKey(inputs), inputs }));
  return statSync(outfile).size;
}
