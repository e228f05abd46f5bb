/**
 * Client command → Satellite messages (docs/companion.md "Commands"). Pure: decides what to send, or why the
 * connected Companion cannot do it, before anything reaches the wire.
 *
 * - `press` / `down` / `up` / `rotate` on the bridge's own surface (current page): `params.keyIndex`, or
 *   `params.row` + `params.column`, or path `companion.device.<id>.key.<index>` → KEY-PRESS / KEY-ROTATE.
 * - The same at an absolute location: path `companion.page.<p>.row.<r>.column.<c>`, `companion.page.<p>.bank.<b>`
 *   (Companion's legacy 1-based bank on an 8-wide grid), or `params.page` with `row`+`column` or `bank`
 *   → ADD-SUB + SUB-PRESS / SUB-ROTATE, only when CAPS SUBSCRIPTIONS=1.
 * - `watch` / `unwatch` at an absolute location → ADD-SUB / REMOVE-SUB only: its button state is published
 *   at `companion.page.<p>.row.<r>.column.<c>` without pressing it (subscriptions only).
 * - `setVariable` with `params.variable` (a declared input id) and `params.value` → SET-VARIABLE-VALUE.
 */
import type { CompanionFeatures } from './features.ts';
import { segment } from './features.ts';

export interface SurfaceShape {
  deviceId: string;
  keysTotal: number;
  keysPerRow: number;
  inputs: ReadonlySet<string>;
}

export type Target =
  { kind: 'key'; keyIndex: number } | { kind: 'location'; page: number; row: number; column: number };

export type Plan =
  | { kind: 'press'; target: Target; pressed: boolean[] }
  | { kind: 'rotate'; target: Target; direction: number }
  | { kind: 'variable'; variable: string; value: string }
  | { kind: 'watch' | 'unwatch'; target: Extract<Target, { kind: 'location' }> }
  | { kind: 'reject'; reason: string };

const PRESS: Record<string, boolean[]> = {
  press: [true, false],
  down: [true],
  up: [false],
  release: [false],
};

function int(v: unknown): number | undefined {
  if (typeof v === 'number' && Number.isInteger(v)) return v;
  if (typeof v === 'string' && /^-?\d+$/.test(v)) return Number(v);
  return undefined;
}

function targetOf(path: string, params: Record<string, unknown>, s: SurfaceShape): Target | string {
  const seg = path.split('.');
  if (
    seg[0] === 'companion' &&
    seg[1] === 'page' &&
    seg.length === 7 &&
    seg[3] === 'row' &&
    seg[5] === 'column'
  )
    return loc(int(seg[2]), int(seg[4]), int(seg[6]));
  if (seg[0] === 'companion' && seg[1] === 'page' && seg.length === 5 && seg[3] === 'bank')
    return bank(int(seg[2]), int(seg[4]));
  if (params['page'] !== undefined) {
    if (params['bank'] !== undefined) return bank(int(params['page']), int(params['bank']));
    return loc(int(params['page']), int(params['row']), int(params['column']));
  }
  let index: number | undefined;
  if (params['keyIndex'] !== undefined) {
    index = int(params['keyIndex']);
    if (index === undefined) return 'params.keyIndex must be an integer';
  } else if (params['row'] !== undefined || params['column'] !== undefined) {
    const r = int(params['row']);
    const c = int(params['column']);
    if (r === undefined || c === undefined || r < 0 || c < 0 || c >= s.keysPerRow)
      return `row/column out of the ${s.keysPerRow}-wide grid`;
    index = r * s.keysPerRow + c;
  } else if (seg[0] === 'companion' && seg[1] === 'device' && seg[3] === 'key' && seg.length === 5) {
    if (seg[2] !== segment(s.deviceId))
      return `device ${seg[2]} is not this bridge's surface (${segment(s.deviceId)})`;
    index = int(seg[4]);
  } else {
    return 'no key given: use params.keyIndex, params.row/column, params.page with row/column or bank, or a key path';
  }
  if (index === undefined || index < 0 || index >= s.keysTotal)
    return `key index out of range 0..${s.keysTotal - 1}`;
  return { kind: 'key', keyIndex: index };
}

function loc(page: number | undefined, row: number | undefined, column: number | undefined): Target | string {
  if (page === undefined || row === undefined || column === undefined || page < 1 || row < 0 || column < 0)
    return 'absolute location needs page ≥ 1, row ≥ 0, column ≥ 0';
  return { kind: 'location', page, row, column };
}

function bank(page: number | undefined, b: number | undefined): Target | string {
  if (b === undefined || b < 1) return 'bank is 1-based';
  return loc(page, Math.floor((b - 1) / 8), (b - 1) % 8);
}

export function planCommand(
  action: string,
  path: string,
  params: Record<string, unknown>,
  surface: SurfaceShape,
  f: CompanionFeatures,
  apiVersion: string,
): Plan {
  if (action === 'setVariable' || action === 'set_variable') {
    if (!f.variables)
      return {
        kind: 'reject',
        reason: `SET-VARIABLE-VALUE needs ApiVersion ≥ 1.7.0; Companion reports ${apiVersion}`,
      };
    const variable = params['variable'];
    if (typeof variable !== 'string' || !surface.inputs.has(variable))
      return {
        kind: 'reject',
        reason: `params.variable must be a declared input (${[...surface.inputs].join(', ') || 'none declared'})`,
      };
    const value = params['value'];
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean')
      return { kind: 'reject', reason: 'params.value must be a string, number or boolean' };
    return { kind: 'variable', variable, value: String(value) };
  }
  const pressed = PRESS[action];
  const watch = action === 'watch' || action === 'unwatch' ? action : undefined;
  if (!pressed && action !== 'rotate' && !watch)
    return {
      kind: 'reject',
      reason: `unknown action "${action}" (press, down, up, rotate, watch, unwatch, setVariable)`,
    };
  const target = targetOf(path, params, surface);
  if (typeof target === 'string') return { kind: 'reject', reason: target };
  if (watch && target.kind !== 'location')
    return {
      kind: 'reject',
      reason: `${watch} takes an absolute location (companion.page.<p>.row.<r>.column.<c>); the surface's own keys are always published`,
    };
  if (target.kind === 'location' && !f.subscriptions) {
    return {
      kind: 'reject',
      reason:
        (f.caps
          ? 'absolute page/row/column needs Companion subscriptions (CAPS SUBSCRIPTIONS=0: enable satellite subscriptions in Companion settings)'
          : `absolute page/row/column needs ADD-SUB/SUB-PRESS (ApiVersion ≥ 1.10.0); Companion reports ${apiVersion}`) +
        (watch ? "; the bridge's surface keys (companion.device.<id>.key.<n>) are still published" : ''),
    };
  }
  if (watch && target.kind === 'location') return { kind: watch, target };
  if (pressed) return { kind: 'press', target, pressed };
  if (!f.rotate)
    return { kind: 'reject', reason: `KEY-ROTATE needs ApiVersion ≥ 1.3.0; Companion reports ${apiVersion}` };
  const direction = int(params['direction'] ?? 1);
  if (direction === undefined || direction === 0)
    return { kind: 'reject', reason: 'params.direction must be a non-zero integer' };
  if (Math.abs(direction) > 1 && !f.rotaryAmount)
    return {
      kind: 'reject',
      reason: 'step counts other than ±1 need CAPS ROTARY_AMOUNT (ApiVersion ≥ 1.14.0)',
    };
  return { kind: 'rotate', target, direction };
}
