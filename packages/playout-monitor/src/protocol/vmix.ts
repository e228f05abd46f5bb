/**
 * vMix `GET /api` XML (pure): text in, the few facts the monitor needs out (reference §3.3, defect P4).
 * The program input is the one named by `<active>` (not the first Running input); position, duration,
 * markIn and markOut are ms; `<recording duration>` is seconds; booleans are the strings True/False.
 */
import { XMLParser, XMLValidator } from 'fast-xml-parser';

/** The largest document accepted; a real vMix with ~100 inputs sends well under 1 MiB. */
export const VMIX_MAX_XML_BYTES = 4 * 1024 * 1024;

export interface VmixInput {
  number: number;
  key: string;
  type: string;
  title: string;
  state: string;
  positionMs: number;
  durationMs: number;
  markInMs: number | undefined;
  markOutMs: number | undefined;
  loop: boolean;
}

export interface VmixSnapshot {
  version: string;
  edition: string;
  active: number | undefined;
  preview: number | undefined;
  /** The input shown by `<active>`, when it exists. */
  activeInput: VmixInput | undefined;
  inputCount: number;
  recording: boolean;
  recordingDurationSec: number | undefined;
  streaming: boolean;
}

export type VmixParseResult =
  | { ok: true; snapshot: VmixSnapshot }
  | { ok: false; code: 'too-large' | 'not-xml' | 'not-vmix'; message: string };

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: true,
  processEntities: true,
  isArray: (_name, jpath) => jpath === 'vmix.inputs.input',
});

type Node = Record<string, unknown>;

function isNode(v: unknown): v is Node {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function text(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (isNode(v)) return text(v['#text']);
  return undefined;
}

function int(v: unknown): number | undefined {
  const t = text(v);
  if (t === undefined || t.trim() === '') return undefined;
  const n = Number(t);
  return Number.isFinite(n) ? n : undefined;
}

function bool(v: unknown): boolean {
  return (text(v) ?? '').trim().toLowerCase() === 'true';
}

function attr(node: Node, name: string): unknown {
  return node[`@_${name}`];
}

function toInput(node: Node): VmixInput | undefined {
  const number = int(attr(node, 'number'));
  if (number === undefined) return undefined;
  const markOut = int(attr(node, 'markOut'));
  const markIn = int(attr(node, 'markIn'));
  return {
    number,
    key: text(attr(node, 'key')) ?? '',
    type: text(attr(node, 'type')) ?? '',
    title: text(attr(node, 'title')) ?? text(node['#text']) ?? '',
    state: text(attr(node, 'state')) ?? '',
    positionMs: int(attr(node, 'position')) ?? 0,
    durationMs: int(attr(node, 'duration')) ?? 0,
    markInMs: markIn,
    markOutMs: markOut,
    loop: bool(attr(node, 'loop')),
  };
}

export function parseVmixXml(xml: string): VmixParseResult {
  if (xml.length > VMIX_MAX_XML_BYTES) {
    return { ok: false, code: 'too-large', message: `document of ${xml.length} characters` };
  }
  // fast-xml-parser parses broken documents leniently; validate first so garbage is reported, not guessed.
  // XMLValidator still ships in fast-xml-parser 5 (deprecated in favour of a separate package we do not need).
  // eslint-disable-next-line @typescript-eslint/no-deprecated
  const valid = XMLValidator.validate(xml);
  if (valid !== true) {
    return {
      ok: false,
      code: 'not-xml',
      message: `${valid.err.code}: ${valid.err.msg} (line ${valid.err.line})`,
    };
  }
  let doc: unknown;
  try {
    doc = parser.parse(xml);
  } catch (err) {
    return { ok: false, code: 'not-xml', message: (err as Error).message };
  }
  const root = isNode(doc) ? doc['vmix'] : undefined;
  if (!isNode(root)) return { ok: false, code: 'not-vmix', message: 'no <vmix> root element' };
  const inputsNode = root['inputs'];
  const rawInputs =
    isNode(inputsNode) && Array.isArray(inputsNode['input']) ? (inputsNode['input'] as unknown[]) : [];
  const active = int(root['active']);
  let activeInput: VmixInput | undefined;
  for (const raw of rawInputs) {
    if (!isNode(raw)) continue;
    if (int(attr(raw, 'number')) === active) {
      activeInput = toInput(raw);
      break;
    }
  }
  const recordingNode = root['recording'];
  return {
    ok: true,
    snapshot: {
      version: text(root['version']) ?? '',
      edition: text(root['edition']) ?? '',
      active,
      preview: int(root['preview']),
      activeInput,
      inputCount: rawInputs.length,
      recording: bool(recordingNode),
      recordingDurationSec: isNode(recordingNode) ? int(attr(recordingNode, 'duration')) : undefined,
      streaming: bool(root['streaming']),
    },
  };
}
