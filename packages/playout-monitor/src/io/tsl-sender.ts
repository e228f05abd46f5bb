/**
 * TSL UMD v5.0 sender: unicast to every `settings.tslUmdDestinations` entry, screen
 * `settings.tslUmdScreen`, one display index per device (its configuration id), text = device name.
 * A device's message goes out at once when its tally or name changes; a background refresh sends one
 * device every `refreshMs` in turn, so a receiver that restarts or lost a datagram is right again within
 * one round (UDP has no delivery guarantee). While no device is connected (every one shown offline, none
 * simulated) nothing can change but by an event that is sent at once, so the refresh slows to one round of
 * every device at most `restRefreshMs` (2 s) × devices apart, sent in one wake (on the monitor's retry grid
 * when that is 5 s or more, `restGrid`): a receiver that restarts then shows the offline displays within
 * 2 s × devices, as with one device every 2 s. The first device to connect brings the `refreshMs` period
 * back at once (docs/OUTPUTS.md).
 *
 * Each destination is on its own: its own connected UDP socket (a send on a connected socket goes
 * straight to the kernel), its own name resolution, counters and error. A destination whose name does not
 * resolve, or whose socket fails, is reported in `/health` with the reason and retried every
 * `retryMs`; the other destinations keep sending. A destination that refuses (ICMP port unreachable) is
 * reported on a later send and simply retried; its warning is logged once per `warnIntervalMs` (default
 * 60 s) with `count`, the sends refused since the previous line, so a receiver that is down for an hour
 * costs 60 log lines, not one per datagram.
 *
 * Packing (`settings.tslUmdPacking`): `single` (default) sends one display message per packet, because
 * several receivers read only the first display message of a packet (docs/OUTPUTS.md names them);
 * `packed` puts as many as fit in 2048 bytes into one packet.
 *
 * Mapped mixer inputs (`tallyInputs` of an `http_mixer`, docs/TALLY.md "Outputs") have a display each at
 * their own `tslIndex`, with the input's own tally (program red, preview green, off, unknown dimmed): they
 * go out with their mixer's display, whenever its tally changes and in the same round-robin refresh.
 *
 * `sendFinal()` (on SIGTERM/SIGINT) sends every device once more in the configured shutdown state
 * (`settings.tslUmdShutdownState`: `off` = every tally off, or `offline` = as an offline device shows), so
 * UMDs do not stay red after the monitor is gone.
 */
import { lookup } from 'node:dns/promises';
import { createSocket, type Socket } from 'node:dgram';
import type { Logger, TimerHandle } from '@broadcast-ops/core';
import { LogThrottle } from '../domain/log-throttle.ts';
import { tallyOfKey } from '../domain/mixer-tally.ts';
import type { OutputDevice, OutputView } from '../domain/output-view.ts';
import { encodeTslPackets, tallyForInput, tallyForState, type TslMessage } from '../protocol/tsl-umd.ts';
import type { RetryGrid } from './retry-grid.ts';

/** A mixer input with its own display: the input's vMix key, its TSL index, an optional display name. */
/** The refresh period while no device is connected (docs/OUTPUTS.md "TSL UMD v5.0"). */
export const REST_REFRESH_MS = 2000;

/** A device whose display can change without an event: connected, or simulated. */
function live(d: Readonly<OutputDevice>): boolean {
  return d.connected || d.simulated === true;
}

export interface TslInputMapping {
  key: string;
  tslIndex?: number | undefined;
  name?: string | undefined;
}

export interface TslDestination {
  host: string;
  port: number;
}

export type TslPacking = 'single' | 'packed';
export type TslShutdownState = 'off' | 'offline';

export interface TslSenderOptions {
  view: OutputView;
  destinations: readonly TslDestination[];
  screen: number;
  logger: Logger;
  packing?: TslPacking;
  shutdownState?: TslShutdownState;
  /** Mapped mixer inputs per device id (read on every send, so a new configuration applies at once). */
  tallyInputs?: () => ReadonlyMap<number, readonly TslInputMapping[]>;
  /** Round-robin refresh period (one device per period). */
  refreshMs?: number;
  /** The refresh period while no device is connected (default 2 s). */
  restRefreshMs?: number;
  /** How often a failed destination is resolved and connected again. */
  retryMs?: number;
  /** At most one "refusing" warning per destination per this interval (with the count it stands for). */
  warnIntervalMs?: number;
  /** The monitor's retry grid: a rest round of 5 s or longer runs at its instants, in the absent devices'
   * wake (io/retry-grid.ts `within`: never later than the round's period). */
  restGrid?: RetryGrid;
}

