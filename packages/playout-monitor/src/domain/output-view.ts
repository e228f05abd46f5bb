/**
 * What every output shows (WebSocket, Ember+, TSL UMD, the pages): the device store's state, with two
 * rules laid over it.
 *
 * - Stale guard: a device whose last data is older than its stale timeout is never shown as playing or
 *   recording. The inputs already turn such a device `offline`; the guard makes the outputs safe even if
 *   an input were late to do so (the state shown becomes `offline`, `stale: true`, reason given, last
 *   file name and timecode kept).
 * - Simulation: the control API can lay a simulated state over one device (`simulated: true`). The real
 *   input keeps running underneath and shows again as soon as the simulation ends.
 *
 * The store can be swapped (a new configuration applied without a restart): listeners get `reset`.
 * Time is injected; `tick()` is called by the io layer (every 250 ms while `needsTick`) to apply the stale
 * guard, advance a simulated timecode and end simulations. The age of a device's data is measured on the monotonic clock
 * from the moment its `updated` was seen to move (on a change event or a tick).
 */
import { EventHistory, type DeviceEvent } from './event-history.ts';
import type { Clock } from '@broadcast-ops/core';
import { sameValue, type DeviceChange, type DeviceStore } from './device-store.ts';
import type { DeviceState, PlayState } from './device-state.ts';
import { unknownTally } from './mixer-tally.ts';
import { framesToTimecode, timecodeToFrames, ZERO_TIMECODE } from './timecode.ts';

export interface OutputDevice extends DeviceState {
  /** How old data may get before the device is not shown as playing (ms). */
  staleAfterMs: number;
  /** The stale guard applies (the state shown is `offline`). */
  stale?: boolean;
  /** A simulated state from the control API is shown instead of the device's own. */
  simulated?: boolean;
}

export interface SimulationRequest {
  state: PlayState;
  timecode?: string | undefined;
  filename?: string | undefined;
  /** Ends by itself after this long; absent = until ended through the API. */
  durationSec?: number | undefined;
}

interface Simulation {
  request: SimulationRequest;
  startedMs: number;
  startFrames: number;
  endsAtMs: number | undefined;
}

export type ViewListener = (device: Readonly<OutputDevice>, fields: readonly string[]) => void;

const VISIBLE_KEYS: readonly (keyof OutputDevice)[] = [
  'name',
  'type',
  'ip',
  'port',
  'state',
  'timecode',
  'filename',
  'framerate',
  'connected',
  'positionMs',
  'durationMs',
  'remainingMs',
  'loop',
  'reason',
  'stale',
  'simulated',
  'staleAfterMs',
  // vMix mixer state and per-input tally (domain/mixer-tally.ts).
  'preview',
  'overlays',
  'fadeToBlack',
  'recording',
  'streaming',
  'inputs',
  'tallySource',
  // CasparCG: the watched layers, each with its own state.
  'layers',
];

function diff(a: OutputDevice | undefined, b: OutputDevice): string[] {
  if (!a) return ['*'];
  const out: string[] = [];
  for (const k of VISIBLE_KEYS) if (!sameValue(a[k], b[k])) out.push(k);
  return out;
}

