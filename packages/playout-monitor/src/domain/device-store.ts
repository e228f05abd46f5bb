/**
 * The store of normalised device states and the change-event stream the outputs subscribe to.
 * A change event fires only when a visible field changed; `updated` alone (a device repeating itself,
 * e.g. CasparCG's 50 bundles per second of a paused clip) does not fire one.
 */
import type { Clock } from '@broadcast-ops/core';
import { initialState, type DeviceIdentity, type DevicePatch, type DeviceState } from './device-state.ts';

export interface DeviceChange {
  id: number;
  state: Readonly<DeviceState>;
  previous: Readonly<DeviceState>;
  /** Names of the fields that changed. */
  fields: (keyof DeviceState)[];
}

/** Equality for state fields: primitives by value, the small vMix objects and lists by content. */
export function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  return JSON.stringify(a) === JSON.stringify(b);
}

export type ChangeListener = (change: DeviceChange) => void;

export class DeviceStore {
  readonly #devices = new Map<number, DeviceState>();
  readonly #listeners = new Set<ChangeListener>();
  readonly #clock: Clock;

  constructor(clock: Clock, identities: DeviceIdentity[]) {
    this.#clock = clock;
    const now = clock.now();
    for (const identity of identities) this.#devices.set(identity.id, initialState(identity, now));
  }

  get(id: number): Readonly<DeviceState> | undefined {
    return this.#devices.get(id);
  }

  /** Snapshot copies in configuration order. */
  list(): DeviceState[] {
    return [...this.#devices.values()].map((d) => ({ ...d }));
  }

  onChange(listener: ChangeListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * A new configuration, applied per device: `identities` in their configured order. A device whose id
   * is kept keeps its state (a new name is applied as a change event); `reset` ids start again from the
   * initial state (their input changed: a new address, port or kind); ids not listed are removed; new
   * ids are added. Returns the change events it emitted.
   */
  reconfigure(identities: DeviceIdentity[], reset: ReadonlySet<number>): DeviceChange[] {
    const now = this.#clock.now();
    const before = new Map(this.#devices);
    const changes: DeviceChange[] = [];
    this.#devices.clear();
    for (const identity of identities) {
      const current = before.get(identity.id);
      if (!current || reset.has(identity.id)) {
        const next = initialState(identity, now);
        this.#devices.set(identity.id, next);
        changes.push({ id: identity.id, state: next, previous: current ?? next, fields: ['state', 'name'] });
        continue;
      }
      if (current.name === identity.name) {
        this.#devices.set(identity.id, current);
        continue;
      }
      const next = { ...current, name: identity.name };
      this.#devices.set(identity.id, next);
      changes.push({ id: identity.id, state: next, previous: current, fields: ['name'] });
    }
    for (const change of changes) this.#emit(change);
    return changes;
  }

  #emit(change: DeviceChange): void {
    for (const listener of this.#listeners) {
      try {
        listener(change);
      } catch {
        // One broken output must not stop the others nor the input that caused the change.
      }
    }
  }

  /**
   * Apply a reducer's patch. `fromDevice` marks data that came from the device (it refreshes `updated`);
   * state changes made by the monitor itself (a timeout) refresh `updated` only when something changed.
   */
  apply(id: number, patch: DevicePatch, fromDevice: boolean): DeviceChange | undefined {
    const current = this.#devices.get(id);
    if (!current) return undefined;
    const next: DeviceState = { ...current };
    const fields: (keyof DeviceState)[] = [];
    for (const [key, value] of Object.entries(patch) as [keyof DevicePatch, unknown][]) {
      if (sameValue(current[key], value)) continue;
      if (value === undefined) {
        if (!(key in current)) continue;
        // eslint-disable-next-line @typescript-eslint/no-dynamic-delete
        delete (next as unknown as Record<string, unknown>)[key];
      } else {
        (next as unknown as Record<string, unknown>)[key] = value;
      }
      fields.push(key);
    }
    if (fromDevice || fields.length > 0) next.updated = this.#clock.now();
    this.#devices.set(id, next);
    if (fields.length === 0) return undefined;
    const change: DeviceChange = { id, state: next, previous: current, fields };
    this.#emit(change);
    return change;
  }
}