export interface TslDestinationStatus {
  host: string;
  port: number;
  /** The address the name resolved to, once it did. */
  address?: string;
  ok: boolean;
  error?: string;
  sent: number;
  errors: number;
}

export function tslMessage(d: Readonly<OutputDevice>): TslMessage {
  return { index: d.id, display: tallyForState(d.state), text: d.name };
}

/** The displays of a mixer's mapped inputs: each input's own tally, `unknown` when the mixer lists no such key. */
export function inputTslMessages(
  d: Readonly<OutputDevice>,
  mapping: readonly TslInputMapping[],
): TslMessage[] {
  const out: TslMessage[] = [];
  for (const m of mapping) {
    if (m.tslIndex === undefined) continue;
    const input = d.inputs?.find((i) => i.key === m.key);
    out.push({
      index: m.tslIndex,
      display: tallyForInput(tallyOfKey(d.inputs, m.key)),
      text: m.name ?? input?.title ?? m.key,
    });
  }
  return out;
}

/** Resolve a destination host to one IPv4 address (an IP literal resolves to itself). */
export async function resolveTslHost(host: string): Promise<string> {
  const r = await lookup(host, { family: 4 });
  return r.address;
}

class Destination {
  socket: Socket | undefined;
  address: string | undefined;
  error: string | undefined;
  sent = 0;
  errors = 0;
  #connecting = false;
  readonly #refusals: LogThrottle;

  constructor(
    readonly host: string,
    readonly port: number,
    readonly logger: Logger,
    warnIntervalMs: number,
  ) {
    this.#refusals = new LogThrottle(warnIntervalMs);
  }

  get ok(): boolean {
    return this.socket !== undefined && this.error === undefined;
  }

  /** Resolve and connect; never throws (the failure is kept in `error`). */
  async connect(): Promise<void> {
    if (this.#connecting || this.socket) return;
    this.#connecting = true;
    try {
      const address = await resolveTslHost(this.host);
      const socket = createSocket('udp4');
      await new Promise<void>((resolve, reject) => {
        socket.once('error', reject);
        socket.connect(this.port, address, () => {
          socket.off('error', reject);
          resolve();
        });
      });
      socket.on('error', (err: NodeJS.ErrnoException) =>
        err.code === 'ECONNREFUSED' ? this.#refused(err) : this.#failed(err),
      );
      this.socket = socket;
      this.address = address;
      this.error = undefined;
      this.logger.info({ host: this.host, port: this.port, address }, 'TSL UMD destination connected');
    } catch (err) {
      this.#failed(err);
    } finally {
      this.#connecting = false;
    }
  }

  #failed(err: unknown): void {
    const code = (err as NodeJS.ErrnoException).code;
    const message = err instanceof Error ? err.message : String(err);
    this.error =
      code === 'ENOTFOUND' || code === 'EAI_AGAIN' ? `cannot resolve ${this.host} (${code})` : message;
    this.errors++;
    this.logger.warn({ host: this.host, port: this.port, error: this.error }, 'TSL UMD destination failing');
  }

  /** The receiver is not up (ICMP port unreachable, reported on a later send or receive): kept, retried,
   * and warned about at most once per interval with the count of refusals it stands for. */
  #refused(err: NodeJS.ErrnoException): void {
    this.errors++;
    this.error = `refused (ECONNREFUSED): nothing listens on ${this.host}:${this.port}`;
    const count = this.#refusals.note(performance.now());
    if (count !== undefined)
      this.logger.warn(
        { host: this.host, port: this.port, code: err.code, count, intervalMs: this.#refusals.intervalMs },
        'TSL UMD destination refusing',
      );
  }

  send(packet: Buffer, done?: () => void): void {
    const socket = this.socket;
    if (!socket) {
      done?.();
      return;
    }
    try {
      socket.send(packet, (err) => {
        if (err) {
          // ECONNREFUSED from an earlier ICMP port unreachable: the receiver is not up; keep sending.
          if ((err as NodeJS.ErrnoException).code === 'ECONNREFUSED') this.#refused(err);
          else {
            this.errors++;
            this.logger.debug({ err, host: this.host }, 'TSL UMD send failed');
          }
        } else {
          this.sent++;
          if (this.error !== undefined && this.socket) this.error = undefined;
        }
        done?.();
      });
    } catch (err) {
      this.#failed(err);
      done?.();
    }
  }

