/**
 * Buttons adapter (namespace `buttons`, source `buttons.device`): the types and interface a real hardware
 * buttons integration implements; the adapter itself is a placeholder, no hardware protocol is chosen yet
 * (docs/buttons.md, which describes the contract; test/buttons/contract.ts checks it).
 */
import type { Adapter } from '../../domain/adapter.ts';

export const BUTTONS_ADAPTER_NAME = 'buttons.device';
export const BUTTONS_TARGET = 'buttons';

export interface ButtonsDeviceInfo {
  /** Path-safe id: `[a-z0-9_]+`. */
  id: string;
  rows: number;
  columns: number;
}

/** Value at `buttons.device.<id>.key.<index>`. */
export interface ButtonKeyState {
  deviceId: string;
  keyIndex: number;
  row: number;
  column: number;
  pressed: boolean;
  text: string;
  /** `#rrggbb` */
  colour: string;
}

/** Command actions: `press` (down then up), `down`, `up`, `setKey` (params `text`, `colour`). */
export type ButtonsAction = 'press' | 'down' | 'up' | 'setKey';

/** Events on `buttons.device.<id>.key.<index>`: `pressed`, `released` with data `{deviceId, keyIndex}`. */
export type ButtonsEvent = 'pressed' | 'released';

export interface ButtonsAdapter extends Adapter {
  /** Devices this adapter currently knows. */
  devices(): ButtonsDeviceInfo[];
  /** `false` for the placeholder: a client can tell an honest stub from a working integration. */
  readonly implemented: boolean;
}

export function keyPath(deviceId: string, keyIndex: number): string {
  return `buttons.device.${deviceId}.key.${keyIndex}`;
}
