/**
 * The Companion Satellite API session as a pure state machine (docs/companion.md): registers the bridge as a
 * virtual surface, publishes what Companion draws and streams, and turns client commands into Satellite
 * lines, each acknowledged only after Companion's `OK`. Inputs: link events (`opened`, `openFailed`, `line`,
 * `closed`), `tick()` when a requested wake time has come, and commands; time from the context's Clock.
 * Outputs: links to open and close and lines to send (`SessionLinks`), the next wake time, and state and
 * events through the AdapterContext. No sockets, no timers: io/companion/adapter.ts owns those.
 *
 * Connection state (`companion.connection.state`): `connecting` (first attempt) → `connected` after BEGIN,
 * CAPS (≥ 1.10.0) and `ADD-DEVICE OK`; a lost, silent or refused link → `reconnecting` with exponential backoff
 * plus jitter; `error` when Companion is reachable but unusable (ApiVersion 2+, ADD-DEVICE refused, not a
 * Satellite server) or when `maxReconnectAttempts` is exhausted; `disconnected` when the adapter stops.
 */
import type { Clock } from '@broadcast-ops/core';
import type { AdapterCommand, AdapterContext, AdapterResult } from '../adapter.ts';
import {
  formatClientLine,
  isSemver,
  splitLine,
  toBase64,
  type SatelliteLine,
  type SatelliteParams,
  type SatelliteValue,
} from '../../protocol/satellite.ts';
import { planCommand, type Plan, type Target } from './commands.ts';
import {
  bitmapFormatFor,
  capsValue,
  featuresOf,
  parseLocation,
  segment,
  styleValue,
  variablePath,
  type BitmapFormat,
  type CompanionFeatures,
} from './features.ts';
import { HeldKeys, type HeldTarget } from './held-keys.ts';
import { Locations, MAX_SUBSCRIPTIONS, locationPath, subIdOf, type SubLocation } from './locations.ts';
import { LinkHistory, type LinkHost } from './link-history.ts';
import {
  backoffDelay,
  type CompanionConnectionState,
  type CompanionHost,
  type CompanionSessionOptions,
  type SessionLinks,
} from './types.ts';
import { Wakes, type Wake } from './wakes.ts';

/** After the key burst, wait this long (ms) for the variables that follow (~5-20 ms) before clearing stale. */
export const FRESH_SETTLE_MS = 50;

/** Keys that describe the link itself: written while the link is down, so never marked stale. */
const LINK_KEYS = (path: string): boolean => path.startsWith('companion.connection.');

interface Pending {
  resolve(line: SatelliteLine): void;
  reject(err: Error): void;
  wake: Wake;
}

/** One connection attempt to one host, from `open` to its end. */
interface Session {
  /** The link id given to `SessionLinks.open`. */
  link: number;
  /** `opened` has arrived: lines may be sent. */
  open: boolean;
  host: CompanionHost;
  hostIndex: number;
  phase: 'begin' | 'caps' | 'register' | 'live';
  apiVersion: string;
  companionVersion: string;
  caps: SatelliteParams;
  features: CompanionFeatures;
  /** The bitmap encoding this session's Companion sends (undefined: no bitmaps asked for). */
  imageFormat: BitmapFormat | undefined;
  pending: Map<string, Pending[]>;
  /** ADD-SUB acknowledged on this session. */
  subsLive: Set<string>;
  /** ADD-SUB sent on this session, not yet answered. */
  subsAdding: Map<string, Promise<void>>;
  /** Locations Companion has drawn (SUB-STATE) on this session. */
  subsFresh: Set<string>;
  refreshed: Set<number>;
  /** Monotonic ms of the last line from Companion (or of the link opening). */
  lastRx: number;
  pingSeq: number;
  /** PING id → monotonic ms it was sent. */
  pings: Map<string, number>;
  fresh: boolean;
}

class ReplyError extends Error {}

/** Links that go nowhere: the session before `start`. */
const NO_LINKS: SessionLinks = { open() {}, send() {}, close() {}, wake() {} };

export class CompanionSession {
  readonly #o: CompanionSessionOptions;
  readonly #random: () => number;
  readonly #dev: string;
  readonly #outputs: Map<string, string>;
  readonly #inputs: Set<string>;
  #ctx: AdapterContext | undefined;
  #clock: Clock | undefined;
  #links: SessionLinks = NO_LINKS;
  readonly #wakes = new Wakes((at) => this.#links.wake(at));
  #state: CompanionConnectionState = 'disconnected';
  #session: Session | undefined;
  #linkSeq = 0;
  #attempt = 0;
  #retry: Wake | undefined;
  #stopped = true;
  readonly #hosts: CompanionHost[];
  #hostIndex = 0;
  /** Why commands fail right now, while the adapter moves to another host. */
  #failover: string | undefined;
  /** Locations subscribed with ADD-SUB, remembered across sessions (locations.ts). */
  readonly #subs: Locations;
  /** Presses whose release Companion has not confirmed (held-keys.ts), published as `companion.held`. */
  readonly #held = new HeldKeys();
  /** Each outage of the link as one event (link-history.ts), published as `companion.connection.events`. */
  #history = new LinkHistory();

