/**
 * Bitfocus Companion Satellite API line protocol (docs/companion.md "Wire format"): one codec shared by the
 * adapter (client side) and the simulator (server side), for TCP (16622) and WebSocket (16623) alike.
 *
 * - A message is one line ending in `\n`; one `\r` is removed (Companion `SatelliteApi.initSocket`).
 * - Parameters follow Companion's `parseLineParameters` (companion/lib/Resources/Util.ts): tokens split on
 *   spaces outside `"…"`, `"` toggles quoting and is removed, `\` takes the next character literally,
 *   each token splits at its first `=`, a token without `=` is the flag `true`, empty tokens and
 *   prototype-polluting keys are dropped, the result has a null prototype.
 * - Server lines (ApiVersion ≥ 1.8.0, `SatelliteSocketWrapper.sendMessage`): `NAME [OK|ERROR]
 *   [DEVICEID="id"] K=V … \n`, strings quoted without escaping, numbers bare, booleans 1/0, a space
 *   before `\n`. Companion 3.x (ApiVersion ≤ 1.7.x) wrote hand-made lines without the trailing space and
 *   with unquoted values; `formatLegacyLine` reproduces that for the simulator.
 */

export type SatelliteParams = Record<string, string | true>;

export interface SatelliteLine {
  /** Command name, upper-cased (Companion dispatches on `cmd.toUpperCase()`). */
  name: string;
  /** Everything after the first space (the PING payload is echoed from it). */
  body: string;
  params: SatelliteParams;
}

/** Keys Companion refuses (`BANNED_PROPS` in @companion-app/shared/Expressions). */
const BANNED = new Set(['__proto__', 'constructor', 'prototype']);
function banned(key: string): boolean {
  return BANNED.has(key) || key.startsWith('__define') || key.startsWith('__lookup');
}

/** Companion's `parseLineParameters`, same algorithm (quotes, backslash, first `=`, banned keys). */
export function splitParams(body: string): SatelliteParams {
  const fragments: string[] = [''];
  let quoted = false;
  let cur = '';
  for (let i = 0; i < body.length; i++) {
    const c = body.charAt(i);
    if (c === '\\') {
      cur += body[i + 1] ?? '';
      i++;
    } else if (c === '"') {
      quoted = !quoted;
    } else if (c === ' ' && !quoted) {
      fragments[fragments.length - 1] = cur;
      fragments.push('');
      cur = '';
    } else {
      cur += c;
    }
  }
  fragments[fragments.length - 1] = cur;
  const out = Object.create(null) as SatelliteParams;
  for (const f of fragments) {
    const eq = f.indexOf('=');
    if (eq === -1) {
      if (f === '' || banned(f)) continue;
      out[f] = true;
    } else {
      const key = f.slice(0, eq);
      if (key === '' || banned(key)) continue;
      out[key] = f.slice(eq + 1);
    }
  }
  return out;
}

/** Parse one line (without its `\n`; a single `\r` is removed as Companion does). */
export function splitLine(raw: string): SatelliteLine {
  const line = raw.replace(/\r/, '');
  const i = line.indexOf(' ');
  const cmd = i === -1 ? line : line.slice(0, i);
  const body = i === -1 ? '' : line.slice(i + 1);
  return { name: cmd.toUpperCase(), body, params: splitParams(body) };
}

/** Companion's `isFalsey`: `false` (any case), `0`, or empty/absent. */
export function isFalsey(v: string | true | undefined): boolean {
  return v === undefined || v === '' || v === '0' || (typeof v === 'string' && v.toLowerCase() === 'false');
}

/** Companion's `isTruthy`: not falsey and (`true`/`yes` or a number ≥ 1). */
export function isTruthy(v: string | true | undefined): boolean {
  if (isFalsey(v)) return false;
  if (v === true) return true;
  const s = (v as string).toLowerCase();
  return s === 'true' || s === 'yes' || Number(s) >= 1;
}

export type SatelliteValue = string | number | boolean;

/**
 * Companion ≥ 1.8.0 server line (`sendMessage`): strings in quotes without escaping, so a value holding
 * `"`, `\n` or `\r` cannot be written; such values are refused here rather than corrupting the stream.
 */