  async close(): Promise<void> {
    const socket = this.socket;
    this.socket = undefined;
    if (socket) await new Promise<void>((resolve) => socket.close(() => resolve()));
  }

  status(): TslDestinationStatus {
    return {
      host: this.host,
      port: this.port,
      ...(this.address !== undefined ? { address: this.address } : {}),
      ok: this.ok,
      ...(this.error !== undefined ? { error: this.error } : {}),
      sent: this.sent,
      errors: this.errors,
    };
  }
}

/** `fn` every `ms` on an unref'd interval, as a TimerHandle. */
function every(ms: number, fn: () => void): TimerHandle {
  const t = setInterval(fn, ms);
  t.unref();
  return { cancel: () => clearInterval(t) };
}

export class TslSender {
  readonly #o: TslSenderOptions;
  readonly #destinations: Destination[];
  #running = false;
  #timer: TimerHandle | undefined;
  /** The period the refresh timer was armed with (`refreshMs`, or `restRefreshMs` at rest). */
  #timerPeriod = 0;
  /** The refresh runs at rest (whole rounds, nothing connected). */
  #atRest = false;
  /** The last rest round's messages (as JSON) and their packets. */
  #round: { key: string; packets: Buffer[] } | undefined;
  #retry: NodeJS.Timeout | undefined;
  #next = 0;
  #unsubscribe: (() => void)[] = [];

