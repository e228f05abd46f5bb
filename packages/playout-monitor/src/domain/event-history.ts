/**
 * The short event history the pages show (docs/OUTPUTS.md, "Event history"): a device's state changes and
 * its link lost or back, newest last, at most `max` entries (the oldest are dropped). Pure: the caller
 * passes the time.
 */
export type DeviceEventKind = 'state' | 'link_lost' | 'link_up';

export interface DeviceEvent {
  /** Epoch milliseconds. */
  at: number;
  id: number;
  name: string;
  kind: DeviceEventKind;
  from?: string;
  to?: string;
  reason?: string;
}

interface Shown {
  id: number;
  name: string;
  state: string;
  connected: boolean;
  reason?: string | undefined;
}

export const EVENT_HISTORY_MAX = 50;

export class EventHistory {
  readonly #events: DeviceEvent[] = [];

  constructor(readonly max = EVENT_HISTORY_MAX) {}

  /** Compare what was shown with what is shown now; the events it makes (none when nothing that counts changed). */
  record(before: Shown | undefined, after: Shown, at: number): DeviceEvent[] {
    if (!before) return [];
    const made: DeviceEvent[] = [];
    const base = { at, id: after.id, name: after.name };
    const why = after.reason !== undefined ? { reason: after.reason } : {};
    if (before.connected && !after.connected) made.push({ ...base, kind: 'link_lost', ...why });
    else if (!before.connected && after.connected) made.push({ ...base, kind: 'link_up' });
    if (before.state !== after.state)
      made.push({ ...base, kind: 'state', from: before.state, to: after.state, ...why });
    for (const e of made) this.#events.push(e);
    if (this.#events.length > this.max) this.#events.splice(0, this.#events.length - this.max);
    return made;
  }

  list(): readonly DeviceEvent[] {
    return this.#events;
  }
}
