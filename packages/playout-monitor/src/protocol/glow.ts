/**
 * The consumer-to-provider half of Glow (Lawo "Ember+ Documentation", Glow DTD 2.x), decoded with a
 * BER reader (ITU-T X.690 section 8.1) that cannot loop: every TLV's length must lie inside its parent,
 * indefinite lengths (X.690 8.1.3.6) are followed to their end-of-contents octets inside the parent,
 * nesting is limited to `GLOW_MAX_DEPTH`, and each step consumes at least two bytes, so the work is
 * linear in the payload whatever it contains. Values are not decoded beyond what a read-only provider
 * needs (numbers, paths, command numbers, and whether a parameter carries a value).
 *
 * Only what a provider acts on is extracted: GetDirectory / Subscribe / Unsubscribe commands at the root
 * or inside a (qualified) node or parameter, and set-value requests (a parameter with a value in its
 * contents). Elements the provider does not have (matrices, functions, templates, streams) are ignored
 * after their BER structure was checked. Anything structurally wrong is refused (code `malformed`, the
 * message naming the fault); inside, the walk throws a `GlowError` that `decodeGlowRequests` turns into it.
 */
import { decoded, reject, type DecodeError, type Decoded } from '@broadcast-ops/core/decoded';

export const GLOW_MAX_DEPTH = 32;
/** Requests one message may carry (a real consumer sends one or a few). */
export const GLOW_MAX_REQUESTS = 256;

class GlowError extends Error {
  override readonly name = 'GlowError';
}

const UNIVERSAL = 0;
const APPLICATION = 1;
const CONTEXT = 2;

export interface Tlv {
  cls: number;
  constructed: boolean;
  tag: number;
  /** Primitive contents, or the whole contents of a constructed TLV. */
  value: Buffer;
  children: Tlv[];
}

/** Decode consecutive TLVs filling `buf` exactly. */
function decodeBer(buf: Buffer): Tlv[] {
  const out: Tlv[] = [];
  let offset = 0;
  while (offset < buf.length) {
    const [tlv, next] = readTlv(buf, offset, buf.length, 0);
    out.push(tlv);
    offset = next;
  }
  return out;
}

function readTlv(buf: Buffer, start: number, limit: number, depth: number): [Tlv, number] {
  if (depth > GLOW_MAX_DEPTH) throw new GlowError(`nesting deeper than ${GLOW_MAX_DEPTH}`);
  let p = start;
  if (p >= limit) throw new GlowError('TLV expected, end of contents reached');
  const first = buf[p++] ?? 0;
  const cls = first >>> 6;
  const constructed = (first & 0x20) !== 0;
  let tag = first & 0x1f;
  if (tag === 0x1f) {
    tag = 0;
    for (let n = 0; ; n++) {
      if (p >= limit) throw new GlowError('tag runs past its container');
      if (n >= 4) throw new GlowError('tag number too large');
      const b = buf[p++] ?? 0;
      tag = tag * 128 + (b & 0x7f);
      if ((b & 0x80) === 0) break;
    }
  }
  if (p >= limit) throw new GlowError('length runs past its container');
  const lb = buf[p++] ?? 0;
  if (lb === 0x80) {
    // Indefinite length: constructed only; children until the end-of-contents octets 00 00.
    if (!constructed) throw new GlowError('indefinite length on a primitive TLV');
    const children: Tlv[] = [];
    const contentStart = p;
    for (;;) {
      if (p + 2 > limit) throw new GlowError('indefinite length without end-of-contents');
      if (buf[p] === 0 && buf[p + 1] === 0) {
        const value = buf.subarray(contentStart, p);
        return [{ cls, constructed, tag, value, children }, p + 2];
      }
      const [child, next] = readTlv(buf, p, limit, depth + 1);
      children.push(child);
      p = next;
    }
  }
  let length: number;
  if (lb < 0x80) length = lb;
  else {
    const n = lb & 0x7f;
    if (n > 4 || n === 0x7f) throw new GlowError(`length of ${n} bytes`);
    length = 0;
    for (let k = 0; k < n; k++) {
      if (p >= limit) throw new GlowError('length runs past its container');
      length = length * 256 + (buf[p++] ?? 0);
    }
  }
  const end = p + length;
  if (end > limit) throw new GlowError(`declared length ${length} runs past its container`);
  const value = buf.subarray(p, end);
  const children: Tlv[] = [];
  if (constructed) {
    let q = p;
    while (q < end) {
      const [child, next] = readTlv(buf, q, end, depth + 1);
      children.push(child);
      q = next;
    }
  }
  return [{ cls, constructed, tag, value, children }, end];
}