  constructor(options: CompanionSessionOptions) {
    this.#o = options;
    this.#random = options.random ?? Math.random;
    this.#hosts =
      options.hosts && options.hosts.length > 0
        ? options.hosts.map((h) => ({ ...h }))
        : [{ host: options.host, port: options.port }];
    this.#dev = segment(options.device.deviceId);
    this.#outputs = new Map(
      options.device.variables.filter((v) => v.type === 'output').map((v) => [v.id, variablePath(v.id)]),
    );
    this.#inputs = new Set(options.device.variables.filter((v) => v.type === 'input').map((v) => v.id));
    this.#subs = new Locations(options.locations);
  }

  /** Silence (ms) after which the link is suspect and commands are refused unsent. */
  get #suspectAfter(): number {
    return Math.max(2 * this.#o.heartbeatInterval, 300);
  }

  /** Monotonic ms, for silences and deadlines. */
  #mono(): number {
    return this.#clock?.monotonicMs() ?? 0;
  }

  /** Wall ms, for timestamps people read. */
  #wall(): number {
    return this.#clock?.now() ?? 0;
  }

  get state(): CompanionConnectionState {
    return this.#state;
  }

  /** The earliest monotonic time `tick()` is wanted (also told to `SessionLinks.wake`). */
  get wakeAt(): number | undefined {
    return this.#wakes.next;
  }

  capabilities(): Record<string, boolean | string | number> {
    const s = this.#session;
    const f = s?.features;
    return {
      state: this.#state,
      apiVersion: s?.apiVersion ?? '',
      press: this.#state === 'connected',
      rotate: f?.rotate ?? false,
      variables: f?.variables ?? false,
      absolutePress: f?.subscriptions ?? false,
      rotaryAmount: f?.rotaryAmount ?? false,
      activeHost: s?.phase === 'live' ? `${s.host.host}:${s.host.port}` : '',
      hosts: this.#hosts.length,
    };
  }

  /** The configured hosts in order and the one in use (for the console and the state API). */
  get hosts(): { host: string; port: number; active: boolean }[] {
    const s = this.#session;
    return this.#hosts.map((h, i) => ({ ...h, active: s?.phase === 'live' && s.hostIndex === i }));
  }

  start(ctx: AdapterContext, links: SessionLinks): void {
    this.#ctx = ctx;
    this.#clock = ctx.clock;
    this.#links = links;
    this.#stopped = false;
    // Presses an earlier run left unconfirmed (restored from the event log): released once linked there.
    const restored = this.#held.restore(ctx.read('companion.held'));
    if (restored > 0)
      ctx.logger.warn(
        { keys: this.#held.value() },
        'keys an earlier run may have left held on Companion; each is released once linked to that Companion',
      );
    this.#publishHeld();
    if (this.#subs.size > 0) this.#publishSubs();
    this.#history = new LinkHistory(ctx.read('companion.connection.events'));
    this.#setState('connecting');
    this.#connect();
  }

  stop(): void {
    this.#stopped = true;
    this.#retry?.cancel();
    this.#retry = undefined;
    const s = this.#session;
    if (s) {
      if (s.open) this.#links.send(s.link, 'QUIT\n');
      this.#end(s, 'adapter stopped');
    }
    this.#ctx?.setConnected(false);
    this.#setState('disconnected');
  }

  /**
   * A requested wake time has come: fire every deadline due now. `wokenFor` is the wake time the owner's
   * timer was armed for: Node arms a timer from its cached loop time, so it can fire a little before that time
   * on the Clock; the deadlines up to it are due all the same (as they would be for a Node interval).
   */
  tick(wokenFor?: number): void {
    this.#wakes.run(Math.max(this.#mono(), wokenFor ?? -Infinity));
  }

  // ------------------------------------------------------------------------------------------ state

  #set(path: string, value: unknown, correlationId?: string): void {
    this.#ctx?.setState(path, value, correlationId ? { correlationId } : undefined);
  }

  #setState(s: CompanionConnectionState, error?: string): void {
    if (error !== undefined) this.#set('companion.connection.lastError', error);
    if (this.#state === s) return;
    this.#state = s;
    this.#set('companion.connection.state', s);
  }

  // ------------------------------------------------------------------------------------------ connection

  #connect(): void {
    this.#retry = undefined;
    if (this.#stopped) return;
    const hostIndex = this.#hostIndex;
    const host = this.#hosts[hostIndex] ?? this.#hosts[0] ?? { host: this.#o.host, port: this.#o.port };
    const session: Session = {
      link: ++this.#linkSeq,
      open: false,
      host,
      hostIndex,
      phase: 'begin',
      apiVersion: '',
      companionVersion: '',
      caps: Object.create(null) as SatelliteParams,
      features: featuresOf('0.0.0', {}),
      imageFormat: undefined,
      pending: new Map(),
      subsLive: new Set(),
      subsAdding: new Map(),
      subsFresh: new Set(),
      refreshed: new Set(),
      lastRx: this.#mono(),
      pingSeq: 0,
      pings: new Map(),
      fresh: false,
    };
    this.#session = session;
    this.#links.open(session.link, { host: host.host, port: host.port });
  }

  /** Link `link` is connected: the registration clock and the heartbeat start. */
  opened(link: number): void {
    const session = this.#session;
    if (this.#stopped || !session || session.link !== link) {
      this.#links.close(link, 'closed by adapter');
      return;
    }
    session.open = true;
    session.lastRx = this.#mono();
    // Registration must finish within the connection timeout; the heartbeat also watches for silence.
    this.#timer(session, this.#o.connectionTimeout, () => {
      if (session.phase !== 'live')
        this.#fail(session, 'reconnecting', `no registration within ${this.#o.connectionTimeout} ms`);
    });
    this.#beat(session);
  }

  /** Link `link` could not be opened (refused, unreachable, timed out). */
  openFailed(link: number, message: string): void {
    const session = this.#session;
    if (!session || session.link !== link) return;
    this.#session = undefined;
    this.#scheduleRetry(`connect to ${session.host.host}:${session.host.port} failed: ${message}`);
  }

  /** Link `link` ended (closed by Companion, reset, a line over the size bound). */
  closed(link: number, reason: string): void {
    const s = this.#session;
    if (s && s.link === link) this.#fail(s, 'reconnecting', reason);
  }

  #linkHost(index: number): LinkHost {
    const h = this.#hosts[index] ?? { host: this.#o.host, port: this.#o.port };
    return { host: h.host, port: h.port, role: index === 0 ? 'primary' : 'backup' };
  }

  /** A deadline that ends with the session. */
  #timer(session: Session, ms: number, fn: () => void): Wake {
    return this.#wakes.add(this.#mono() + ms, fn, session);
  }

  /** Every `heartbeatInterval`: check for silence, then PING. */
  #beat(s: Session): void {
    this.#timer(s, this.#o.heartbeatInterval, () => {
      this.#heartbeat(s);
      if (this.#session === s) this.#beat(s);
    });
  }

  #heartbeat(s: Session): void {
    const silent = Math.round(this.#mono() - s.lastRx);
    if (silent > this.#o.deadAfter) {
      this.#fail(s, 'reconnecting', `no data from Companion for ${silent} ms`);
      return;
    }
    const id = String(++s.pingSeq);
    s.pings.set(id, this.#mono());
    for (const k of s.pings.keys()) {
      if (s.pings.size <= 16) break;
      s.pings.delete(k);
    }
    this.#links.send(s.link, `PING ${id}\n`);
  }

  #scheduleRetry(reason: string): void {
    if (this.#stopped) return;
    this.#attempt++;
    const max = this.#o.maxReconnectAttempts;
    if (max > 0 && this.#attempt > max) {
      this.#setState('error', `${reason}; gave up after ${max} attempts`);
      return;
    }
    // Hot standby: the next host in order; the backoff grows once per round over all of them.
    const from = this.#hosts[this.#hostIndex];
    if (from) this.#history.lost(this.#linkHost(this.#hostIndex), reason, this.#wall());
    const n = this.#hosts.length;
    if (n > 1) {
      this.#hostIndex = (this.#hostIndex + 1) % n;
      const to = this.#hosts[this.#hostIndex];
      this.#failover = `Companion ${from?.host}:${from?.port} failed (${reason}); failing over to ${to?.host}:${to?.port}`;
    }
    // The first round over the other hosts goes at once (failoverDelay): a standby is there to be used.
    const delay =
      n > 1 && this.#attempt < n
        ? (this.#o.failoverDelay ?? 0)
        : backoffDelay(Math.ceil(this.#attempt / n), this.#o, this.#random);
    this.#ctx?.logger.warn(
      { reason, attempt: this.#attempt, delayMs: delay, next: this.#hosts[this.#hostIndex] },
      'companion link down; retrying',
    );
    if (this.#state !== 'error') this.#setState('reconnecting', reason);
    else this.#set('companion.connection.lastError', reason);
    this.#ctx?.reportReconnect();
    this.#retry = this.#wakes.add(this.#mono() + delay, () => {
      if (this.#state === 'error') this.#setState('reconnecting');
      this.#connect();
    });
  }

  /** Tear the session down (deadlines, pending replies, link). */
  #end(s: Session, reason: string): void {
    this.#wakes.cancelOwner(s);
    for (const queue of s.pending.values())
      for (const p of queue.splice(0)) {
        p.wake.cancel();
        p.reject(new Error(`link lost before Companion answered (${reason})`));
      }
    if (this.#session === s) this.#session = undefined;
    if (s.open) this.#links.close(s.link, reason);
  }

  /** `companion.connection.active`: the host this session is (or was) on, and why it is not any more. */
  #publishActive(s: Session, connected: boolean, reason?: string): void {
    this.#set('companion.connection.active', {
      connected,
      host: s.host.host,
      port: s.host.port,
      index: s.hostIndex,
      role: s.hostIndex === 0 ? 'primary' : 'backup',
      since: this.#wall(),
      ...(reason === undefined ? {} : { reason }),
    });
  }

  /** A live or half-open session failed: keys go stale, state moves, a retry is scheduled. */
  #fail(s: Session, to: 'reconnecting' | 'error', reason: string): void {
    if (this.#session !== s) return;
    this.#end(s, reason);
    this.#ctx?.setConnected(false, LINK_KEYS);
    // Keys redrawn by a session that ended before it was declared fresh are stale too.
    this.#ctx?.markStale(true, LINK_KEYS);
    this.#publishActive(s, false, reason);
    if (this.#subs.size > 0) {
      this.#subs.setAll('stale', `Companion link lost: ${reason}`);
      this.#publishSubs();
    }
    if (to === 'error') this.#setState('error', reason);
    this.#scheduleRetry(reason);
  }

  // ------------------------------------------------------------------------------------------ inbound

  /** One line from Companion on link `link`, without its `\n` (the link splits and bounds them). */
  line(link: number, raw: string): void {
    const s = this.#session;
    if (!s || s.link !== link || !s.open) return;
    s.lastRx = this.#mono();
    const msg = splitLine(raw);
    const p = msg.params;
    if (s.phase === 'begin') {
      if (msg.name !== 'BEGIN') {
        this.#fail(
          s,
          'error',
          `not a Companion Satellite API: first line ${JSON.stringify(raw.slice(0, 80))}`,
        );
        return;
      }
      const v = typeof p['ApiVersion'] === 'string' ? p['ApiVersion'] : '';
      if (!isSemver(v) || !v.startsWith('1.')) {
        this.#fail(
          s,
          'error',
          `unsupported Satellite ApiVersion ${JSON.stringify(v)} (this adapter speaks 1.x)`,
        );
        return;
      }
      s.apiVersion = v;
      s.companionVersion = typeof p['CompanionVersion'] === 'string' ? p['CompanionVersion'] : '';
      s.features = featuresOf(v, s.caps);
      if (s.features.caps) s.phase = 'caps';
      else void this.#register(s);
      return;
    }
    if (s.phase === 'caps' && msg.name === 'CAPS') {
      for (const [k, val] of Object.entries(p)) s.caps[k] = val;
      s.features = featuresOf(s.apiVersion, s.caps);
      void this.#register(s);
      return;
    }
    if (this.#reply(s, msg)) return;
    this.#unsolicited(s, msg, raw);
  }

  /** Match `<CMD> OK|ERROR` (and `ERROR MESSAGE="Unknown command: <CMD>"`) to the oldest request of that name. */
  #reply(s: Session, msg: SatelliteLine): boolean {
    const p = msg.params;
    let name = msg.name;
    if (name === 'ERROR' && p['ERROR'] !== true && typeof p['MESSAGE'] === 'string') {
      const m = /^Unknown command: (\S+)/.exec(p['MESSAGE']);
      if (!m) return false;
      name = m[1] ?? '';
    } else if (p['OK'] !== true && p['ERROR'] !== true) return false;
    const queue = s.pending.get(name);
    const next = queue?.shift();
    if (!next) return name !== 'ERROR' || msg.name !== 'ERROR';
    next.wake.cancel();
    if (p['OK'] === true && msg.name === name) next.resolve(msg);
    else next.reject(new ReplyError(typeof p['MESSAGE'] === 'string' ? p['MESSAGE'] : 'ERROR'));
    return true;
  }

  #unsolicited(s: Session, msg: SatelliteLine, raw: string): void {
    const p = msg.params;
    const ours = p['DEVICEID'] === this.#o.device.deviceId;
    switch (msg.name) {
      case 'PONG': {
        const t0 = s.pings.get(msg.body.trim());
        if (t0 !== undefined) {
          s.pings.delete(msg.body.trim());
          this.#ctx?.reportLatency((this.#mono() - t0) / 1000);
        }
        return;
      }
      case 'PING':
        this.#links.send(s.link, `PONG ${msg.body.trim()}\n`);
        return;
      case 'KEY-STATE': {
        const index = Number(p['KEY']);
        if (!ours || !Number.isInteger(index) || index < 0 || index >= this.#o.device.keysTotal) break;
        const loc = parseLocation(p['LOCATION']);
        this.#set(`companion.device.${this.#dev}.key.${index}`, {
          deviceId: this.#o.device.deviceId,
          keyIndex: index,
          row: Math.floor(index / this.#o.device.keysPerRow),
          column: index % this.#o.device.keysPerRow,
          ...(loc ? { page: loc.page } : {}),
          ...styleValue(p, s.imageFormat),
        });
        s.refreshed.add(index);
        if (s.refreshed.size >= this.#o.device.keysTotal) this.#freshSoon(s);
        return;
      }
      case 'KEYS-CLEAR':
        if (!ours) break;
        for (let i = 0; i < this.#o.device.keysTotal; i++) {
          this.#set(`companion.device.${this.#dev}.key.${i}`, {
            deviceId: this.#o.device.deviceId,
            keyIndex: i,
            row: Math.floor(i / this.#o.device.keysPerRow),
            column: i % this.#o.device.keysPerRow,
            type: 'BUTTON',
            pressed: false,
            cleared: true,
          });
        }
        return;
      case 'BRIGHTNESS': {
        const v = Number(p['VALUE']);
        if (!ours || !Number.isFinite(v)) break;
        this.#set(`companion.device.${this.#dev}.brightness`, v);
        return;
      }
      case 'LOCKED-STATE': {
        if (!ours) break;
        const value: Record<string, unknown> = { locked: p['LOCKED'] === '1' || p['LOCKED'] === 'true' };
        if (typeof p['CHARACTER_COUNT'] === 'string') value['characterCount'] = Number(p['CHARACTER_COUNT']);
        if (typeof p['ROTATION'] === 'string') value['rotation'] = Number(p['ROTATION']);
        this.#set(`companion.device.${this.#dev}.locked`, value);
        this.#freshSoon(s);
        return;
      }
      case 'VARIABLE-VALUE': {
        const path = typeof p['VARIABLE'] === 'string' ? this.#outputs.get(p['VARIABLE']) : undefined;
        if (!ours || !path || typeof p['VALUE'] !== 'string') break;
        this.#set(path, Buffer.from(p['VALUE'], 'base64').toString('utf8'));
        return;
      }
      case 'SUB-STATE': {
        const id = typeof p['SUBID'] === 'string' ? p['SUBID'] : undefined;
        const where = id === undefined ? undefined : this.#subs.get(id);
        if (id === undefined || !where || !(s.subsLive.has(id) || s.subsAdding.has(id))) break;
        this.#set(where.path, {
          page: where.page,
          row: where.row,
          column: where.column,
          ...styleValue(p, s.imageFormat),
        });
        // Drawn by this session: fresh, even when the value did not change.
        s.subsFresh.add(id);
        this.#ctx?.setPathStale(where.path, false);
        if (this.#subs.status(id) !== 'live') {
          this.#subs.setStatus(id, 'live');
          this.#publishSubs();
        }
        return;
      }
      case 'DEVICE-CONFIG':
        return;
    }
    // Companion: "expect more messages and parameters over time" — unknown lines are ignored, never fatal.
    this.#ctx?.logger.debug({ line: raw.slice(0, 200) }, 'companion line ignored');
  }

  /** Clear stale on whatever the refresh did not rewrite, shortly after the key burst. */
  #freshSoon(s: Session): void {
    if (s.fresh) return;
    s.fresh = true;
    this.#timer(s, FRESH_SETTLE_MS, () => {
      // Locations Companion has not redrawn on this session stay stale (with their reason).
      if (this.#session === s)
        this.#ctx?.setConnected(true, (path) => this.#subs.unrestored(path, s.subsFresh));
    });
  }

  // ------------------------------------------------------------------------------------------ registration

  async #register(s: Session): Promise<void> {
    s.phase = 'register';
    const d = this.#o.device;
    const f = s.features;
    const format = d.bitmaps > 0 ? bitmapFormatFor(f, d.bitmapFormat ?? 'rgb') : undefined;
    s.imageFormat = d.bitmaps > 0 ? (format ?? 'rgb') : undefined;
    const args: Record<string, SatelliteValue | undefined> = {
      DEVICEID: d.deviceId,
      PRODUCT_NAME: d.productName,
      KEYS_TOTAL: d.keysTotal,
      KEYS_PER_ROW: d.keysPerRow,
      BITMAPS: d.bitmaps > 0 ? (f.bitmapSize ? d.bitmaps : true) : false,
      BITMAP_FORMAT: format,
      COLORS: d.colors ? (f.rowColumn ? d.colors : true) : false,
      TEXT: d.text,
      TEXT_STYLE: f.textStyle ? d.textStyle : undefined,
      BRIGHTNESS: f.variables ? d.brightness : undefined,
      VARIABLES:
        f.variables && d.variables.length > 0
          ? toBase64(
              JSON.stringify(
                d.variables.map((v) => ({
                  id: v.id,
                  type: v.type,
                  name: v.name,
                  description: v.description ?? '',
                })),
              ),
            )
          : undefined,
      PINCODE_LOCK: f.lockedState && d.pincodeLock ? 'FULL' : undefined,
      SERIAL: f.caps && d.serial ? d.serial : undefined,
    };
    this.#set('companion.capabilities', {
      apiVersion: s.apiVersion,
      companionVersion: s.companionVersion,
      caps: capsValue(s.caps),
      features: { ...f },
      ...(s.imageFormat ? { bitmapFormat: s.imageFormat } : {}),
    });
    try {
      await this.#request(s, 'ADD-DEVICE', args, this.#o.connectionTimeout);
    } catch (err) {
      this.#fail(
        s,
        err instanceof ReplyError ? 'error' : 'reconnecting',
        `ADD-DEVICE refused: ${(err as Error).message}`,
      );
      return;
    }
    if (this.#session !== s) return;
    s.phase = 'live';
    this.#attempt = 0;
    this.#failover = undefined;
    this.#set('companion.connection.lastConnected', this.#wall());
    this.#publishActive(s, true);
    this.#setState('connected');
    const outage = this.#history.registered(this.#linkHost(s.hostIndex), this.#wall());
    if (outage) {
      // One event for the whole outage, however many attempts it took (docs/console.md "Link events").
      this.#set('companion.connection.events', this.#history.list());
      this.#ctx?.emitEvent('companion.connection', outage.kind, outage);
      this.#ctx?.logger.warn({ ...outage }, `companion ${outage.kind} after ${outage.durationMs} ms`);
    }
    this.#ctx?.logger.info(
      { apiVersion: s.apiVersion, companion: s.companionVersion, host: s.host.host, port: s.host.port },
      'companion surface registered',
    );
    this.#restoreSubs(s);
    this.#timer(s, this.#o.refreshTimeout, () => this.#freshSoon(s));
    void this.#releaseHeld(s);
  }

  // ------------------------------------------------------------------------------------------ held keys

  #publishHeld(): void {
    this.#set('companion.held', this.#held.value());
  }

  /** Record a press about to be sent (before the line goes out, so a crash right after still knows). */
  #hold(s: Session, t: HeldTarget, correlationId: string): void {
    const h = {
      ...t,
      host: s.host.host,
      port: s.host.port,
      deviceId: this.#o.device.deviceId,
      since: this.#wall(),
      correlationId,
    };
    if (!this.#held.hold(h)) throw new Error('too many keys held on Companion; press refused');
    this.#publishHeld();
  }

  #confirmRelease(s: Session, t: HeldTarget): void {
    if (this.#held.release(s.host, t)) this.#publishHeld();
  }

  /**
   * Release, on the Companion this session is linked to, every key a press left held there (crash, restart,
   * lost link or failover before its release was confirmed). Companion keeps a departed surface's key
   * pressed; the release goes to the same surface id. Logged and counted per key.
   */
  async #releaseHeld(s: Session): Promise<void> {
    const dev = this.#o.device.deviceId;
    for (const h of this.#held.on(s.host)) {
      if (this.#session !== s) return;
      const log = this.#ctx?.logger;
      if (h.deviceId !== dev) {
        // Another surface id: this surface cannot release it; reported once and forgotten.
        this.#held.releasedByBridge(h);
        this.#publishHeld();
        log?.error({ held: h, deviceId: dev }, 'a key left held on another surface id cannot be released');
        continue;
      }
      try {
        if (h.kind === 'key') {
          await this.#request(
            s,
            'KEY-PRESS',
            { DEVICEID: dev, KEY: h.keyIndex, PRESSED: false },
            this.#o.replyTimeout,
          );
        } else {
          const id = subIdOf(h);
          await this.#ensureSub(s, id, { path: locationPath(h), page: h.page, row: h.row, column: h.column });
          await this.#request(s, 'SUB-PRESS', { SUBID: id, PRESSED: false }, this.#o.replyTimeout);
        }
      } catch (err) {
        log?.warn(
          { held: h, err: (err as Error).message },
          'could not release a key left held; retried on the next link',
        );
        return;
      }
      this.#held.releasedByBridge(h);
      this.#publishHeld();
      this.#ctx?.reportHeldReleased();
      log?.warn(
        { held: h, heldMs: this.#wall() - h.since, correlationId: h.correlationId },
        'released a key left held on Companion (its release was never confirmed)',
      );
      const path = h.kind === 'key' ? `companion.device.${this.#dev}.key.${h.keyIndex}` : locationPath(h);
      const data =
        h.kind === 'key'
          ? { deviceId: dev, keyIndex: h.keyIndex, reason: 'left_held' }
          : { page: h.page, row: h.row, column: h.column, reason: 'left_held' };
      this.#ctx?.emitEvent(path, 'released', data, { correlationId: h.correlationId });
    }
  }

  // ------------------------------------------------------------------------------------------ subscriptions

  /** `companion.subscriptions`: every remembered location, its status and why it is not live. */
  #publishSubs(): void {
    this.#set('companion.subscriptions', this.#subs.value());
  }

  /** A new session: send ADD-SUB again for every location an earlier session subscribed to. */
  #restoreSubs(s: Session): void {
    if (this.#subs.size === 0) return;
    if (!s.features.subscriptions) {
      const why = s.features.caps
        ? 'Companion has satellite subscriptions disabled (CAPS SUBSCRIPTIONS=0)'
        : `Companion ${s.companionVersion || '?'} (ApiVersion ${s.apiVersion}) has no ADD-SUB (needs 1.10.0)`;
      this.#subs.setAll('unavailable', `cannot restore: ${why}`);
      this.#publishSubs();
      return;
    }
    for (const [id, loc] of this.#subs.entries()) {
      this.#subs.setStatus(
        id,
        'restoring',
        'new Companion session: ADD-SUB sent again, waiting for its SUB-STATE',
      );
      this.#ensureSub(s, id, loc).catch((err: unknown) => {
        if (this.#session !== s) return;
        this.#subs.setStatus(id, 'failed', `ADD-SUB refused on the new session: ${(err as Error).message}`);
        this.#publishSubs();
      });
    }
    this.#publishSubs();
  }

  /** ADD-SUB once per session and location (a command and the restore share one request). */
  #ensureSub(s: Session, id: string, loc: SubLocation, signal?: AbortSignal): Promise<void> {
    if (s.subsLive.has(id)) return Promise.resolve();
    let p = s.subsAdding.get(id);
    if (!p) {
      p = this.#request(
        s,
        'ADD-SUB',
        {
          SUBID: id,
          LOCATION: `${loc.page}/${loc.row}/${loc.column}`,
          TEXT: true,
          COLORS: 'hex',
          // Bitmaps (and their encoding) are negotiated per subscription (SatelliteApi.ts `#addSub`).
          BITMAP: s.imageFormat ? this.#o.device.bitmaps : undefined,
          BITMAP_FORMAT: s.imageFormat && s.features.bitmapFormats.length > 0 ? s.imageFormat : undefined,
        },
        this.#o.replyTimeout,
      ).then(
        () => {
          s.subsAdding.delete(id);
          s.subsLive.add(id);
        },
        (err: unknown) => {
          s.subsAdding.delete(id);
          throw err;
        },
      );
      s.subsAdding.set(id, p);
    }
    if (!signal) return p;
    return raceAbort(p, signal);
  }

  /** Send `name` and wait for its `OK`/`ERROR` (FIFO per name); no answer within `timeoutMs` ends the session. */
  #request(
    s: Session,
    name: string,
    args: Record<string, SatelliteValue | undefined>,
    timeoutMs: number,
  ): Promise<SatelliteLine> {
    if (!s.open || this.#session !== s) return Promise.reject(new Error('not connected to Companion'));
    const line = formatClientLine(name, args);
    return new Promise<SatelliteLine>((resolve, reject) => {
      const queue = s.pending.get(name) ?? [];
      s.pending.set(name, queue);
      const entry: Pending = {
        resolve,
        reject,
        wake: this.#timer(s, timeoutMs, () => {
          const i = queue.indexOf(entry);
          if (i !== -1) queue.splice(i, 1);
          reject(new Error(`Companion did not answer ${name} within ${timeoutMs} ms`));
          // A lost reply leaves the FIFO matching unsure: start a clean session.
          this.#fail(s, 'reconnecting', `no reply to ${name}`);
        }),
      };
      queue.push(entry);
      this.#links.send(s.link, line);
    });
  }

  // ------------------------------------------------------------------------------------------ commands

  /**
   * Run one client command. `pollIo` lets the owner read lines already waiting in its socket before a silent
   * link is judged suspect (our own event loop may have been busy while Companion's lines waited).
   */
  async execute(
    cmd: AdapterCommand,
    signal: AbortSignal,
    pollIo: () => Promise<void> = () => Promise.resolve(),
  ): Promise<AdapterResult> {
    const s = this.#session;
    if (!s || s.phase !== 'live') {
      const message = `Companion is not connected (state ${this.#state})`;
      return {
        status: 'failed',
        error: {
          code: 'ADAPTER_ERROR',
          message: this.#failover ? `${message}: ${this.#failover}` : message,
          details: { state: this.#state, failover: this.#failover !== undefined },
        },
      };
    }
    // A link silent for two heartbeats is suspect (a hung Companion still accepts bytes into its socket and
    // would act on them when it resumes): nothing is sent, so this command can never run later.
    let silent = Math.round(this.#mono() - s.lastRx);
    if (silent > this.#suspectAfter) {
      await pollIo();
      silent = Math.round(this.#mono() - s.lastRx);
    }
    if (this.#session !== s || s.phase !== 'live') return this.execute(cmd, signal, pollIo);
    if (silent > this.#suspectAfter) {
      return {
        status: 'failed',
        error: {
          code: 'ADAPTER_ERROR',
          message:
            `Companion ${s.host.host}:${s.host.port} has sent nothing for ${silent} ms (hung or cut?): ` +
            'not sent, so it cannot run later',
          details: { state: this.#state, silentMs: silent, suspect: true },
        },
      };
    }
    const plan = planCommand(
      cmd.action,
      cmd.path,
      cmd.params,
      {
        deviceId: this.#o.device.deviceId,
        keysTotal: this.#o.device.keysTotal,
        keysPerRow: this.#o.device.keysPerRow,
        inputs: this.#inputs,
      },
      s.features,
      s.apiVersion,
    );
    if (plan.kind === 'reject') {
      return {
        status: 'rejected',
        error: { code: 'ADAPTER_ERROR', message: plan.reason, details: { apiVersion: s.apiVersion } },
      };
    }
    // The wire wait is always replyTimeout (a late OK must still find its request in the FIFO); the command's
    // own deadline only stops this command waiting (the hub then answers `timeout`).
    const timeout = this.#o.replyTimeout;
    try {
      const sent = await this.#run(s, plan, timeout, signal, cmd.correlationId);
      return { status: 'completed', result: { sent } };
    } catch (err) {
      const message = (err as Error).message;
      return {
        status: 'failed',
        error: {
          code: 'ADAPTER_ERROR',
          message: err instanceof ReplyError ? `Companion: ${message}` : message,
        },
      };
    }
  }

  async #run(
    s: Session,
    plan: Exclude<Plan, { kind: 'reject' }>,
    timeout: number,
    signal: AbortSignal,
    correlationId: string,
  ): Promise<string[]> {
    const sent: string[] = [];
    // `pressed` / `released` / `rotated` once Companion has acknowledged the line (docs/companion.md "Commands").
    const event = (path: string, name: string, data: Record<string, unknown>): void => {
      if (this.#session === s) this.#ctx?.emitEvent(path, name, data, { correlationId });
    };
    const send = async (name: string, args: Record<string, SatelliteValue | undefined>): Promise<void> => {
      if (signal.aborted) throw new Error('command deadline passed');
      const reply = this.#request(s, name, args, timeout);
      reply.catch(() => undefined);
      await raceAbort(reply, signal);
      sent.push(name);
    };
    const dev = this.#o.device.deviceId;
    if (plan.kind === 'variable') {
      await send('SET-VARIABLE-VALUE', {
        DEVICEID: dev,
        VARIABLE: plan.variable,
        VALUE: toBase64(plan.value),
      });
      return sent;
    }
    const t: Target = plan.target;
    if (t.kind === 'key') {
      const path = `companion.device.${this.#dev}.key.${t.keyIndex}`;
      const data = { deviceId: dev, keyIndex: t.keyIndex };
      const target: HeldTarget = { kind: 'key', keyIndex: t.keyIndex };
      if (plan.kind === 'press') {
        // A lone `up` for a key the bridge already released (link back after a lost release): not sent again.
        if (plan.pressed.length === 1 && plan.pressed[0] === false && this.#held.takeReleased(s.host, target))
          return sent;
        for (const down of plan.pressed) {
          if (down) this.#hold(s, target, correlationId);
          await send('KEY-PRESS', { DEVICEID: dev, KEY: t.keyIndex, PRESSED: down });
          if (!down) this.#confirmRelease(s, target);
          event(path, down ? 'pressed' : 'released', data);
        }
      } else if (plan.kind === 'rotate') {
        await send('KEY-ROTATE', { DEVICEID: dev, KEY: t.keyIndex, DIRECTION: plan.direction });
        event(path, 'rotated', { ...data, direction: plan.direction });
      }
      return sent;
    }
    const subId = subIdOf(t);
    const path = locationPath(t);
    if (plan.kind === 'unwatch') {
      if (this.#subs.isConfigured(subId))
        throw new Error(`${t.page}/${t.row}/${t.column} is configured in companion.locations: not removed`);
      if (!this.#subs.has(subId)) return sent;
      if (s.subsLive.has(subId)) {
        await send('REMOVE-SUB', { SUBID: subId });
        s.subsLive.delete(subId);
      }
      this.#subs.remove(subId);
      s.subsFresh.delete(subId);
      this.#publishSubs();
      this.#set(path, null);
      return sent;
    }
    if (!s.subsLive.has(subId)) {
      const isNew = !this.#subs.has(subId);
      if (isNew && this.#subs.size >= MAX_SUBSCRIPTIONS)
        throw new Error(`at most ${MAX_SUBSCRIPTIONS} absolute locations are subscribed`);
      if (isNew) {
        this.#subs.add(
          subId,
          { path, page: t.page, row: t.row, column: t.column },
          'ADD-SUB sent, waiting for its SUB-STATE',
        );
      }
      if (signal.aborted) throw new Error('command deadline passed');
      try {
        await this.#ensureSub(s, subId, { path, page: t.page, row: t.row, column: t.column }, signal);
      } catch (err) {
        if (isNew && !s.subsLive.has(subId)) {
          this.#subs.remove(subId);
        }
        throw err;
      }
      sent.push('ADD-SUB');
      if (isNew) this.#publishSubs();
    }
    if (plan.kind === 'watch') return sent;
    const data = { page: t.page, row: t.row, column: t.column };
    if (plan.kind === 'press') {
      const target: HeldTarget = { kind: 'sub', page: t.page, row: t.row, column: t.column };
      if (plan.pressed.length === 1 && plan.pressed[0] === false && this.#held.takeReleased(s.host, target))
        return sent;
      for (const down of plan.pressed) {
        if (down) this.#hold(s, target, correlationId);
        await send('SUB-PRESS', { SUBID: subId, PRESSED: down });
        if (!down) this.#confirmRelease(s, target);
        event(path, down ? 'pressed' : 'released', data);
      }
    } else if (plan.kind === 'rotate') {
      await send('SUB-ROTATE', { SUBID: subId, DIRECTION: plan.direction });
      event(path, 'rotated', { ...data, direction: plan.direction });
    }
    return sent;
  }
}

/** `p`, or a rejection once `signal` aborts (the command's deadline), whichever comes first. */
function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  return Promise.race([
    p,
    new Promise<never>((_, reject) =>
      signal.addEventListener('abort', () => reject(new Error('command deadline passed')), { once: true }),
    ),
  ]);
}