  constructor(options: TslSenderOptions) {
    this.#o = options;
    this.#destinations = options.destinations.map(
      (d) => new Destination(d.host, d.port, options.logger, options.warnIntervalMs ?? 60_000),
    );
  }

  get enabled(): boolean {
    return this.#destinations.length > 0;
  }

  /** True while the sender runs and at least one destination is connected. */
  get running(): boolean {
    return this.#running && this.#destinations.some((d) => d.ok);
  }

  get stats(): { sent: number; errors: number } {
    let sent = 0;
    let errors = 0;
    for (const d of this.#destinations) {
      sent += d.sent;
      errors += d.errors;
    }
    return { sent, errors };
  }

  destinations(): TslDestinationStatus[] {
    return this.#destinations.map((d) => d.status());
  }

  async start(): Promise<void> {
    if (!this.enabled) return;
    await Promise.all(this.#destinations.map((d) => d.connect()));
    this.#running = true;
    this.#unsubscribe = [
      this.#o.view.onChange((d, fields) => {
        if (['state', 'name', 'inputs', '*'].some((f) => fields.includes(f))) this.#send([d]);
        if (live(d) && this.#atRest) this.#armRefresh();
      }),
      this.#o.view.onReset(() => {
        this.sendAll();
        this.#armRefresh();
      }),
    ];
    this.sendAll();
    this.#armRefresh();
    this.#armRetry();
  }

  /** True while a destination that failed to resolve or connect is tried again every `retryMs`. */
  get retrying(): boolean {
    return this.#retry !== undefined;
  }

  /**
   * Retry destinations without a socket every `retryMs`; the timer sleeps once every destination has one
   * (a refusing receiver keeps its socket: it is retried by the sends themselves), so at rest it does not
   * wake the monitor every 10 s for nothing (docs/performance.md "At rest").
   */
  #armRetry(): void {
    if (this.#retry || !this.#running || this.#destinations.every((d) => d.socket)) return;
    this.#retry = setInterval(() => {
      if (this.#destinations.every((d) => d.socket)) {
        clearInterval(this.#retry);
        this.#retry = undefined;
        return;
      }
      for (const d of this.#destinations) {
        if (!d.socket) {
          void d.connect().then(() => {
            if (d.socket) this.#sendTo(d, this.#o.view.list());
          });
        }
      }
    }, this.#o.retryMs ?? 10_000);
    this.#retry.unref();
  }

  /** Every device (packed into as few packets as the 2048-byte limit allows when packing is `packed`). */
  sendAll(): void {
    this.#send(this.#o.view.list());
  }

  get #activePeriod(): number {
    return this.#o.refreshMs ?? 200;
  }

  /** The refresh period now in use (ms): `refreshMs` (one device) while a device is connected, else
   * `restRefreshMs` × devices (one whole round). */
  get refreshPeriod(): number {
    return this.#timerPeriod;
  }

  /**
   * (Re)arm the refresh at the period that fits what is connected now: one device every `refreshMs` while a
   * device is connected; at rest, the whole round (every device) in one wake every `restRefreshMs` × devices,
   * so each display is refreshed as often as one device every `restRefreshMs` would (docs/OUTPUTS.md), with
   * one wake of the process per round instead of one per device (docs/performance.md "At rest").
   */
  #armRefresh(): void {
    if (!this.#running) return;
    const list = this.#o.view.list();
    const rest = !list.some(live);
    const period = rest
      ? (this.#o.restRefreshMs ?? REST_REFRESH_MS) * Math.max(1, list.length)
      : this.#activePeriod;
    if (this.#timer && period === this.#timerPeriod && rest === this.#atRest) return;
    this.#timer?.cancel();
    this.#timerPeriod = period;
    this.#atRest = rest;
    this.#timer = rest ? this.#restRounds(period) : every(period, () => this.#refreshOne());
  }

  /** A round at most every `period`: on the monitor's grid when it has one and the period reaches it. */
  #restRounds(period: number): TimerHandle {
    const grid = this.#o.restGrid;
    if (!grid) return every(period, () => this.#refreshRound());
    let handle: TimerHandle | undefined;
    let stopped = false;
    const next = (): void => {
      handle = grid.within(period, () => {
        if (stopped) return;
        this.#refreshRound();
        next();
      });
    };
    next();
    return {
      cancel: () => {
        stopped = true;
        handle?.cancel();
      },
    };
  }

  /**
   * At rest: every device at once (a device connecting re-arms the active refresh in the change listener).
   * The round's packets are kept and sent again while its messages are the same (at rest they are: a change
   * is an event, sent at once): no encoding per round (docs/performance.md "At rest").
   */
  #refreshRound(): void {
    const list = this.#o.view.list();
    if (list.length === 0) return;
    const messages = this.#messages(list);
    const key = JSON.stringify(messages);
    if (this.#round?.key !== key) this.#round = { key, packets: this.#packets(messages) };
    for (const d of this.#destinations) for (const packet of this.#round.packets) d.send(packet);
  }

  #refreshOne(): void {
    const list = this.#o.view.list();
    if (list.length === 0) return;
    this.#next = (this.#next + 1) % list.length;
    const d = list[this.#next];
    if (d) this.#send([d]);
    // The last device gone offline: slow down (a device connecting speeds it up in the change listener).
    if (!list.some(live)) this.#armRefresh();
  }

  #packets(messages: TslMessage[]): Buffer[] {
    if ((this.#o.packing ?? 'single') === 'packed') return encodeTslPackets(this.#o.screen, messages);
    return messages.flatMap((m) => encodeTslPackets(this.#o.screen, [m]));
  }

  #send(devices: readonly Readonly<OutputDevice>[]): void {
    for (const d of this.#destinations) this.#sendTo(d, devices);
  }

  /** A device's display and those of its mapped inputs. */
  #messages(devices: readonly Readonly<OutputDevice>[]): TslMessage[] {
    const map = this.#o.tallyInputs?.();
    return devices.flatMap((d) => [tslMessage(d), ...inputTslMessages(d, map?.get(d.id) ?? [])]);
  }

  #sendTo(dest: Destination, devices: readonly Readonly<OutputDevice>[]): void {
    for (const packet of this.#packets(this.#messages(devices))) dest.send(packet);
  }

  /** The shutdown state for every device, to every connected destination; resolves once handed to the kernel. */
  async sendFinal(timeoutMs = 500): Promise<void> {
    // Nothing may follow the final word: no change, refresh or retry sends after it.
    this.#stopTimers();
    const state = this.#o.shutdownState ?? 'off';
    const display =
      state === 'off'
        ? ({ rh: 'off', text: 'off', lh: 'off', brightness: 3 } as const)
        : tallyForState('offline');
    const messages = this.#messages(this.#o.view.list()).map((m) => ({ ...m, display }));
    const pending: Promise<void>[] = [];
    for (const dest of this.#destinations) {
      for (const packet of this.#packets(messages)) {
        pending.push(new Promise<void>((resolve) => dest.send(packet, resolve)));
      }
    }
    await Promise.race([Promise.all(pending), new Promise((r) => setTimeout(r, timeoutMs).unref())]);
  }

  #stopTimers(): void {
    for (const u of this.#unsubscribe) u();
    this.#unsubscribe = [];
    this.#timer?.cancel();
    if (this.#retry) clearInterval(this.#retry);
    this.#timer = undefined;
    this.#timerPeriod = 0;
    this.#atRest = false;
    this.#retry = undefined;
  }

  async close(): Promise<void> {
    this.#stopTimers();
    this.#running = false;
    await Promise.all(this.#destinations.map((d) => d.close()));
  }
}
