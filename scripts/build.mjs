#!/usr/bin/env node
/**
 * `npm run build` (also run by `npm ci` through the `prepare` script): compiles every package's src/ to its
 * dist/ (packages/<pkg>/tsconfig.build.json) and the `npm start` launcher to dist/ at the root
 * (scripts/tsconfig.build.json), so the services run on plain `node` without a TypeScript loader.
 *
 * Emit only: type checking is `npm run typecheck` (the whole tree, tests included). Relative `.ts` imports are
 * rewritten to `.js` (rewriteRelativeImportExtensions); dist/ mirrors src/ one to one, so a path built from
 * import.meta.url (`../package.json`, `../../public/`) means the same file from either tree. Each dist/ is
 * emptied first, so a source file deleted or renamed leaves nothing stale behind. A new package is picked up
 * when it has a tsconfig.build.json; a new source file when it is under its package's src/.
 * A project whose inputs (file list, sizes, modification times, its tsconfig chain, the compiler version)
 * are those of its last build is skipped, so `npm start` (which builds first) costs nothing when up to date.
 *
 * Plain JavaScript on purpose: it must run before anything is compiled.
 */
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { bundleStart, startPackages } from './bundle-start.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const projects = [
  ...readdirSync(join(root, 'packages'))
    .sort()
    .map((p) => join(root, 'packages', p, 'tsconfig.build.json'))
    .filter((f) => existsSync(f)),
  join(root, 'scripts', 'tsconfig.build.json'),
];

/**
 * Files under src/ that are not TypeScript (a page's .js, .css, .html served from beside its module) are copied
 * to dist/ at the same relative path, so `new URL('./console/', import.meta.url)` finds them from either tree.
 */
function assetsOf(dir) {
  if (!dir || !existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && !e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath ?? e.path, e.name));
}

const host = ts.createCompilerHost({});
const format = {
  getCanonicalFileName: (f) => f,
  getCurrentDirectory: () => root,
  getNewLine: () => '\n',
};
let failed = false;
const started = Date.now();
for (const file of projects) {
  const config = ts.getParsedCommandLineOfConfigFile(
    file,
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.formatDiagnostic(d, format));
      },
    },
  );
  if (!config) throw new Error(`build: cannot read ${file}`);
  const outDir = config.options.outDir;
  if (!outDir) throw new Error(`build: ${file} has no outDir`);
  const stamp = join(outDir, '.build-key');
  const rootDir = config.options.rootDir;
  const assets = outDir !== dirname(file) ? assetsOf(rootDir) : [];
  const key = createHash('sha256')
    .update(ts.version)
    .update(JSON.stringify(config.options))
    .update(
      [...config.fileNames, ...assets]
        .map((f) => {
          const st = statSync(f);
          return `${f}\0${st.size}\0${st.mtimeMs}`;
        })
        .sort()
        .join('\n'),
    )
    .digest('hex');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === key) continue;
  // Only the compiler's own output directory is emptied, never a source directory.
  if (outDir !== dirname(file)) rmSync(outDir, { recursive: true, force: true });
  const program = ts.createProgram({ rootNames: config.fileNames, options: config.options, host });
  const result = program.emit();
  for (const a of assets) {
    const target = join(outDir, relative(rootDir, a));
    mkdirSync(dirname(target), { recursive: true });
    copyFileSync(a, target);
  }
  const diagnostics = [
    ...config.errors,
    ...program.getOptionsDiagnostics(),
    ...program.getSyntacticDiagnostics(),
    ...result.diagnostics,
  ];
  if (diagnostics.length > 0) {
    failed = true;
    process.stderr.write(ts.formatDiagnosticsWithColorAndContext(diagnostics, format));
  } else {
    writeFileSync(stamp, key);
  }
  if (process.env.BUILD_VERBOSE)
    console.log(
      `build: ${relative(root, file)}: ${config.fileNames.length} files -> ${relative(root, outDir)}`,
    );
}
if (failed) {
  console.error('build: failed (see above)');
  process.exit(1);
}
// Each service's start file (bundle-start.mjs), again when any of its inputs changed.
for (const pkg of startPackages(join(root, 'packages'))) {
  const bytes = await bundleStart(pkg);
  if (bytes !== undefined && process.env.BUILD_VERBOSE)
    console.log(`build: ${relative(root, pkg)}/dist/main.bundle.cjs: ${bytes} bytes`);
}
if (process.env.BUILD_VERBOSE)
  console.log(`build: ${projects.length} projects in ${Date.now() - started} ms`);
