// One flat config for the whole repository: type-checked typescript-eslint rules, Prettier owns formatting.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';
import globals from 'globals';

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
  prettier,
);
