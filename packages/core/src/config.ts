import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { extname } from 'node:path';
import * as z from './zod.ts';

/**
 * Configuration = defaults in the schema, then the file, then environment overrides, validated once.
 * Schemas are strict (z.strictObject): an unknown key is an error naming the key and the file,
 * because a misspelt key silently ignored is a live-show outage waiting to happen.
 */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export interface EnvOverride {
  /** Dotted path into the config object, e.g. `web.jwt_secret`. */
  path: string;
  /** How to turn the string into a value; default: numbers, booleans and JSON arrays/objects are recognised. */
  parse?: (raw: string) => unknown;
}

export interface LoadConfigOptions<S extends z.core.$ZodType> {
  schema: S;
  /** Path of a JSON or YAML file; omitted: only defaults and environment. */
  file?: string | undefined;
  /** Parsed object to use instead of reading `file` (embedded defaults, tests). */
  data?: unknown;
  /** Environment variable name -> where it goes in the config. */
  env?: Record<string, EnvOverride | string>;
  /** Environment to read; default process.env. */
  environment?: NodeJS.ProcessEnv;
  /** Replace `${NAME}` and `${NAME:-default}` in string values of the file with environment values. */
  substitute?: boolean;
}

export function coerceEnvValue(raw: string): unknown {
  const t = raw.trim();
  if (t === 'true') return true;
  if (t === 'false') return false;
  if (/^-?\d+(\.\d+)?$/.test(t)) return Number(t);
  if ((t.startsWith('[') && t.endsWith(']')) || (t.startsWith('{') && t.endsWith('}'))) {
    try {
      return JSON.parse(t) as unknown;
    } catch {
      return raw;
    }
  }
  return raw;
}

const SUBST = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/** `${NAME}` and `${NAME:-default}` substitution; an unset NAME without default is an error. */
export function substituteEnv(value: unknown, env: NodeJS.ProcessEnv, where = ''): unknown {
  if (typeof value === 'string') {
    return value.replace(SUBST, (_m, name: string, def: string | undefined) => {
      const v = env[name];
      if (v !== undefined && v !== '') return v;
      if (def !== undefined) return def;
      throw new ConfigError(
        `${where || 'config'}: \${${name}} is not set in the environment and has no default`,
      );
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => substituteEnv(v, env, `${where}[${i}]`));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, substituteEnv(v, env, where ? `${where}.${k}` : k)]),
    );
  }
  return value;
}

/**
 * The YAML parser loads on the first YAML file: a service started with a JSON config (or none) never pays
 * its module load (about 70 modules) at start or in its resident memory (docs/at-rest.md).
 */
function parseYaml(text: string): unknown {
  const yaml = createRequire(import.meta.url)('yaml') as typeof import('yaml');
  return yaml.parse(text) as unknown;
}

export function readConfigFile(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${file}: ${(err as Error).message}`);
  }
  const ext = extname(file).toLowerCase();
  try {
    if (ext === '.yaml' || ext === '.yml') return parseYaml(text) ?? {};
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new ConfigError(
      `config file ${file} is not valid ${ext === '.json' ? 'JSON' : 'YAML'}: ${(err as Error).message}`,
    );
  }
}

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let node = target;
  for (const part of parts.slice(0, -1)) {
    const next = node[part];
    if (next === null || typeof next !== 'object' || Array.isArray(next)) node[part] = {};
    node = node[part] as Record<string, unknown>;
  }
  node[parts[parts.length - 1] as string] = value;
}

/** Format zod issues as `file: key "x" at a.b is not allowed` lines. */
export function formatZodIssues(issues: readonly z.core.$ZodIssue[], source: string): string {
  return issues
    .map((issue) => {
      const at = issue.path.length ? issue.path.map(String).join('.') : '(root)';
      if (issue.code === 'unrecognized_keys') {
        const keys = issue.keys.map((k) => (issue.path.length ? `${at}.${k}` : k));
        return `${source}: unknown key${keys.length > 1 ? 's' : ''} ${keys.map((k) => `"${k}"`).join(', ')}`;
      }
      return `${source}: ${at}: ${issue.message}`;
    })
    .join('\n');
}

export function loadConfig<S extends z.core.$ZodType>(options: LoadConfigOptions<S>): z.output<S> {
  const environment = options.environment ?? process.env;
  const source = options.file ?? 'embedded defaults';
  let raw: unknown =
    options.data !== undefined
      ? structuredClone(options.data)
      : options.file
        ? readConfigFile(options.file)
        : {};
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new ConfigError(`${source}: the configuration must be an object`);
  }
  if (options.substitute) raw = substituteEnv(raw, environment);
  const overridden: string[] = [];
  for (const [name, spec] of Object.entries(options.env ?? {})) {
    const value = environment[name];
    if (value === undefined || value === '') continue;
    const o = typeof spec === 'string' ? { path: spec } : spec;
    setPath(raw as Record<string, unknown>, o.path, (o.parse ?? coerceEnvValue)(value));
    overridden.push(name);
  }
  // Parsed once, by zod's runtime parser: the mini API's objects build no eval-compiled fast path, which the
  // classic API's built for this one parse at each start (docs/at-rest.md "What was cut").
  const result = z.safeParse(options.schema, raw);
  if (!result.success) {
    const from = overridden.length
      ? `${source} (with ${overridden.join(', ')} from the environment)`
      : source;
    throw new ConfigError(formatZodIssues(result.error.issues, from));
  }
  return result.data;
}
