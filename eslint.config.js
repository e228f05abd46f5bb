// One flat config for the whole repository: type-checked typescript-eslint rules, Prettier owns formatting.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';
import globals from 'globals';

// ---- Rules the build enforces: docs/ARCHITECTURE.md "Rules the build enforces" says what each is for. ----
const SERVICES = ['punch', 'telemetry-bridge', 'playout-monitor', 'timesvc', 'status'];
// Libraries with no service layers: the simulators (tests and demos) and the bridge's client SDK.
const PACKAGES = ['core', 'simulators', 'bridge-client', ...SERVICES];
const LEVEL = 'error';
const DOC = 'docs/ARCHITECTURE.md "Rules the build enforces"';

// Modules that reach the network, the file system, other processes, threads or timers: io/ and main.ts only.
const NODE_IO = [
  'dgram',
  'fs',
  'fs/promises',
  'http',
  'https',
  'http2',
  'tls',
  'child_process',
  'worker_threads',
  'cluster',
  'timers',
  'timers/promises',
  'perf_hooks',
].flatMap((m) => [m, `node:${m}`]);
const IO_PACKAGES = ['ws', 'fastify', 'pino'];

/** 1. Import direction: what a file `depth` folders below src/ in `layer` (protocol or domain) may not import. */
function layerImports(layer, depth) {
  const up = '(\\.\\./)'.repeat(depth);
  const lower = layer === 'protocol' ? ['domain', 'io'] : ['io'];
  return [
    LEVEL,
    {
      paths: [
        ...[...NODE_IO, ...IO_PACKAGES].map((name) => ({
          name,
          message: `${layer}/ opens no sockets, files, processes, threads or timers; io/ does (${DOC}).`,
        })),
        ...['net', 'node:net'].map((name) => ({
          name,
          // Address parsing and matching only: pure functions on strings, no socket.
          allowImportNames: ['isIP', 'isIPv4', 'isIPv6', 'BlockList', 'SocketAddress'],
          message: `${layer}/ may use node:net's address helpers (isIP, isIPv4, isIPv6, BlockList, SocketAddress), never a socket (${DOC}).`,
        })),
      ],
      patterns: [
        {
          regex: `^(\\.\\./)+(${lower.join('|')})(/|$)`,
          message: `${layer}/ never imports ${lower.join('/ or ')}/: imports point protocol <- domain <- io <- wiring (${DOC}).`,
        },
        {
          // The service's error catalogue (src/errors.ts) is a table every layer may name.
          regex: `^${up}(?!errors\\.ts$)[^./][^/]*$`,
          message: `${layer}/ never imports the package's top-level wiring (${DOC}).`,
        },
        { regex: `^${up}\\.\\./`, message: `${layer}/ never reaches outside src/ (${DOC}).` },
        {
          group: ['ws/*', 'fastify/*', 'pino/*', '@fastify/*'],
          message: `${layer}/ owns no sockets or logs (${DOC}).`,
        },
      ],
    },
  ];
}

// 2. No deep imports across packages: another package is reached through its `exports` only.
const deepImports = [
  LEVEL,
  {
    patterns: [
      {
        regex: '^@broadcast-ops/[^/]+/(src|test)(/|$)',
        message: `Import the package's exports (".", "./testing"), never its src/ or test/ (${DOC}).`,
      },
      {
        regex: `(^|/)packages/[^/]+/(src|test)(/|$)|^(\\.\\./)+(${PACKAGES.join('|')})/(src|test)(/|$)`,
        message: `Import @broadcast-ops/<pkg> or @broadcast-ops/<pkg>/testing, never another package's src/ or test/ by path (${DOC}).`,
      },
    ],
  },
];

// 3. No timers or wall time in protocol/ and domain/: time comes from the injected Clock.
const TIME_MESSAGE = `protocol/ and domain/ take time from the injected Clock (core's clock.ts), never from the process (${DOC}).`;
const timeRules = {
  'no-restricted-globals': [
    LEVEL,
    ...[
      'setTimeout',
      'setInterval',
      'setImmediate',
      'clearTimeout',
      'clearInterval',
      'clearImmediate',
      'performance',
    ].map((name) => ({ name, message: TIME_MESSAGE })),
  ],
  'no-restricted-properties': [
    LEVEL,
    ...[
      ['Date', 'now'],
      ['performance', 'now'],
      ['process', 'hrtime'],
      ['process', 'uptime'],
      ['globalThis', 'setTimeout'],
      ['globalThis', 'setInterval'],
      ['globalThis', 'setImmediate'],
      ['globalThis', 'performance'],
    ].map(([object, property]) => ({ object, property, message: TIME_MESSAGE })),
  ],
};
const timeSyntax = [
  { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: TIME_MESSAGE },
  { selector: "CallExpression[callee.type='Identifier'][callee.name='Date']", message: TIME_MESSAGE },
];

