/**
 * vMix `GET /api` XML (pure): text in, the facts the monitor publishes out (vMix help, "Developer API";
 * docs/PROTOCOLS.md, "vMix"). The program input is the one named by `<active>` (not the first Running
 * input); `<preview>` names the preview input; `<overlays><overlay number="N">input</overlay>` the
 * overlay channels; position, duration, markIn and markOut are ms; `<recording duration>` is seconds;
 * booleans are the strings True/False.
 *
 * A show with hundreds of inputs sends a large document four times a second, and only a handful of its
 * elements are published, so this is a single pass over the text (no DOM): it checks that tags nest and
 * close, reads the attributes of every `<input>` tag only as far as its `number`, and decodes the
 * attributes and text only of the inputs it publishes. Character references (`&amp;`, `&#233;`,
 * `&#xE9;`) are decoded.
 */
import { decoded, reject, type DecodeError, type Decoded } from '@broadcast-ops/core/decoded';

/** The largest document accepted; a real vMix with a few hundred inputs sends well under 1 MiB. */
export const VMIX_MAX_XML_BYTES = 4 * 1024 * 1024;
/** Layers read per input (vMix has 10 layers per input; anything past this is ignored). */
const MAX_LAYERS = 64;
/** Nesting deeper than this is refused (vMix documents are about five levels deep). */
const MAX_DEPTH = 64;

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

/**
 * Every input's identity and layers, for per-input tally. `key` is vMix's GUID for the input: it stays when
 * inputs are reordered, while `number` changes. `layers` are the keys of the inputs this input shows as
 * layers (its `<overlay index key>` children: Multi View, Virtual Set, a PiP), in index order.
 */
export interface VmixInputRef {
  number: number;
  key: string;
  title: string;
  layers: string[];
}

export interface VmixOverlay {
  /** Overlay channel 1..n. */
  number: number;
  /** Input number on it. */
  input: number;
  title: string;
}

export interface VmixSnapshot {
  version: string;
  edition: string;
  active: number | undefined;
  preview: number | undefined;
  /** The input shown by `<active>`, when it exists. */
  activeInput: VmixInput | undefined;
  previewInput: VmixInput | undefined;
  overlays: VmixOverlay[];
  inputCount: number;
  /** Every input with a number, in document order. */
  inputRefs: VmixInputRef[];
  fadeToBlack: boolean;
  recording: boolean;
  recordingDurationSec: number | undefined;
  streaming: boolean;
}

export type VmixParseResult = Decoded<VmixSnapshot, DecodeError<'too-large' | 'not-xml' | 'not-vmix'>>;

class XmlError extends Error {}

const NAMED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

/** Decode the five XML entities and numeric character references; anything else is an error. */
function decodeXmlText(s: string): string {
  if (!s.includes('&')) return s;
  return s.replace(/&(#x[0-9a-fA-F]{1,6}|#[0-9]{1,7}|[a-zA-Z]{2,4});?/g, (whole, ref: string) => {
    if (!whole.endsWith(';')) throw new XmlError(`unterminated reference ${whole}`);
    if (ref.startsWith('#')) {
      const code = ref[1] === 'x' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      if (!Number.isFinite(code) || code < 1 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff))
        throw new XmlError(`bad character reference ${whole}`);
      return String.fromCodePoint(code);
    }
    const v = NAMED[ref];
    if (v === undefined) throw new XmlError(`unknown entity ${whole}`);
    return v;
  });
}

// An attribute: name = "value" or 'value' (no raw '<' inside, as XML requires).
const ATTR = /\s+([A-Za-z_:][-\w:.]*)\s*=\s*(?:"([^"<]*)"|'([^'<]*)')/y;
const NAME = /[A-Za-z_:][-\w:.]*/y;
const TAG_END = /\s*(\/?)>/y;
const END_TAG = /\s*>/y;

interface Tag {
  name: string;
  /** Index of the `<` and just after the `>`. */
  start: number;
  end: number;
  selfClosing: boolean;
}

