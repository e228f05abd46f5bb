/**
 * Companion's button state as JSON for any app (docs/console.md "Button state API"): what the bridge's
 * surface and its subscribed absolute locations show (text, colours, pressed, a hash of the bitmap), with
 * the hub's offset as `seq`. A reader that passes back `since` (and the `epoch` it got) receives only the
 * buttons changed after it; a different epoch or no `since` gets everything. Companion's own HTTP API can
 * press buttons but not read them (bitfocus/companion#1695, #2332; colours as data: #2162, #3786).
 */
import { createHash } from 'node:crypto';
import type { StateEntry } from '../domain/state-store.ts';

const SURFACE_KEY = /^companion\.device\.[a-z0-9_]+\.key\.\d+$/;
const LOCATION = /^companion\.page\.\d+\.row\.\d+\.column\.\d+$/;

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

/** The buttons to send: all of them, or those changed after `since` when the epoch is the same. */
export function buttonsSince(
  entries: Iterable<StateEntry>,
  epoch: string,
  query: { since?: string | undefined; epoch?: string | undefined },
): { full: boolean; buttons: ButtonView[] } | { error: string } {
  let since: number | undefined;
  if (query.since !== undefined) {
    since = Number(query.since);
    if (!Number.isSafeInteger(since) || since < 0) return { error: 'since must be an offset (integer ≥ 0)' };
  }
  const full = since === undefined || query.epoch !== epoch;
  const buttons: ButtonView[] = [];
  for (const e of entries) {
    if (!isButtonPath(e.path)) continue;
    if (!full && e.offset <= (since as number)) continue;
    buttons.push(buttonView(e));
  }
  buttons.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { full, buttons };
}
