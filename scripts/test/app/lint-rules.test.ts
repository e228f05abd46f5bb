/**
 * The rules the build enforces (docs/ARCHITECTURE.md "Rules the build enforces") catch what they are for: each
 * snippet below is linted with the very rule blocks `npm run lint` runs (the `enforced` export of
 * eslint.config.js), as if it were a file at the path given, and the rule must fire on the violation and stay
 * silent on its allowed twin (the same code in a folder where it is allowed, or the allowed form of it).
 * Pure: ESLint's API on text, no type information, no file written, no process, no socket.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { ESLint, type Linter } from 'eslint';
import tseslint from 'typescript-eslint';
import { repoRoot } from '@broadcast-ops/core/testing';

const { enforced } = (await import(pathToFileURL(join(repoRoot, 'eslint.config.js')).href)) as {
  enforced: Linter.Config[];
};
const eslint = new ESLint({
  cwd: repoRoot,
  overrideConfigFile: true,
  overrideConfig: [
    {
      files: ['**/*.ts'],
      languageOptions: { parser: tseslint.parser },
      plugins: { '@typescript-eslint': tseslint.plugin },
    },
    ...enforced,
  ],
});

/** The rules that fire, as `rule@line`, when `code` is the file at `path` (relative to the repository). */
async function fired(path: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: join(repoRoot, path) });
  assert.ok(result);
  const fatal = result.messages.filter((m) => m.fatal);
  assert.deepEqual(fatal, [], `${path} must parse`);
  return result.messages.map((m) => `${m.ruleId ?? '?'}@${m.line}`);
}

async function fires(rule: string, path: string, code: string, alone = true): Promise<void> {
  const got = await fired(path, code);
  assert.ok(
    got.some((g) => g.startsWith(`${rule}@`)),
    `${rule} must fire on ${path}:\n${code}\n(got ${got.join(', ') || 'nothing'})`,
  );
  if (alone)
    assert.ok(
      got.every((g) => g.startsWith(`${rule}@`)),
      `only ${rule} fires on ${path} (got ${got.join(', ')})`,
    );
}

async function silent(path: string, code: string): Promise<void> {
  assert.deepEqual(await fired(path, code), [], `nothing fires on ${path}:\n${code}`);
}

const LAYER = '@typescript-eslint/no-restricted-imports';

test('import direction: protocol/ imports no domain/ (type-only too), no io/, no wiring; io/ may', async () => {
  await fires(
    LAYER,
    'packages/punch/src/protocol/f.ts',
    "import type { Session } from '../domain/session.ts';",
  );
  await fires(LAYER, 'packages/timesvc/src/protocol/f.ts', "import { x } from '../io/service.ts';");
  await fires(LAYER, 'packages/status/src/protocol/f.ts', "import { loadStatusConfig } from '../config.ts';");
  await fires(
    LAYER,
    'packages/punch/src/protocol/sub/f.ts',
    "import { createPunchServer } from '../../server.ts';",
  );
  await silent('packages/punch/src/io/f.ts', "import type { Session } from '../domain/session.ts';");
  await silent('packages/punch/src/protocol/f.ts', "import { TokenSigner } from './token.ts';");
  await silent('packages/punch/src/protocol/sub/f.ts', "import { TokenSigner } from '../token.ts';");
});

test('import direction: domain/ imports no io/ and no wiring, but protocol/ and the error catalogue', async () => {
  await fires(
    LAYER,
    'packages/telemetry-bridge/src/domain/f.ts',
    "import type { X } from '../io/event-log.ts';",
  );
  await fires(LAYER, 'packages/status/src/domain/f.ts', "import type { ServiceConfig } from '../config.ts';");
  await fires(LAYER, 'packages/playout-monitor/src/domain/f.ts', "import { Monitor } from '../monitor.ts';");
  await silent(
    'packages/playout-monitor/src/domain/f.ts',
    "import type { TallyDigit } from '../protocol/vmix-tcp.ts';",
  );
  await silent(
    'packages/telemetry-bridge/src/domain/f.ts',
    "import type { BridgeErrorCode } from '../errors.ts';",
  );
});

test('import direction: no sockets, files, processes, threads, timers or loggers in protocol/ and domain/', async () => {
  for (const mod of [
    'node:dgram',
    'node:fs',
    'fs',
    'node:http',
    'node:child_process',
    'node:worker_threads',
    'ws',
    'fastify',
    'pino',
    'node:timers/promises',
  ])
    await fires(
      LAYER,
      'packages/timesvc/src/domain/f.ts',
      `import type * as m from '${mod}';\nexport type M = typeof m;`,
    );
  await fires(LAYER, 'packages/punch/src/domain/f.ts', "import { createServer } from 'node:net';");
  await fires(LAYER, 'packages/punch/src/protocol/f.ts', "import type { FastifyReply } from 'fastify';");
  await silent('packages/punch/src/domain/f.ts', "import { BlockList, isIP } from 'node:net';");
  await silent(
    'packages/punch/src/io/f.ts',
    "import { createServer } from 'node:net';\nimport { readFile } from 'node:fs/promises';",
  );
  await silent('packages/punch/src/agent/f.ts', "import { spawn } from 'node:child_process';");
});