const QUOTE_OR_GT = /["'>]/g;

/** The name at `at` (sticky match, no match array allocated), or undefined. */
function nameAt(xml: string, at: number): string | undefined {
  NAME.lastIndex = at;
  return NAME.test(xml) ? xml.slice(at, NAME.lastIndex) : undefined;
}

/**
 * Reads one start tag at `lt` (the `<`): its name and where it ends, quote-aware, attributes unread. Uses
 * `test()` and `lastIndex` rather than `exec()`: a 400-input document has some 20,000 quotes, and a match
 * array for each would be most of the garbage a parse makes.
 */
function readStartTag(xml: string, lt: number): Tag {
  const name = nameAt(xml, lt + 1);
  if (name === undefined) throw new XmlError(`bad tag at ${lt}`);
  let pos = lt + 1 + name.length;
  for (;;) {
    QUOTE_OR_GT.lastIndex = pos;
    if (!QUOTE_OR_GT.test(xml)) throw new XmlError(`unterminated <${name}>`);
    const at = QUOTE_OR_GT.lastIndex - 1;
    const c = xml.charCodeAt(at);
    if (c === 0x3e /* > */) {
      return { name, start: lt, end: at + 1, selfClosing: xml.charCodeAt(at - 1) === 0x2f };
    }
    const close = xml.indexOf(c === 0x22 ? '"' : "'", at + 1);
    if (close < 0) throw new XmlError(`unterminated attribute in <${name}>`);
    pos = close + 1;
  }
}

/** All attributes of a tag (raw, undecoded); throws when they are not `name="value"` pairs. */
function attributes(xml: string, tag: Tag): [string, string][] {
  const attrs: [string, string][] = [];
  let pos = tag.start + 1 + tag.name.length;
  for (;;) {
    ATTR.lastIndex = pos;
    const a = ATTR.exec(xml);
    if (!a || a.index >= tag.end) break;
    attrs.push([a[1] ?? '', a[2] ?? a[3] ?? '']);
    pos = ATTR.lastIndex;
  }
  TAG_END.lastIndex = pos;
  if (!TAG_END.exec(xml) || TAG_END.lastIndex !== tag.end)
    throw new XmlError(`bad attributes in <${tag.name}>`);
  return attrs;
}

function attrOf(xml: string, tag: Tag, name: string): string | undefined {
  for (const [k, v] of attributes(xml, tag)) if (k === name) return v;
  return undefined;
}

const NUMBER_ATTR = /\snumber\s*=\s*["'](\d{1,9})["']/y;

/** The `number` attribute of an `<input>`/`<overlay>` tag, found without reading the others. */
function numberOf(xml: string, tag: Tag): number | undefined {
  const i = xml.indexOf('number', tag.start);
  if (i < 0 || i >= tag.end) return undefined;
  NUMBER_ATTR.lastIndex = i - 1;
  const m = NUMBER_ATTR.exec(xml);
  return m && NUMBER_ATTR.lastIndex <= tag.end ? Number(m[1]) : undefined;
}

function num(v: string | undefined): number | undefined {
  if (v === undefined || v.trim() === '') return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : undefined;
}

function bool(v: string | undefined): boolean {
  return (v ?? '').trim().toLowerCase() === 'true';
}

interface RawInput {
  tag: Tag;
  /** Where its first text node ends (its text is only read for the inputs published). */
  textEnd: number;
  /** Keys of its `<overlay index key>` layer children. */
  layers: string[];
}

/** An input's key and title, read in one pass over its attributes (title falls back to its text). */
function toRef(xml: string, number: number, raw: RawInput): VmixInputRef {
  let key = '';
  let title: string | undefined;
  for (const [k, v] of attributes(xml, raw.tag)) {
    if (k === 'key') key = decodeXmlText(v);
    else if (k === 'title') title = decodeXmlText(v);
  }
  return {
    number,
    key,
    title: title ?? decodeXmlText(xml.slice(raw.tag.end, raw.textEnd).trim()),
    layers: raw.layers,
  };
}

function toInput(xml: string, raw: RawInput): VmixInput | undefined {
  const attrs = new Map(attributes(xml, raw.tag));
  const a = (name: string): string | undefined => {
    const v = attrs.get(name);
    return v === undefined ? undefined : decodeXmlText(v);
  };
  const number = num(a('number'));
  if (number === undefined) return undefined;
  return {
    number,
    key: a('key') ?? '',
    type: a('type') ?? '',
    title: a('title') ?? decodeXmlText(xml.slice(raw.tag.end, raw.textEnd).trim()),
    state: a('state') ?? '',
    positionMs: num(a('position')) ?? 0,
    durationMs: num(a('duration')) ?? 0,
    markInMs: num(a('markIn')),
    markOutMs: num(a('markOut')),
    loop: bool(a('loop')),
  };
}

const ROOT_TEXT = new Set([
  'version',
  'edition',
  'active',
  'preview',
  'fadeToBlack',
  'recording',
  'streaming',
]);

export function parseVmixXml(xml: string): VmixParseResult {
  if (xml.length > VMIX_MAX_XML_BYTES) {
    return reject('too-large', `document of ${xml.length} characters`);
  }
  try {
    return scan(xml);
  } catch (err) {
    if (err instanceof XmlError) return reject('not-xml', err.message);
    throw err;
  }
}

function scan(xml: string): VmixParseResult {
  const stack: string[] = [];
  let rootName: string | undefined;
  const rootText = new Map<string, string>();
  let recordingTag: Tag | undefined;
  /** Raw `<input>` tags of `<inputs>` by number (attributes decoded later, only for the ones published). */
  const inputs = new Map<number, RawInput>();
  let inputCount = 0;
  const overlays: { number: number; text: string }[] = [];
  /** The `<input>` being read (its layer children are added to it). */
  let currentInput: RawInput | undefined;
  // Text collection: what the current element's text goes to, if anything (root-level values, overlays).
  let textTarget: ((t: string) => void) | undefined;
  let pos = 0;
  const len = xml.length;
  while (pos < len) {
    const lt = xml.indexOf('<', pos);
    const textEnd = lt < 0 ? len : lt;
    if (textEnd > pos) {
      if (stack.length === 0) {
        if (xml.slice(pos, textEnd).trim() !== '') throw new XmlError('text outside the root element');
      } else if (textTarget) textTarget(xml.slice(pos, textEnd));
    }
    if (lt < 0) break;
    const next = xml.charCodeAt(lt + 1);
    if (next === 0x3f /* ? */) {
      const end = xml.indexOf('?>', lt + 2);
      if (end < 0) throw new XmlError('unterminated processing instruction');
      pos = end + 2;
      continue;
    }
    if (next === 0x21 /* ! */) {
      if (xml.startsWith('<!--', lt)) {
        const end = xml.indexOf('-->', lt + 4);
        if (end < 0) throw new XmlError('unterminated comment');
        pos = end + 3;
      } else if (xml.startsWith('<![CDATA[', lt)) {
        const end = xml.indexOf(']]>', lt + 9);
        if (end < 0 || stack.length === 0) throw new XmlError('bad CDATA section');
        textTarget?.(
          xml
            .slice(lt + 9, end)
            .replace(/&/g, '&amp;')
            .replace(/</g, '&lt;'),
        );
        pos = end + 3;
      } else if (xml.startsWith('<!DOCTYPE', lt) && rootName === undefined) {
        const end = xml.indexOf('>', lt);
        if (end < 0) throw new XmlError('unterminated DOCTYPE');
        pos = end + 1;
      } else throw new XmlError(`bad markup at ${lt}`);
      continue;
    }
    if (next === 0x2f /* / */) {
      const n = nameAt(xml, lt + 2);
      const open = stack.pop();
      if (n === undefined || n !== open) throw new XmlError(`</${n ?? '?'}> does not close <${open ?? ''}>`);
      END_TAG.lastIndex = lt + 2 + n.length;
      if (!END_TAG.test(xml)) throw new XmlError(`bad end tag </${open}>`);
      pos = END_TAG.lastIndex;
      textTarget = undefined;
      continue;
    }
    if (stack.length === 0 && rootName !== undefined) throw new XmlError('a second root element');
    const tag = readStartTag(xml, lt);
    pos = tag.end;
    textTarget = undefined;
    const depth = stack.length;
    if (depth === 0) rootName = tag.name;
    const parent = stack[depth - 1];
    if (depth === 1) {
      if (tag.name === 'recording') recordingTag = tag;
      if (ROOT_TEXT.has(tag.name)) {
        const name = tag.name;
        rootText.set(name, '');
        if (!tag.selfClosing) textTarget = (t) => rootText.set(name, (rootText.get(name) ?? '') + t);
      }
    } else if (depth === 2 && parent === 'inputs' && tag.name === 'input') {
      inputCount++;
      const number = numberOf(xml, tag);
      currentInput = undefined;
      if (number !== undefined && !inputs.has(number)) {
        const next = xml.indexOf('<', tag.end);
        currentInput = { tag, textEnd: tag.selfClosing || next < 0 ? tag.end : next, layers: [] };
        inputs.set(number, currentInput);
      }
    } else if (
      depth === 3 &&
      stack[1] === 'inputs' &&
      parent === 'input' &&
      tag.name === 'overlay' &&
      currentInput
    ) {
      // A layer of the input: `<overlay index="0.." key="GUID"/>` (vMix help, "Developer API").
      const key = attrOf(xml, tag, 'key');
      if (key !== undefined && key !== '' && currentInput.layers.length < MAX_LAYERS) {
        currentInput.layers.push(decodeXmlText(key));
      }
    } else if (depth === 2 && parent === 'overlays' && tag.name === 'overlay') {
      const number = numberOf(xml, tag);
      if (number !== undefined && !tag.selfClosing) {
        const o = { number, text: '' };
        overlays.push(o);
        textTarget = (t) => (o.text += t);
      }
    }
    if (!tag.selfClosing) {
      if (stack.length >= MAX_DEPTH) throw new XmlError('elements nested too deep');
      stack.push(tag.name);
    }
  }
  if (stack.length > 0) throw new XmlError(`document ends inside <${stack[stack.length - 1] ?? ''}>`);
  if (rootName === undefined) throw new XmlError('no element');
  if (rootName !== 'vmix') return reject('not-vmix', `root element <${rootName}>`);
  const text = (name: string): string | undefined => {
    const v = rootText.get(name);
    return v === undefined ? undefined : decodeXmlText(v).trim();
  };
  const pick = (n: number | undefined): VmixInput | undefined => {
    const raw = n === undefined ? undefined : inputs.get(n);
    return raw ? toInput(xml, raw) : undefined;
  };
  const active = num(text('active'));
  const preview = num(text('preview'));
  const overlayList: VmixOverlay[] = [];
  for (const o of overlays) {
    const input = num(decodeXmlText(o.text).trim());
    if (input === undefined) continue;
    overlayList.push({ number: o.number, input, title: pick(input)?.title ?? '' });
  }
  return decoded({
    version: text('version') ?? '',
    edition: text('edition') ?? '',
    active,
    preview,
    activeInput: pick(active),
    previewInput: pick(preview),
    overlays: overlayList,
    inputCount,
    inputRefs: [...inputs].map(([n, raw]) => toRef(xml, n, raw)),
    fadeToBlack: bool(text('fadeToBlack')),
    recording: bool(text('recording')),
    recordingDurationSec: recordingTag ? num(attrOf(xml, recordingTag, 'duration')) : undefined,
    streaming: bool(text('streaming')),
  });
}