// 4. No hand-built error bodies: `{error, message}` sent or serialised by hand, outside core's errors.ts/http.ts.
const KEY = (k) => `Property[key.name='${k}'], Property[key.value='${k}']`;
const errorBodySyntax = [
  {
    selector:
      "CallExpression:matches([callee.property.name='send'], [callee.object.name='JSON'][callee.property.name='stringify'])" +
      ` > ObjectExpression:has(> :matches(${KEY('error')})):has(> :matches(${KEY('message')}))`,
    message: `An HTTP error body is built by core only: throw fail(...)/an AppError or call sendError(reply, err) (${DOC}; "The HTTP edge").`,
  },
];
// 5. zod from core only: `import * as z from '@broadcast-ops/core/zod'`, zod's mini API with English messages,
// one API for every schema; a schema of the classic API costs every start its types' installation
// (docs/at-rest.md "zod's mini API"). Its namespace form, never a `z` export: esbuild keeps only the parts of a
// namespace that are read (docs/at-rest.md "One start file").
const zodSyntax = [
  {
    selector: 'ImportDeclaration[source.value=/^zod(\\/|$)/]',
    message: `zod comes from core: import * as z from '@broadcast-ops/core/zod' (its mini API, English messages; ${DOC}).`,
  },
  {
    selector:
      "ImportDeclaration[source.value='@broadcast-ops/core/zod'] > ImportSpecifier[imported.name='z']",
    message: `Import zod as a namespace: import * as z from '@broadcast-ops/core/zod' (${DOC}).`,
  },
];
const layerFiles = (layer, depth) =>
  SERVICES.map((p) => `packages/${p}/src/${layer}/${'*/'.repeat(depth - 1)}*.ts`);

export const enforced = [
  { files: ['**/*.ts'], rules: { 'no-restricted-imports': deepImports } },
  {
    files: ['**/*.ts'],
    ignores: ['packages/core/src/errors.ts', 'packages/core/src/http.ts', 'packages/core/src/zod.ts'],
    rules: { 'no-restricted-syntax': [LEVEL, ...errorBodySyntax, ...zodSyntax] },
  },
  ...['protocol', 'domain'].flatMap((layer) =>
    [1, 2, 3].map((depth) => ({
      files: layerFiles(layer, depth),
      rules: {
        '@typescript-eslint/no-restricted-imports': layerImports(layer, depth),
        ...timeRules,
        'no-restricted-syntax': [LEVEL, ...errorBodySyntax, ...timeSyntax, ...zodSyntax],
      },
    })),
  ),
];

export default tseslint.config(
  {
    ignores: [
      '**/node_modules/**',
      'data/**',
      'dist/**',
      'packages/*/dist/**',
      // Companion's own Satellite server code (three releases), vendored unmodified for the interop test
      // (a PROVENANCE.md per copy).
      'packages/telemetry-bridge/test/fixtures/companion-satellite*/**',
      '**/*.js',
      '**/*.mjs',
      '**/*.cjs',
      // Browser JavaScript served as plain files (no build step) is linted, by the last block below.
      '!packages/*/public/**/*.js',
      '!packages/status/src/io/page/**/*.js',
      '!packages/punch/src/io/console/**/*.js',
    ],
  },
  js.configs.recommended,
  {
    files: ['**/*.ts'],
    extends: [...tseslint.configs.strictTypeChecked],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          // node:test's test()/describe() return promises the runner itself awaits.
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite'] },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        { allowNumber: true, allowBoolean: true, allowNullish: true },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-unnecessary-condition': 'off',
      '@typescript-eslint/no-confusing-void-expression': 'off',
      '@typescript-eslint/no-extraneous-class': 'off',
    },
  },
  {
    files: ['**/test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
    },
  },
  {
    // Pages' scripts: ES modules in the browser, recommended rules, no type information.
    files: [
      'packages/*/public/**/*.js',
      'packages/status/src/io/page/**/*.js',
      'packages/punch/src/io/console/**/*.js',
    ],
    languageOptions: { sourceType: 'module', globals: { ...globals.browser } },
    rules: {
      'no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      eqeqeq: ['error', 'smart'],
    },
  },
  ...enforced,
  prettier,
);
