import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Logger } from '@broadcast-ops/core';

/**
 * The single-file agent the broker serves under `/agent/` (docs/agent.md "Without a checkout"): one ES
 * module bundling `src/io/agent/standalone.ts` with everything it imports (ws, pino, core's CLI helper), so a
 * device needs only Node.js and srt-live-transmit. Built by the broker itself with esbuild, once, on the
 * first download, and kept in memory: it is always the agent of the code this broker runs (from src/ under
 * the test runner, from dist/ once built), named with this package's version. The build takes about a
 * second on a busy two-core machine; the log line "agent bundle built" gives its time and size.
 */
export interface AgentFile {
  version: string;
  /** `punch-agent-<version>.mjs`. */
  file: string;
  body: Buffer;
  sha256: string;
  buildMs: number;
}

/** The stable alias: always the current version's file. */
export const AGENT_ALIAS = 'punch-agent.mjs';
export const agentFileName = (version: string): string => `punch-agent-${version}.mjs`;

/** This package's version (package.json beside src/ and dist/, which mirror each other). */
export const PUNCH_PACKAGE_VERSION: string = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

export class AgentBundleError extends Error {}

export class AgentBundle {
  readonly version: string;
  readonly file: string;
  #pending: Promise<AgentFile> | null = null;
  readonly #log: Logger;

  readonly #loadEsbuild: () => Promise<typeof import('esbuild')>;

  /** `loadEsbuild`: tests stand in for an installation without esbuild. */
  constructor(
    log: Logger,
    version = PUNCH_PACKAGE_VERSION,
    loadEsbuild: () => Promise<typeof import('esbuild')> = () => import('esbuild'),
  ) {
    this.#log = log;
    this.version = version;
    this.file = agentFileName(version);
    this.#loadEsbuild = loadEsbuild;
  }

  /** The bundle, built on the first call; a failed build is tried again on the next call. */
  get(): Promise<AgentFile> {
    this.#pending ??= this.#build().catch((err: unknown) => {
      this.#pending = null;
      throw err;
    });
    return this.#pending;
  }

  async #build(): Promise<AgentFile> {
    const started = performance.now();
    let esbuild: typeof import('esbuild');
    try {
      esbuild = await this.#loadEsbuild();
    } catch {
      throw new AgentBundleError(
        'the agent bundle cannot be built: esbuild is not installed (install the broker with `npm ci`)',
      );
    }
    // This module's own extension tells which tree runs: src/ (.ts, the `source` export condition) or dist/.
    const fromSource = import.meta.url.endsWith('.ts');
    const entry = fileURLToPath(new URL(`./agent/standalone.${fromSource ? 'ts' : 'js'}`, import.meta.url));
    const result = await esbuild.build({
      entryPoints: [entry],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      conditions: fromSource ? ['source'] : [],
      write: false,
      legalComments: 'eof',
      logLevel: 'silent',
      define: { PUNCH_AGENT_VERSION: JSON.stringify(this.version) },
      // ws and pino are CommonJS: their require() of Node's modules needs a real require in an ES module.
      banner: {
        js:
          `// punch agent ${this.version}: node ${this.file} --help\n` +
          "import { createRequire as __punchRequire } from 'node:module';\n" +
          'const require = __punchRequire(import.meta.url);',
      },
      plugins: [coreWithoutSideEffects],
    });
    const body = Buffer.from(result.outputFiles[0]?.contents ?? new Uint8Array());
    if (body.length === 0) throw new AgentBundleError('the agent bundle came out empty');
    const built: AgentFile = {
      version: this.version,
      file: this.file,
      body,
      sha256: createHash('sha256').update(body).digest('hex'),
      buildMs: Math.round(performance.now() - started),
    };
    this.#log.info(
      { file: built.file, bytes: body.length, sha256: built.sha256, ms: built.buildMs },
      'agent bundle built',
    );
    return built;
  }
}

/**
 * core's index re-exports its HTTP and metrics helpers (fastify, prom-client): its modules have no side
 * effects, so marking them so lets esbuild leave out what the agent does not use (300 KB instead of 2.7 MB).
 */
const coreWithoutSideEffects: import('esbuild').Plugin = {
  name: 'core-without-side-effects',
  setup(build) {
    build.onResolve({ filter: /.*/ }, async (args) => {
      if (args.pluginData === 'inner') return undefined;
      const core =
        args.path === '@broadcast-ops/core' ||
        (args.path.startsWith('.') && /[/\\]packages[/\\]core[/\\](src|dist)[/\\]/.test(args.importer));
      if (!core) return undefined;
      const r = await build.resolve(args.path, {
        kind: args.kind,
        resolveDir: args.resolveDir,
        importer: args.importer,
        pluginData: 'inner',
      });
      return r.errors.length > 0 ? { errors: r.errors } : { path: r.path, sideEffects: false };
    });
  },
};