export class OutputView {
  readonly #clock: Clock;
  #store: DeviceStore | undefined;
  #unsubscribe: (() => void) | undefined;
  #staleAfter = new Map<number, number>();
  readonly #simulations = new Map<number, Simulation>();
  /** When (monotonic ms) each device's `updated` was last seen to move: the age of its data measured
   * on the monotonic clock, so a step of the wall clock can neither hide nor fake staleness. */
  readonly #lastData = new Map<number, { updated: number; atMs: number }>();
  /** The last view each listener was told about, per device id. */
  readonly #shown = new Map<number, OutputDevice>();
  readonly #listeners = new Set<ViewListener>();
  readonly #history = new EventHistory();
  readonly #eventListeners = new Set<(e: DeviceEvent) => void>();
  readonly #resetListeners = new Set<() => void>();

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Show `store` (replacing the previous one): `staleAfterMs` per device id. */
  attach(store: DeviceStore, staleAfterMs: ReadonlyMap<number, number>): void {
    this.#unsubscribe?.();
    this.#store = store;
    this.#staleAfter = new Map(staleAfterMs);
    for (const id of [...this.#simulations.keys()]) if (!store.get(id)) this.#simulations.delete(id);
    this.#shown.clear();
    this.#lastData.clear();
    for (const d of store.list()) this.#shown.set(d.id, this.#compose(d));
    this.#unsubscribe = store.onChange((c) => {
      this.#onStoreChange(c);
    });
    for (const l of this.#resetListeners) l();
  }

  /** New stale timeouts (a configuration change); the devices' state and data age are kept. */
  setStaleAfter(staleAfterMs: ReadonlyMap<number, number>): void {
    this.#staleAfter = new Map(staleAfterMs);
    for (const id of [...this.#shown.keys()]) {
      if (!this.#store?.get(id)) {
        this.#shown.delete(id);
        this.#lastData.delete(id);
        this.#simulations.delete(id);
      } else this.#refresh(id);
    }
    for (const l of this.#resetListeners) l();
  }

  get store(): DeviceStore | undefined {
    return this.#store;
  }

  /**
   * Every device as shown, with `updated` the time of its latest data (the store's, which moves without a
   * change event while nothing visible changes; the tick that would copy it over may be asleep).
   */
  list(): OutputDevice[] {
    return [...this.#shown.values()].map((d) => ({
      ...d,
      updated: Math.max(d.updated, this.#store?.get(d.id)?.updated ?? d.updated),
    }));
  }

  get(id: number): Readonly<OutputDevice> | undefined {
    return this.#shown.get(id);
  }

  onChange(listener: ViewListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The set of devices changed (a new configuration): outputs rebuild from `list()`. */
  onReset(listener: () => void): () => void {
    this.#resetListeners.add(listener);
    return () => this.#resetListeners.delete(listener);
  }

  simulate(id: number, request: SimulationRequest): Readonly<OutputDevice> | undefined {
    const device = this.#store?.get(id);
    if (!device) return undefined;
    const now = this.#clock.monotonicMs();
    const startFrames = timecodeToFrames(request.timecode ?? ZERO_TIMECODE, device.framerate) ?? 0;
    this.#simulations.set(id, {
      request,
      startedMs: now,
      startFrames,
      endsAtMs: request.durationSec !== undefined ? now + request.durationSec * 1000 : undefined,
    });
    this.#refresh(id);
    return this.#shown.get(id);
  }

  endSimulation(id: number): boolean {
    const had = this.#simulations.delete(id);
    if (had) this.#refresh(id);
    return had;
  }

  isSimulated(id: number): boolean {
    return this.#simulations.has(id);
  }

  /**
   * Whether `tick()` can change what is shown (docs/OUTPUTS.md "Stale guard"): a simulation runs (its
   * timecode advances, it may end), a device plays or records (the guard may turn it offline, and then
   * counts the age in its reason), or a mixer's tally that is not all unknown is still within its stale
   * bound (the guard turns it unknown once). Otherwise time alone changes nothing and the io layer lets the tick sleep; any change
   * that makes this true again comes with a change event (`onChange`, `onReset`).
   */
  get needsTick(): boolean {
    if (this.#simulations.size > 0) return true;
    const now = this.#clock.monotonicMs();
    for (const id of this.#shown.keys()) {
      const d = this.#store?.get(id);
      if (!d) continue;
      if (d.state === 'play' || d.state === 'rec') return true;
      // A tally already all unknown (or no inputs) is what the guard would show: nothing to age.
      if (d.inputs?.some((i) => i.tally !== 'unknown')) {
        const seen = this.#lastData.get(id);
        const moved = seen === undefined || seen.updated !== d.updated;
        if (moved || now - seen.atMs <= (this.#staleAfter.get(id) ?? 5000)) return true;
      }
    }
    return false;
  }

  /** Apply the stale guard, advance simulated timecodes, end simulations that ran out. */
  tick(): void {
    const now = this.#clock.monotonicMs();
    for (const [id, sim] of this.#simulations) {
      if (sim.endsAtMs !== undefined && now >= sim.endsAtMs) this.#simulations.delete(id);
    }
    for (const id of this.#shown.keys()) this.#refresh(id);
  }

  /** The short event history (state changes, link losses), bounded. */
  events(): readonly DeviceEvent[] {
    return this.#history.list();
  }

  /** Called with each new history event. */
  onEvent(listener: (e: DeviceEvent) => void): () => void {
    this.#eventListeners.add(listener);
    return () => this.#eventListeners.delete(listener);
  }

  #onStoreChange(c: DeviceChange): void {
    this.#refresh(c.id, c.state);
  }

  #refresh(id: number, state?: Readonly<DeviceState>): void {
    const base = state ?? this.#store?.get(id);
    if (!base) return;
    const next = this.#compose(base);
    const fields = diff(this.#shown.get(id), next);
    if (fields.length === 0) {
      this.#shown.set(id, next); // keep `updated` fresh
      return;
    }
    const previous = this.#shown.get(id);
    this.#shown.set(id, next);
    for (const e of this.#history.record(previous, next, this.#clock.now())) {
      for (const l of this.#eventListeners) l(e);
    }
    for (const l of this.#listeners) {
      try {
        l(next, fields);
      } catch {
        // One broken output must not stop the others.
      }
    }
  }

  #compose(d: Readonly<DeviceState>): OutputDevice {
    const staleAfterMs = this.#staleAfter.get(d.id) ?? 5000;
    const sim = this.#simulations.get(d.id);
    if (sim) {
      const running = sim.request.state === 'play' || sim.request.state === 'rec';
      const elapsedFrames = running
        ? Math.floor(((this.#clock.monotonicMs() - sim.startedMs) / 1000) * d.framerate)
        : 0;
      const out: OutputDevice = {
        ...d,
        state: sim.request.state,
        connected: sim.request.state !== 'offline',
        timecode: framesToTimecode(sim.startFrames + elapsedFrames, d.framerate),
        filename: sim.request.filename ?? d.filename,
        updated: this.#clock.now(),
        staleAfterMs,
        simulated: true,
      };
      delete out.reason;
      delete out.positionMs;
      delete out.durationMs;
      delete out.remainingMs;
      if (sim.request.state === 'offline') out.reason = 'simulated';
      return out;
    }
    const now = this.#clock.monotonicMs();
    const seen = this.#lastData.get(d.id);
    if (!seen || seen.updated !== d.updated) this.#lastData.set(d.id, { updated: d.updated, atMs: now });
    const age = now - (this.#lastData.get(d.id)?.atMs ?? now);
    if ((d.state === 'play' || d.state === 'rec') && age > staleAfterMs) {
      return {
        ...d,
        state: 'offline',
        stale: true,
        ...(d.layers ? { layers: d.layers.map((l) => ({ ...l, state: 'offline' as const })) } : {}),
        reason: `no data for ${Math.round(age / 1000)} s`,
        staleAfterMs,
        ...(d.inputs ? { inputs: unknownTally(d.inputs) } : {}),
      };
    }
    // A mixer's per-input tally is never shown older than the stale bound, whatever its play state.
    if (d.inputs && age > staleAfterMs) return { ...d, inputs: unknownTally(d.inputs), staleAfterMs };
    return { ...d, staleAfterMs };
  }
}