// Glow application tags (Glow DTD ASN.1 module).
export const GLOW_TAGS = {
  Root: 0,
  Parameter: 1,
  Command: 2,
  Node: 3,
  ElementCollection: 4,
  StreamEntry: 5,
  StreamCollection: 6,
  StringIntegerPair: 7,
  StringIntegerCollection: 8,
  QualifiedParameter: 9,
  QualifiedNode: 10,
  RootElementCollection: 11,
  StreamDescription: 12,
  Matrix: 13,
  Target: 14,
  Source: 15,
  Connection: 16,
  QualifiedMatrix: 17,
  Label: 18,
  Function: 19,
  QualifiedFunction: 20,
  TupleItemDescription: 21,
  Invocation: 22,
  InvocationResult: 23,
  Template: 24,
  QualifiedTemplate: 25,
} as const;

export const COMMAND = { Subscribe: 30, Unsubscribe: 31, GetDirectory: 32, Invoke: 33 } as const;

export type GlowRequest =
  | { kind: 'getDirectory'; path: number[] }
  | { kind: 'subscribe'; path: number[] }
  | { kind: 'unsubscribe'; path: number[] }
  | { kind: 'invoke'; path: number[] }
  | { kind: 'setValue'; path: number[] };

function isApp(t: Tlv, tag: number): boolean {
  return t.cls === APPLICATION && t.tag === tag;
}

/** The single inner TLV of an explicit context tag `[n]`. */
function explicit(t: Tlv, what: string): Tlv {
  if (!t.constructed || t.children.length !== 1)
    throw new GlowError(`${what}: [${t.tag}] must hold one value`);
  const [only] = t.children;
  if (!only) throw new GlowError(`${what}: empty`);
  return only;
}

function integer(t: Tlv, what: string): number {
  if (t.cls !== UNIVERSAL || t.tag !== 2 || t.constructed) throw new GlowError(`${what}: not an INTEGER`);
  if (t.value.length < 1 || t.value.length > 4)
    throw new GlowError(`${what}: INTEGER of ${t.value.length} bytes`);
  return t.value.readIntBE(0, t.value.length);
}

function relativeOid(t: Tlv, what: string): number[] {
  if (t.cls !== UNIVERSAL || t.tag !== 13 || t.constructed)
    throw new GlowError(`${what}: not a RELATIVE-OID`);
  const arcs: number[] = [];
  let arc = 0;
  let bytes = 0;
  for (const b of t.value) {
    if (++bytes > 4) throw new GlowError(`${what}: arc too large`);
    arc = arc * 128 + (b & 0x7f);
    if ((b & 0x80) === 0) {
      arcs.push(arc);
      arc = 0;
      bytes = 0;
    }
  }
  if (bytes !== 0) throw new GlowError(`${what}: last arc unterminated`);
  if (arcs.length === 0 || arcs.length > GLOW_MAX_DEPTH) throw new GlowError(`${what}: ${arcs.length} arcs`);
  return arcs;
}

/** The requests in one EmBER payload (a Glow Root), or why it is not a well-formed one. */
export function decodeGlowRequests(payload: Buffer): Decoded<GlowRequest[], DecodeError<'malformed'>> {
  try {
    return decoded(requestsOf(payload));
  } catch (err) {
    if (err instanceof GlowError) return reject('malformed', err.message);
    throw err;
  }
}

