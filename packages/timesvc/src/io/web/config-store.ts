import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename, dirname, extname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { ConfigError, loadConfig } from '@broadcast-ops/core';
import { ENV_OVERRIDES, configSchema, type TimesvcConfig } from '../../config.ts';

/** `yaml`, loaded when a YAML configuration file is first read or written here, not at start. */
const yaml = (): typeof import('yaml') => createRequire(import.meta.url)('yaml') as typeof import('yaml');

/**
 * `GET`/`PUT /api/config` (README "Web API: configuration"). The editable document is the config file's
 * own text parsed (so `${NAME}` references stay references and environment secrets are never written to
 * the file) without the `web` section and without `nts.cookie_key`: those stay as they are in the file
 * and are never returned. A PUT is checked by loading the candidate exactly as the service loads its file
 * (substitution, environment overrides, the same strict schema), then written atomically: a temporary file
 * in the same directory, fsync, rename over the old file, fsync of the directory. A crash at any point
 * leaves either the old or the new file, never a part of one.
 */
export const EDITABLE_SECTIONS = ['environment', 'ntp', 'nts', 'ptp', 'gpsdo', 'logging'] as const;

export class ConfigStore {
  readonly file: string | undefined;
  readonly #environment: NodeJS.ProcessEnv;
  /** Test hook: called between writing the temporary file and renaming it. */
  beforeRename: (() => void) | undefined;

  constructor(file: string | undefined, environment: NodeJS.ProcessEnv = process.env) {
    this.file = file;
    this.#environment = environment;
  }

  #raw(): Record<string, unknown> {
    if (!this.file) return {};
    const text = readFileSync(this.file, 'utf8');
    const v = (extname(this.file) === '.json' ? JSON.parse(text) : yaml().parse(text)) as unknown;
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  }

  /** The editable document: the file's sections other than `web`, with `nts.cookie_key` removed. */
  document(): Record<string, unknown> {
    const raw = this.#raw();
    const out: Record<string, unknown> = {};
    for (const k of EDITABLE_SECTIONS) if (raw[k] !== undefined) out[k] = structuredClone(raw[k]);
    const nts = out['nts'];
    if (nts && typeof nts === 'object') delete (nts as Record<string, unknown>)['cookie_key'];
    return out;
  }

  /**
   * Validate `doc` as the new editable document; returns the config it would load as. Throws ConfigError
   * with the path of the first problems.
   */
  candidate(doc: unknown): { raw: Record<string, unknown>; config: TimesvcConfig } {
    if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
      throw new ConfigError('the configuration must be a JSON object');
    }
    const d = doc as Record<string, unknown>;
    if ('web' in d) throw new ConfigError('web: the web section (users, secrets) is not editable over HTTP');
    const unknown = Object.keys(d).filter((k) => !(EDITABLE_SECTIONS as readonly string[]).includes(k));
    if (unknown.length)
      throw new ConfigError(`unknown key${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}`);
    const current = this.#raw();
    const raw: Record<string, unknown> = {};
    for (const k of EDITABLE_SECTIONS) if (d[k] !== undefined) raw[k] = structuredClone(d[k]);
    if (current['web'] !== undefined) raw['web'] = current['web'];
    const key = (current['nts'] as Record<string, unknown> | undefined)?.['cookie_key'];
    if (key !== undefined) {
      if (raw['nts'] === undefined || typeof raw['nts'] !== 'object' || raw['nts'] === null) raw['nts'] = {};
      (raw['nts'] as Record<string, unknown>)['cookie_key'] = key;
    }
    const config = loadConfig({
      schema: configSchema,
      data: raw,
      env: ENV_OVERRIDES,
      environment: this.#environment,
      substitute: true,
    });
    return { raw, config };
  }

  /** Write `raw` atomically (0600: the file holds the JWT secret and user hashes). */
  write(raw: Record<string, unknown>): void {
    if (!this.file) throw new ConfigError('the service runs on embedded defaults: there is no file to write');
    const text =
      extname(this.file) === '.json'
        ? JSON.stringify(raw, null, 2) + '\n'
        : yaml().stringify(raw, { lineWidth: 0 });
    const dir = dirname(this.file);
    const tmp = join(dir, `.${basename(this.file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
    try {
      const fd = openSync(tmp, 'wx', 0o600);
      try {
        writeSync(fd, text);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      this.beforeRename?.();
      renameSync(tmp, this.file);
    } catch (err) {
      rmSync(tmp, { force: true });
      throw err;
    }
    try {
      const dfd = openSync(dir, 'r');
      try {
        fsyncSync(dfd);
      } finally {
        closeSync(dfd);
      }
    } catch {
      // Some file systems refuse fsync on a directory; the rename itself is atomic.
    }
  }
}

/** Paths whose values differ between two configs, down to `depth` levels (e.g. `ntp.port`). */
export function changedPaths(a: unknown, b: unknown, prefix = '', depth = 2): string[] {
  if (JSON.stringify(a) === JSON.stringify(b)) return [];
  if (
    depth === 0 ||
    a === null ||
    b === null ||
    typeof a !== 'object' ||
    typeof b !== 'object' ||
    Array.isArray(a)
  ) {
    return [prefix || '(root)'];
  }
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  const out: string[] = [];
  for (const k of keys) {
    out.push(
      ...changedPaths(
        (a as Record<string, unknown>)[k],
        (b as Record<string, unknown>)[k],
        prefix ? `${prefix}.${k}` : k,
        depth - 1,
      ),
    );
  }
  return out;
}
