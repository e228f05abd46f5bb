/**
 * Blackmagic HyperDeck Ethernet protocol (pure): bytes in, lines, responses and typed facts out
 * (Blackmagic HyperDeck manual, "Developer Information", Ethernet protocol; docs/PROTOCOLS.md). Framing: a
 * response is `NNN text` on one line, or `NNN text:` followed by `key: value` lines up to a blank line.
 * Only a header ending in `:` has parameters. The deck ends lines with CR LF; LF alone is accepted too.
 * Every buffer is bounded.
 */

export const HYPERDECK_MAX_LINE = 4096;
export const HYPERDECK_MAX_PARAMS = 10_000;
/**
 * Characters of one response block's parameter lines (a 10 000-clip list is about 1 MB). Without it the
 * line and parameter bounds alone would let one block hold 10 000 × 4096 characters.
 */
export const HYPERDECK_MAX_BLOCK_CHARS = 2 * 1024 * 1024;

export interface HyperdeckResponse {
  code: number;
  text: string;
  /** `key: value` pairs in wire order (a clip list has one pair per clip). */
  params: [string, string][];
}

export type HyperdeckProblem =
  | { kind: 'line-too-long'; length: number }
  | { kind: 'unknown-line'; line: string }
  | { kind: 'bad-parameter'; line: string }
  | { kind: 'too-many-parameters'; code: number }
  | { kind: 'unterminated-block'; code: number };

/** Splits a byte stream into lines; a line longer than the bound is dropped and reported once. */
export class LineSplitter {
  readonly #max: number;
  #partial = '';
  #discarding = false;

  constructor(maxLine = HYPERDECK_MAX_LINE) {
    this.#max = maxLine;
  }

  /** Returns the complete lines (without CR/LF) and any overlong-line problems. */
  push(chunk: string): { lines: string[]; problems: HyperdeckProblem[] } {
    const lines: string[] = [];
    const problems: HyperdeckProblem[] = [];
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf('\n', start);
      if (nl < 0) break;
      const piece = chunk.slice(start, nl);
      start = nl + 1;
      if (this.#discarding) {
        this.#discarding = false;
        this.#partial = '';
        continue;
      }
      let line = this.#partial + piece;
      this.#partial = '';
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line.length > this.#max) {
        problems.push({ kind: 'line-too-long', length: line.length });
        continue;
      }
      lines.push(line);
    }
    const rest = chunk.slice(start);
    if (!this.#discarding && rest.length > 0) {
      this.#partial += rest;
      if (this.#partial.length > this.#max + 1) {
        problems.push({ kind: 'line-too-long', length: this.#partial.length });
        this.#partial = '';
        this.#discarding = true;
      }
    }
    return { lines, problems };
  }

  /** Characters held while waiting for an end of line (for bound checks in tests). */
  get pending(): number {
    return this.#partial.length;
  }
}

const HEADER = /^(\d{3}) (.+?)(:?)$/;
const PARAM = /^(.*?): (.*)$/;

/** Turns lines into responses. Feed it every line; it returns a response when one is complete. */
export class ResponseAssembler {
  #current: HyperdeckResponse | undefined;
  /** Characters held in the current block's parameters. */
  #currentChars = 0;
  /** Skipping the rest of a block that went over a bound, up to its blank line or the next header. */
  #discarding = false;
  readonly #maxParams: number;
  readonly #maxBlockChars: number;

  constructor(maxParams = HYPERDECK_MAX_PARAMS, maxBlockChars = HYPERDECK_MAX_BLOCK_CHARS) {
    this.#maxParams = maxParams;
    this.#maxBlockChars = maxBlockChars;
  }

  push(line: string): { responses: HyperdeckResponse[]; problems: HyperdeckProblem[] } {
    const responses: HyperdeckResponse[] = [];
    const problems: HyperdeckProblem[] = [];
    if (this.#discarding) {
      if (line === '') {
        this.#discarding = false;
        return { responses, problems };
      }
      if (!HEADER.test(line) || PARAM.test(line)) return { responses, problems };
      this.#discarding = false;
    }
    const current = this.#current;
    if (current) {
      if (line === '') {
        responses.push(current);
        this.#current = undefined;
        return { responses, problems };
      }
      const header = HEADER.exec(line);
      if (!header || PARAM.test(line)) {
        const p = PARAM.exec(line);
        if (!p) {
          problems.push({ kind: 'bad-parameter', line: line.slice(0, 200) });
        } else if (
          current.params.length >= this.#maxParams ||
          this.#currentChars + line.length > this.#maxBlockChars
        ) {
          problems.push({ kind: 'too-many-parameters', code: current.code });
          this.#current = undefined;
          this.#discarding = true;
        } else {
          current.params.push([p[1] ?? '', p[2] ?? '']);
          this.#currentChars += line.length;
        }
        return { responses, problems };
      }
      // A new header before the blank line: the block was cut short. Keep what arrived, then go on.
      problems.push({ kind: 'unterminated-block', code: current.code });
      responses.push(current);
      this.#current = undefined;
    }
    if (line === '') return { responses, problems };
    const header = HEADER.exec(line);
    if (!header) {
      problems.push({ kind: 'unknown-line', line: line.slice(0, 200) });
      return { responses, problems };
    }
    const response: HyperdeckResponse = { code: Number(header[1]), text: header[2] ?? '', params: [] };
    this.#currentChars = 0;
    if (header[3] === ':') this.#current = response;
    else responses.push(response);
    return { responses, problems };
  }
}

