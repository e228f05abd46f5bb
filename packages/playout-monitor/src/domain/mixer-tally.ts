/**
 * Per-input tally of a vision mixer (vMix), pure: a parsed `/api` document (and, when the TCP API is used,
 * the digits of its last `TALLY OK` push) in, one tally per input out, keyed by the input's GUID (`key`).
 * Numbers and titles are carried for display only: vMix renumbers inputs when they are reordered, the key
 * stays (docs/TALLY.md, "Rule").
 *
 * Rule (docs/TALLY.md):
 *   program  the `<active>` input; every input on an overlay channel with an input on it (overlays are
 *            keyed over the program output); an input whose TCP tally digit is 1; and, recursively, every
 *            input shown as a layer (`<overlay index key>`) of a program input;
 *   preview  the `<preview>` input; an input whose TCP tally digit is 2; recursively, the layers of a
 *            preview input; an input that is both is program;
 *   off      everything else;
 *   fade to black takes the program output to black: no input is program while it is engaged (preview is
 *            kept: the preview bus is not faded);
 *   unknown  the mixer is not heard from (the io layer's stale bound or a dropped link): every input known
 *            from the last document is shown as unknown, never with its last colour.
 */
import type { VmixSnapshot } from '../protocol/vmix.ts';
import type { TallyDigit } from '../protocol/vmix-tcp.ts';

export type InputTally = 'program' | 'preview' | 'off' | 'unknown';

export interface MixerInputTally {
  /** vMix's GUID of the input: the identity every output maps. */
  key: string;
  /** Shown, never used as the key. */
  number: number;
  title: string;
  tally: InputTally;
}

/** Declared by the codec that reads it (protocol/vmix-tcp.ts). */
export type { TallyDigit };

/** Layer nesting followed at most this deep (a cycle of layers is also cut by the visited set). */
const MAX_LAYER_DEPTH = 16;

/**
 * Digits of a push agree with the document's own program and preview numbers. Digits received before the
 * document was asked for can still be older than its numbering (inputs renumbered in between): mapped through
 * the new numbers they would put another input on air, so such digits are left out and the document, which
 * is one consistent picture, decides alone (docs/TALLY.md "Rule").
 */
function digitsAgree(s: VmixSnapshot, digits: readonly TallyDigit[]): boolean {
  if (!s.fadeToBlack && s.active !== undefined && digits[s.active - 1] !== 1) return false;
  if (s.preview !== undefined && s.preview !== s.active && digits[s.preview - 1] !== 2) return false;
  return true;
}

/**
 * The tally of every input of `s`. `digits` (the last TCP push, index 0 = input 1) are taken only when they
 * were received before `s` was asked for, so the number → key mapping of `s` is at least as new as them, and
 * when they agree with it (digitsAgree).
 */
export function tallyFromSnapshot(s: VmixSnapshot, given?: readonly TallyDigit[]): MixerInputTally[] {
  const digits = given !== undefined && digitsAgree(s, given) ? given : undefined;
  const byNumber = new Map(s.inputRefs.map((i) => [i.number, i]));
  const byKey = new Map(s.inputRefs.filter((i) => i.key !== '').map((i) => [i.key, i]));
  const program = new Set<string>();
  const preview = new Set<string>();
  const mark = (set: Set<string>, key: string | undefined, depth: number): void => {
    if (key === undefined || key === '' || set.has(key) || depth > MAX_LAYER_DEPTH) return;
    set.add(key);
    for (const layer of byKey.get(key)?.layers ?? []) mark(set, layer, depth + 1);
  };
  const keyOf = (n: number | undefined): string | undefined =>
    n === undefined ? undefined : byNumber.get(n)?.key;
  if (!s.fadeToBlack) {
    mark(program, keyOf(s.active), 0);
    for (const o of s.overlays) mark(program, keyOf(o.input), 0);
  }
  mark(preview, keyOf(s.preview), 0);
  digits?.forEach((d, i) => {
    if (d === 1 && !s.fadeToBlack) mark(program, keyOf(i + 1), 0);
    else if (d === 2) mark(preview, keyOf(i + 1), 0);
  });
  return s.inputRefs.map((i) => ({
    key: i.key,
    number: i.number,
    title: i.title,
    tally: program.has(i.key) ? 'program' : preview.has(i.key) ? 'preview' : 'off',
  }));
}

/** The same inputs, every one `unknown` (the mixer is lost: its last colours are no longer known). */
export function unknownTally(inputs: readonly MixerInputTally[]): MixerInputTally[] {
  return inputs.map((i) => ({ ...i, tally: 'unknown' }));
}

/** The tally of the input with `key`, or `unknown` when the mixer does not list it (now or any more). */
export function tallyOfKey(inputs: readonly MixerInputTally[] | undefined, key: string): InputTally {
  return inputs?.find((i) => i.key === key)?.tally ?? 'unknown';
}