function requestsOf(payload: Buffer): GlowRequest[] {
  const top = decodeBer(payload);
  const requests: GlowRequest[] = [];
  const push = (r: GlowRequest): void => {
    if (requests.length >= GLOW_MAX_REQUESTS) throw new GlowError(`more than ${GLOW_MAX_REQUESTS} requests`);
    requests.push(r);
  };
  for (const root of top) {
    if (!isApp(root, GLOW_TAGS.Root) || !root.constructed) throw new GlowError('not a Glow Root');
    if (root.children.length !== 1) throw new GlowError('a Glow Root holds exactly one choice');
    const [choice] = root.children;
    if (!choice) throw new GlowError('empty Glow Root');
    if (choice.cls !== APPLICATION || !choice.constructed)
      throw new GlowError('Glow Root choice is not an application tag');
    if (choice.tag !== GLOW_TAGS.RootElementCollection) continue; // streams, invocation results: nothing to do
    for (const item of choice.children) {
      if (item.cls !== CONTEXT || item.tag !== 0)
        throw new GlowError('RootElementCollection item is not [0]');
      element(explicit(item, 'root element'), [], true, push);
    }
  }
  return requests;
}

function element(el: Tlv, parent: number[], atRoot: boolean, push: (r: GlowRequest) => void): void {
  if (el.cls !== APPLICATION || !el.constructed)
    throw new GlowError('element is not a constructed application tag');
  switch (el.tag) {
    case GLOW_TAGS.Command:
      push(command(el, parent));
      return;
    case GLOW_TAGS.Node:
    case GLOW_TAGS.Parameter:
    case GLOW_TAGS.QualifiedNode:
    case GLOW_TAGS.QualifiedParameter: {
      const qualified = el.tag === GLOW_TAGS.QualifiedNode || el.tag === GLOW_TAGS.QualifiedParameter;
      if (qualified && !atRoot) throw new GlowError('a qualified element inside a collection');
      const isParameter = el.tag === GLOW_TAGS.Parameter || el.tag === GLOW_TAGS.QualifiedParameter;
      let path: number[] | undefined;
      let hasValue = false;
      let children: Tlv | undefined;
      for (const f of el.children) {
        if (f.cls !== CONTEXT) throw new GlowError('element field is not context-tagged');
        if (f.tag === 0) {
          const v = explicit(f, 'number/path');
          path = qualified ? relativeOid(v, 'path') : [...parent, integer(v, 'number')];
        } else if (f.tag === 1) {
          const contents = explicit(f, 'contents');
          if (contents.cls !== UNIVERSAL || contents.tag !== 17 || !contents.constructed)
            throw new GlowError('contents is not a SET');
          if (isParameter) hasValue = contents.children.some((c) => c.cls === CONTEXT && c.tag === 2);
        } else if (f.tag === 2) {
          children = explicit(f, 'children');
          if (!isApp(children, GLOW_TAGS.ElementCollection))
            throw new GlowError('children is not an ElementCollection');
        }
      }
      if (!path) throw new GlowError('element without number or path');
      if (path.length > GLOW_MAX_DEPTH) throw new GlowError('path too deep');
      if (children) {
        for (const item of children.children) {
          if (item.cls !== CONTEXT || item.tag !== 0)
            throw new GlowError('ElementCollection item is not [0]');
          element(explicit(item, 'child element'), path, false, push);
        }
      } else if (isParameter && hasValue) {
        push({ kind: 'setValue', path });
      }
      return;
    }
    default:
      // Matrix, Function, Template and their qualified forms: this provider has none.
      return;
  }
}

function command(el: Tlv, path: number[]): GlowRequest {
  let number: number | undefined;
  for (const f of el.children) {
    if (f.cls !== CONTEXT) throw new GlowError('command field is not context-tagged');
    if (f.tag === 0) number = integer(explicit(f, 'command number'), 'command number');
  }
  switch (number) {
    case COMMAND.GetDirectory:
      return { kind: 'getDirectory', path };
    case COMMAND.Subscribe:
      return { kind: 'subscribe', path };
    case COMMAND.Unsubscribe:
      return { kind: 'unsubscribe', path };
    case COMMAND.Invoke:
      return { kind: 'invoke', path };
    default:
      throw new GlowError(`unknown command ${String(number)}`);
  }
}