/** One reader = splitter + assembler, for a connection. */
export class HyperdeckReader {
  readonly #lines: LineSplitter;
  readonly #assembler: ResponseAssembler;

  constructor(maxLine = HYPERDECK_MAX_LINE, maxParams = HYPERDECK_MAX_PARAMS) {
    this.#lines = new LineSplitter(maxLine);
    this.#assembler = new ResponseAssembler(maxParams);
  }

  push(chunk: string): { responses: HyperdeckResponse[]; problems: HyperdeckProblem[] } {
    const { lines, problems } = this.#lines.push(chunk);
    const responses: HyperdeckResponse[] = [];
    for (const line of lines) {
      const r = this.#assembler.push(line);
      responses.push(...r.responses);
      problems.push(...r.problems);
    }
    return { responses, problems };
  }
}

/** Response codes the monitor acts on (the manual's response code list). */
export const HD = {
  TIMELINE_EMPTY: 107,
  CONNECTION_REJECTED: 120,
  OK: 200,
  CLIPS_INFO: 205,
  TRANSPORT_INFO: 208,
  CONNECTION_INFO: 500,
  ASYNC_SLOT_INFO: 502,
  ASYNC_TRANSPORT_INFO: 508,
  ASYNC_DISPLAY_TIMECODE: 513,
} as const;

export function isAsync(code: number): boolean {
  return code >= 500 && code < 600;
}

/** `name` or `name: key: value key: value` on one line, CR LF terminated. */
export function encodeCommand(name: string, params: [string, string | number | boolean][] = []): string {
  if (params.length === 0) return `${name}\r\n`;
  return `${name}: ${params.map(([k, v]) => `${k}: ${String(v)}`).join(' ')}\r\n`;
}

export interface TransportInfo {
  status?: string;
  speed?: number;
  slotId?: string;
  clipId?: number | null;
  singleClip?: boolean;
  displayTimecode?: string;
  timecode?: string;
  videoFormat?: string;
  loop?: boolean;
}

function boolParam(v: string): boolean | undefined {
  if (v === 'true') return true;
  if (v === 'false') return false;
  return undefined;
}

/** The keys of a 208/508 block. 508 blocks may carry only the changed keys: merge the result. */
export function transportInfoFrom(params: [string, string][]): TransportInfo {
  const info: TransportInfo = {};
  for (const [key, value] of params) {
    switch (key) {
      case 'status':
        info.status = value;
        break;
      case 'speed': {
        const n = Number(value);
        if (Number.isFinite(n)) info.speed = n;
        break;
      }
      case 'slot id':
      case 'active slot':
        info.slotId = value;
        break;
      case 'clip id': {
        if (value === 'none') info.clipId = null;
        else {
          const n = Number(value);
          if (Number.isInteger(n)) info.clipId = n;
        }
        break;
      }
      case 'single clip': {
        const b = boolParam(value);
        if (b !== undefined) info.singleClip = b;
        break;
      }
      case 'display timecode':
        info.displayTimecode = value;
        break;
      case 'timecode':
        info.timecode = value;
        break;
      case 'video format':
        info.videoFormat = value;
        break;
      case 'loop': {
        const b = boolParam(value);
        if (b !== undefined) info.loop = b;
        break;
      }
      default:
        break;
    }
  }
  return info;
}

export interface ClipInfo {
  id: number;
  name: string;
  startTimecode: string;
  durationTimecode: string;
}

const CLIP = /^(.*) (\d{2}:\d{2}:\d{2}[:;]\d{2}) (\d{2}:\d{2}:\d{2}[:;]\d{2})$/;

/** `205 clips info:` → `clip count: N`, then `{id}: {name} {start tc} {duration tc}` (protocol ≥ 1.1). */
export function clipsInfoFrom(params: [string, string][]): ClipInfo[] {
  const clips: ClipInfo[] = [];
  for (const [key, value] of params) {
    if (!/^\d+$/.test(key)) continue;
    const m = CLIP.exec(value);
    if (m)
      clips.push({
        id: Number(key),
        name: m[1] ?? '',
        startTimecode: m[2] ?? '',
        durationTimecode: m[3] ?? '',
      });
    else clips.push({ id: Number(key), name: value, startTimecode: '', durationTimecode: '' });
  }
  return clips;
}

export interface ConnectionInfo {
  protocolVersion: string | undefined;
  model: string | undefined;
}

export function connectionInfoFrom(params: [string, string][]): ConnectionInfo {
  const map = new Map(params);
  return { protocolVersion: map.get('protocol version'), model: map.get('model') };
}

/** `protocol version: 1.11` → [1, 11]; undefined when absent or not `major.minor`. */
export function protocolVersionFrom(text: string | undefined): [number, number] | undefined {
  const m = text === undefined ? null : /^(\d+)\.(\d+)/.exec(text.trim());
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}

/** Whether `version` is at least `major.minor`. */
export function versionAtLeast(version: [number, number] | undefined, major: number, minor: number): boolean {
  if (!version) return false;
  return version[0] > major || (version[0] === major && version[1] >= minor);
}

/** `513 display timecode:` → its `display timecode` value. */
export function displayTimecodeFrom(params: [string, string][]): string | undefined {
  for (const [k, v] of params) if (k === 'display timecode') return v;
  return undefined;
}
