/**
 * Companion's button state as JSON for any app (docs/console.md "Button state API"): what the bridge's
 * surface and its subscribed absolute locations show (text, colours, pressed, a hash of the bitmap), with
 * the hub's offset as `seq`. A reader that passes back `since` (and the `epoch` it got) receives only the
 * buttons changed after it; a different epoch or no `since` gets everything. Companion's own HTTP API can
 * press buttons but not read them (bitfocus/companion#1695, #2332; colours as data: #2162, #3786). The
 * declared outputs Companion streams (`companion.variables.<group>.<variable>`, ApiVersion ≥ 1.7.0) the same way.
 */
import { createHash } from 'node:crypto';
import type { StateEntry } from '../domain/state-store.ts';

const SURFACE_KEY = /^companion\.device\.[a-z0-9_]+\.key\.\d+$/;
const LOCATION = /^companion\.page\.\d+\.row\.\d+\.column\.\d+$/;
const VARIABLE = /^companion\.variables\.[a-z0-9_]+\.[a-z0-9_]+$/;

export interface ButtonView {
  path: string;
  seq: number;
  stale: boolean;
  [field: string]: unknown;
}

export function isButtonPath(path: string): boolean {
  return SURFACE_KEY.test(path) || LOCATION.test(path);
}

/** One button: its style fields as the adapter stored them, the bitmap replaced by its SHA-256 (16 hex). */
export function buttonView(e: Pick<StateEntry, 'path' | 'value' | 'offset' | 'stale'>): ButtonView {
  const v = (e.value !== null && typeof e.value === 'object' ? e.value : {}) as Record<string, unknown>;
  const { image, ...style } = v;
  return {
    path: e.path,
    ...style,
    ...(typeof image === 'string'
      ? { imageHash: createHash('sha256').update(image).digest('hex').slice(0, 16) }
      : {}),
    seq: e.offset,
    stale: e.stale,
  };
}

/** A Companion variable as the JSON API serves it: the decoded string the adapter published. */
export interface VariableView {
  path: string;
  value: unknown;
  seq: number;
  stale: boolean;
}

export function isVariablePath(path: string): boolean {
  return VARIABLE.test(path);
}

export function variableView(e: Pick<StateEntry, 'path' | 'value' | 'offset' | 'stale'>): VariableView {
  return { path: e.path, value: e.value, seq: e.offset, stale: e.stale };
}

/**
 * The entries to send, in path order: every one that `matches`, or only those changed after `since` when the
 * reader's epoch is this hub's (the hub's offsets restart their meaning with a new epoch).
 */
export function changedSince<T extends { path: string }>(
  entries: Iterable<StateEntry>,
  epoch: string,
  query: { since?: string | undefined; epoch?: string | undefined },
  matches: (path: string) => boolean,
  view: (e: StateEntry) => T,
): { full: boolean; items: T[] } | { error: string } {
  let since: number | undefined;
  if (query.since !== undefined) {
    since = Number(query.since);
    if (!Number.isSafeInteger(since) || since < 0) return { error: 'since must be an offset (integer ≥ 0)' };
  }
  const full = since === undefined || query.epoch !== epoch;
  const items: T[] = [];
  for (const e of entries) {
    if (!matches(e.path)) continue;
    if (!full && e.offset <= (since as number)) continue;
    items.push(view(e));
  }
  items.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { full, items };
}