const DEEP = 'no-restricted-imports';

test('no deep imports across packages: exports only, from bench/, scripts/ and other packages', async () => {
  await fires(
    DEEP,
    'bench/x/run.ts',
    "import { startTestServer } from '../../packages/punch/test/helpers.ts';",
  );
  await fires(
    DEEP,
    'scripts/test/x.test.ts',
    "import { repoRoot } from '../../packages/core/src/testing/index.ts';",
  );
  await fires(DEEP, 'bench/x/run.ts', "import { configSchema } from '@broadcast-ops/timesvc/src/config.ts';");
  await fires(DEEP, 'packages/status/test/x.test.ts', "import { x } from '../../punch/src/index.ts';");
  await silent('bench/x/run.ts', "import { startTestServer } from '@broadcast-ops/punch/testing';");
  await silent('scripts/test/x.test.ts', "import { repoRoot } from '@broadcast-ops/core/testing';");
  await silent(
    'packages/punch/test/x.test.ts',
    "import { startTestServer } from './helpers.ts';\nimport { x } from '../src/index.ts';",
  );
});

test('no timers or wall time in protocol/ and domain/; io/ may', async () => {
  const domain = 'packages/timesvc/src/domain/f.ts';
  await fires('no-restricted-properties', domain, 'export const t = Date.now();');
  // `performance` is also a restricted global: both rules fire.
  await fires('no-restricted-properties', domain, 'export const t = performance.now();', false);
  await fires('no-restricted-properties', domain, 'export const t = process.hrtime.bigint();');
  await fires('no-restricted-globals', domain, 'setTimeout(() => undefined, 10);');
  await fires(
    'no-restricted-globals',
    'packages/punch/src/protocol/f.ts',
    'setInterval(() => undefined, 10);',
  );
  await fires('no-restricted-globals', domain, 'setImmediate(() => undefined);');
  await fires('no-restricted-syntax', domain, 'export const d = new Date();');
  await silent(
    domain,
    'export const d = new Date(0);\nexport const iso = (ms: number) => new Date(ms).toISOString();',
  );
  await silent(
    'packages/timesvc/src/io/f.ts',
    'export const t = Date.now();\nsetTimeout(() => undefined, 10);\nexport const d = new Date();',
  );
});

const BODY = 'no-restricted-syntax';

test('no hand-built error bodies: {error, message} sent or serialised by hand', async () => {
  const route = 'packages/punch/src/io/routes/f.ts';
  await fires(BODY, route, "reply.code(400).send({ error: 'BAD', message: 'no' });");
  await fires(BODY, route, 'reply.send({ error, message, details });');
  await fires(BODY, route, "res.end(JSON.stringify({ 'error': 'BAD', 'message': 'no' }));");
  await fires(
    BODY,
    'packages/timesvc/src/domain/f.ts',
    "export const b = JSON.stringify({ error: 'X', message: 'y' });",
  );
  await silent(route, "sendError(reply, fail('BAD', 'no'));\nthrow fail('BAD');");
  await silent(route, "reply.send({ ok: true, message: 'saved' });");
  await silent(
    'packages/core/src/http.ts',
    "reply.status(404).send({ error: 'NOT_FOUND', message: 'no route' });",
  );
});

test("zod from core only: import * as z from '@broadcast-ops/core/zod', as a namespace", async () => {
  for (const path of ['packages/punch/src/config.ts', 'packages/timesvc/src/domain/f.ts', 'bench/x/run.ts']) {
    await fires('no-restricted-syntax', path, "import * as z from 'zod';\nexport const s = z.string();");
    await fires('no-restricted-syntax', path, "import * as z from 'zod/mini';\nexport const s = z.string();");
    await fires(
      'no-restricted-syntax',
      path,
      "import { z } from '@broadcast-ops/core/zod';\nexport const s = z.string();",
    );
  }
  await fires(
    'no-restricted-syntax',
    'packages/punch/src/config.ts',
    "import type * as z from 'zod/v4/core';",
  );
  await silent(
    'packages/punch/src/config.ts',
    "import * as z from '@broadcast-ops/core/zod';\nexport const s = z.string();",
  );
  await silent('packages/core/src/zod.ts', "import { config } from 'zod/mini';\nconfig({});");
  await silent('packages/punch/src/io/f.ts', "import { z } from './zed.ts';\nexport const s = z;");
});