export function formatServerLine(
  name: string,
  status: 'OK' | 'ERROR' | null,
  deviceId: string | null,
  args: Record<string, SatelliteValue> = {},
): string {
  const chunks = [name];
  if (status) chunks.push(status);
  if (deviceId) chunks.push(`DEVICEID="${unescapable(deviceId)}"`);
  for (const [k, v] of Object.entries(args)) {
    chunks.push(
      `${k}=${typeof v === 'boolean' ? (v ? '1' : '0') : typeof v === 'number' ? String(v) : `"${unescapable(v)}"`}`,
    );
  }
  chunks.push('\n');
  return chunks.join(' ');
}

/** Companion 3.x (ApiVersion ≤ 1.7.x) hand-written line: tokens as given, no trailing space. */
export function formatLegacyLine(tokens: string[]): string {
  return tokens.join(' ') + '\n';
}

function unescapable(v: string): string {
  if (/["\r\n]/.test(v))
    throw new SatelliteEncodeError(`value cannot be carried unescaped: ${JSON.stringify(v)}`);
  return v;
}

export class SatelliteEncodeError extends Error {}

/**
 * Client line: every string value is quoted with `\` before `"` and `\`, which Companion's parser turns
 * back into the literal characters. Newlines cannot be carried in a line and are refused.
 */
export function formatClientLine(
  name: string,
  args: Record<string, SatelliteValue | undefined> = {},
): string {
  const chunks = [name];
  for (const [k, v] of Object.entries(args)) {
    if (v === undefined) continue;
    if (!/^[A-Z0-9_]+$/.test(k))
      throw new SatelliteEncodeError(`invalid parameter name ${JSON.stringify(k)}`);
    chunks.push(
      `${k}=${typeof v === 'boolean' ? (v ? '1' : '0') : typeof v === 'number' ? String(v) : quote(v)}`,
    );
  }
  return chunks.join(' ') + '\n';
}

export function quote(v: string): string {
  if (/[\r\n]/.test(v)) throw new SatelliteEncodeError('a line cannot carry a newline; send it base64');
  return `"${v.replace(/[\\"]/g, (c) => '\\' + c)}"`;
}

export function toBase64(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64');
}
export function fromBase64(b64: string): string {
  return Buffer.from(b64, 'base64').toString('utf8');
}

/** Companion's own bound (`MAX_LINE_LENGTH` in SatelliteApi.ts): 2 MiB without a newline drops the link. */
export const MAX_LINE_LENGTH = 2 * 1024 * 1024;

export class LineTooLongError extends Error {
  constructor(readonly limit: number) {
    super(`line exceeds ${limit} characters without a newline`);
  }
}

/**
 * Reassembles lines across TCP chunks and WebSocket frames. Feed decoded text (use a StringDecoder for
 * TCP bytes); returns the complete lines. The pending remainder is bounded by `maxLength` characters.
 */
export class LineSplitter {
  #buf = '';
  constructor(readonly maxLength: number = MAX_LINE_LENGTH) {}

  push(text: string): string[] {
    this.#buf += text;
    const lines: string[] = [];
    let from = 0;
    let nl: number;
    while ((nl = this.#buf.indexOf('\n', from)) !== -1) {
      lines.push(this.#buf.slice(from, nl));
      from = nl + 1;
    }
    this.#buf = this.#buf.slice(from);
    if (this.#buf.length > this.maxLength) {
      this.#buf = '';
      throw new LineTooLongError(this.maxLength);
    }
    return lines;
  }

  get pending(): number {
    return this.#buf.length;
  }
  reset(): void {
    this.#buf = '';
  }
}

/** Compare dotted semver cores (`1.10.0` > `1.9.0`); pre-release tags are ignored. */
export function compareVersions(a: string, b: string): number {
  const pa = (a.split(/[-+]/)[0] ?? '').split('.').map((x) => Number(x) || 0);
  const pb = (b.split(/[-+]/)[0] ?? '').split('.').map((x) => Number(x) || 0);
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return 0;
}

export function atLeast(version: string, min: string): boolean {
  return compareVersions(version, min) >= 0;
}

export function isSemver(v: string): boolean {
  return /^\d+\.\d+\.\d+([-+].*)?$/.test(v);
}
