/**
 * Companion adapter (namespace `companion`, source `companion.satellite`): registers the bridge as a virtual
 * surface through the real Satellite API, publishes what Companion draws and streams, and turns client
 * commands into Satellite messages, each acknowledged only after Companion's `OK` (docs/companion.md).
 *
 * Connection state (`companion.connection.state`): `connecting` (first attempt) → `connected` after BEGIN,
 * CAPS (≥ 1.10.0) and `ADD-DEVICE OK`; a lost, silent or refused link → `reconnecting` with exponential backoff
 * plus jitter; `error` when Companion is reachable but unusable (ApiVersion 2+, ADD-DEVICE refused, not a
 * Satellite server) or when `maxReconnectAttempts` is exhausted; `disconnected` when the adapter stops.
 */
import type { Adapter, AdapterCommand, AdapterContext, AdapterResult } from '../../domain/adapter.ts';
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
import { openLink, type SatelliteLink, type SatelliteTransport } from './link.ts';
import { HeldKeys, type HeldTarget } from './held-keys.ts';
import { LinkHistory, type LinkHost } from './link-history.ts';

export type CompanionConnectionState = 'disconnected' | 'connecting' | 'connected' | 'reconnecting' | 'error';

export interface CompanionVariable {
  /** Id declared to Companion; `group:name` publishes at `companion.variables.group.name`. */
  id: string;
  type: 'input' | 'output';
  name: string;
  description?: string | undefined;
}

export interface CompanionDevice {
  deviceId: string;
  productName: string;
  serial?: string;
  keysTotal: number;
  keysPerRow: number;
  /** Bitmap edge in px; 0 = no bitmaps (keys then carry text and colours only). */
  bitmaps: number;
  /** Preferred encoding of bitmaps; asked for only where CAPS BITMAP_FORMATS lists it (1.12.0). */
  bitmapFormat?: BitmapFormat;
  colors: 'hex' | 'rgb' | false;
  text: boolean;
  textStyle: boolean;
  /** Ask Companion for LOCKED-STATE instead of lock drawings (1.8.0). */
  pincodeLock: boolean;
  /** Receive BRIGHTNESS (opt-out needs 1.7.0). */
  brightness: boolean;
  variables: CompanionVariable[];
}

/** One Companion instance the adapter may use. */
export interface CompanionHost {
  host: string;
  port: number;
}

/** An absolute location the bridge subscribed to with ADD-SUB (docs/companion.md "Subscriptions"). */
interface SubLocation {
  path: string;
  page: number;
  row: number;
  column: number;
}

/** What `companion.subscriptions` says about one location. */
type SubStatus = 'live' | 'restoring' | 'stale' | 'failed' | 'unavailable';

const subIdOf = (l: { page: number; row: number; column: number }): string =>
  `tb-${l.page}-${l.row}-${l.column}`;
const locationPath = (l: { page: number; row: number; column: number }): string =>
  `companion.page.${l.page}.row.${l.row}.column.${l.column}`;

/** ADD-SUB locations remembered across sessions; beyond this a new location is refused (clients choose them). */
export const MAX_SUBSCRIPTIONS = 1024;

/** Keys that describe the link itself: written while the link is down, so never marked stale. */
const LINK_KEYS = (path: string): boolean => path.startsWith('companion.connection.');

export interface CompanionAdapterOptions {
  host: string;
  port: number;
  /**
   * Hot standby: Companion instances in order of preference (docs/companion.md "Hot standby"). When given,
   * `host`/`port` are ignored; the adapter uses the first that answers and moves to the next on a dead link.
   */
  hosts?: CompanionHost[];
  transport: SatelliteTransport;
  device: CompanionDevice;
  /** PING period; Companion drops a client after 5 s without inbound data. */
  heartbeatInterval: number;
  /** No line from Companion for this long (ms) = dead link. */
  deadAfter: number;
  connectionTimeout: number;
  replyTimeout: number;
  reconnectDelay: number;
  /** Hot standby: wait before the first try of each other host after a loss (later rounds back off). */
  failoverDelay?: number;
  maxReconnectDelay: number;
  reconnectJitter: number;
  /** 0 = retry forever. */
  maxReconnectAttempts: number;
  /** Longest wait for the key refresh after registration before stale flags are cleared anyway. */
  refreshTimeout: number;
  maxLineLength: number;
  /** Absolute locations `page/row/column` subscribed on every session that offers subscriptions. */
  locations?: string[];
  random?: () => number;
}

interface Pending {
  resolve(line: SatelliteLine): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

interface Session {
  link: SatelliteLink | undefined;
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
  lastRx: number;
  pingSeq: number;
  pings: Map<string, number>;
  timers: NodeJS.Timeout[];
  fresh: boolean;
}

class ReplyError extends Error {}

/**
 * Delay before reconnect attempt `n` (1-based): `reconnectDelay × 2^(n-1)` capped at `maxReconnectDelay`,
 * plus uniform jitter in [0, reconnectJitter) so many bridges do not hammer a restarting Companion together.
 */
export function backoffDelay(
  attempt: number,
  o: Pick<CompanionAdapterOptions, 'reconnectDelay' | 'maxReconnectDelay' | 'reconnectJitter'>,
  random: () => number = Math.random,
): number {
  const base = Math.min(o.maxReconnectDelay, o.reconnectDelay * 2 ** Math.min(30, Math.max(0, attempt - 1)));
  return Math.round(base + random() * o.reconnectJitter);
}

export class CompanionAdapter implements Adapter {
  readonly name = 'companion.satellite';
  readonly targets = ['companion'];
  readonly owns = ['companion'];
  readonly #o: CompanionAdapterOptions;
  readonly #random: () => number;
  readonly #dev: string;
  readonly #outputs: Map<string, string>;
  readonly #inputs: Set<string>;
  #ctx: AdapterContext | undefined;
  #state: CompanionConnectionState = 'disconnected';
  #session: Session | undefined;
  #attempt = 0;
  #retry: NodeJS.Timeout | undefined;
  #stopped = true;
  readonly #hosts: CompanionHost[];
  #hostIndex = 0;
  /** Why commands fail right now, while the adapter moves to another host. */
  #failover: string | undefined;
  readonly #subs = new Map<string, SubLocation>();
  readonly #subStatus = new Map<string, { status: SubStatus; reason?: string }>();
  /** Locations from `companion.locations`: subscribed on every session, never dropped by `unwatch`. */
  readonly #configured = new Set<string>();
  /** Presses whose release Companion has not confirmed (held-keys.ts), published as `companion.held`. */
  readonly #held = new HeldKeys();
  /** Each outage of the link as one event (link-history.ts), published as `companion.connection.events`. */
  #history = new LinkHistory();

  constructor(options: CompanionAdapterOptions) {
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
    for (const l of options.locations ?? []) {
      const loc = parseLocation(l);
      if (!loc || loc.page < 1 || this.#subs.size >= MAX_SUBSCRIPTIONS) continue;
      const id = subIdOf(loc);
      this.#subs.set(id, { path: locationPath(loc), ...loc });
      this.#configured.add(id);
      this.#subState(id, 'restoring', 'configured: waiting for a Companion session');
    }
  }

  /** Silence (ms) after which the link is suspect and commands are refused unsent. */
  get #suspectAfter(): number {
    return Math.max(2 * this.#o.heartbeatInterval, 300);
  }

  get state(): CompanionConnectionState {
    return this.#state;
  }

  capabilities(): Record<string, boolean | string | number> {
    const s = this.#session;
    const f = s?.features;
    return {
      transport: this.#o.transport,
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

  start(ctx: AdapterContext): void {
    this.#ctx = ctx;
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
    void this.#connect();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#retry) clearTimeout(this.#retry);
    const s = this.#session;
    if (s) {
      s.link?.send('QUIT\n');
      this.#end(s, 'adapter stopped');
    }
    this.#ctx?.setConnected(false);
    this.#setState('disconnected');
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

  async #connect(): Promise<void> {
    this.#retry = undefined;
    if (this.#stopped) return;
    const hostIndex = this.#hostIndex;
    const host = this.#hosts[hostIndex] ?? this.#hosts[0] ?? { host: this.#o.host, port: this.#o.port };
    const session: Session = {
      link: undefined,
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
      lastRx: Date.now(),
      pingSeq: 0,
      pings: new Map(),
      timers: [],
      fresh: false,
    };
    this.#session = session;
    const early: string[] = [];
    let link: SatelliteLink;
    try {
      link = await openLink(
        {
          transport: this.#o.transport,
          host: host.host,
          port: host.port,
          connectTimeoutMs: this.#o.connectionTimeout,
          maxLineLength: this.#o.maxLineLength,
        },
        {
          // Lines can arrive before the connect promise settles: hold them until the link is in place.
          line: (l) => (session.link ? this.#onLine(session, l) : early.push(l)),
          closed: (r) => this.#onClosed(session, r),
        },
      );
    } catch (err) {
      if (this.#session === session) this.#session = undefined;
      this.#scheduleRetry(`connect to ${host.host}:${host.port} failed: ${(err as Error).message}`);
      return;
    }
    if (this.#stopped || this.#session !== session) {
      link.close();
      return;
    }
    session.link = link;
    session.lastRx = Date.now();
    // Registration must finish within the connection timeout; the heartbeat also watches for silence.
    this.#timer(session, this.#o.connectionTimeout, () => {
      if (session.phase !== 'live')
        this.#fail(session, 'reconnecting', `no registration within ${this.#o.connectionTimeout} ms`);
    });
    const beat = setInterval(() => this.#heartbeat(session), this.#o.heartbeatInterval);
    session.timers.push(beat);
    for (const l of early.splice(0)) this.#onLine(session, l);
  }

  #linkHost(index: number): LinkHost {
    const h = this.#hosts[index] ?? { host: this.#o.host, port: this.#o.port };
    return { host: h.host, port: h.port, role: index === 0 ? 'primary' : 'backup' };
  }

  #timer(session: Session, ms: number, fn: () => void): void {
    session.timers.push(setTimeout(fn, ms));
  }

  #heartbeat(s: Session): void {
    const silent = Date.now() - s.lastRx;
    if (silent > this.#o.deadAfter) {
      this.#fail(s, 'reconnecting', `no data from Companion for ${silent} ms`);
      return;
    }
    const id = String(++s.pingSeq);
    s.pings.set(id, performance.now());
    for (const k of s.pings.keys()) {
      if (s.pings.size <= 16) break;
      s.pings.delete(k);
    }
    s.link?.send(`PING ${id}\n`);
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
    if (from) this.#history.lost(this.#linkHost(this.#hostIndex), reason, Date.now());
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
    this.#retry = setTimeout(() => {
      if (this.#state === 'error') this.#setState('reconnecting');
      void this.#connect();
    }, delay);
  }

  /** Tear the session down (timers, pending replies, socket). */
  #end(s: Session, reason: string): void {
    for (const t of s.timers) clearTimeout(t);
    for (const t of s.timers) clearInterval(t);
    s.timers = [];
    for (const queue of s.pending.values())
      for (const p of queue.splice(0)) {
        clearTimeout(p.timer);
        p.reject(new Error(`link lost before Companion answered (${reason})`));
      }
    if (this.#session === s) this.#session = undefined;
    s.link?.close(reason);
  }

  /** A live or half-open session failed: keys go stale, state moves, a retry is scheduled. */
  #fail(s: Session, to: 'reconnecting' | 'error', reason: string): void {
    if (this.#session !== s) return;
    this.#end(s, reason);
    this.#ctx?.setConnected(false, LINK_KEYS);
    // Keys redrawn by a session that ended before it was declared fresh are stale too.
    this.#ctx?.markStale(true, LINK_KEYS);
    this.#set('companion.connection.active', {
      connected: false,
      host: s.host.host,
      port: s.host.port,
      index: s.hostIndex,
      role: s.hostIndex === 0 ? 'primary' : 'backup',
      since: Date.now(),
      reason,
    });
    if (this.#subs.size > 0) {
      for (const id of this.#subs.keys()) this.#subState(id, 'stale', `Companion link lost: ${reason}`);
      this.#publishSubs();
    }
    if (to === 'error') this.#setState('error', reason);
    this.#scheduleRetry(reason);
  }

  #onClosed(s: Session, reason: string): void {
    this.#fail(s, 'reconnecting', reason);
  }

  // ------------------------------------------------------------------------------------------ inbound

  #onLine(s: Session, raw: string): void {
    if (this.#session !== s) return;
    s.lastRx = Date.now();
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
    clearTimeout(next.timer);
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
          this.#ctx?.reportLatency((performance.now() - t0) / 1000);
        }
        return;
      }
      case 'PING':
        s.link?.send(`PONG ${msg.body.trim()}\n`);
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
        if (this.#subStatus.get(id)?.status !== 'live') {
          this.#subState(id, 'live');
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

  /** Clear stale on whatever the refresh did not rewrite, shortly after the key burst (variables follow ~5-20 ms). */
  #freshSoon(s: Session): void {
    if (s.fresh) return;
    s.fresh = true;
    this.#timer(s, 50, () => {
      // Locations Companion has not redrawn on this session stay stale (with their reason).
      if (this.#session === s) this.#ctx?.setConnected(true, (path) => this.#unrestored(s, path));
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
    this.#set('companion.connection.lastConnected', Date.now());
    this.#set('companion.connection.active', {
      connected: true,
      host: s.host.host,
      port: s.host.port,
      index: s.hostIndex,
      role: s.hostIndex === 0 ? 'primary' : 'backup',
      since: Date.now(),
    });
    this.#setState('connected');
    const outage = this.#history.registered(this.#linkHost(s.hostIndex), Date.now());
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
      since: Date.now(),
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
          const id = `tb-${h.page}-${h.row}-${h.column}`;
          const path = `companion.page.${h.page}.row.${h.row}.column.${h.column}`;
          await this.#ensureSub(s, id, { path, page: h.page, row: h.row, column: h.column });
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
        { held: h, heldMs: Date.now() - h.since, correlationId: h.correlationId },
        'released a key left held on Companion (its release was never confirmed)',
      );
      const path =
        h.kind === 'key'
          ? `companion.device.${this.#dev}.key.${h.keyIndex}`
          : `companion.page.${h.page}.row.${h.row}.column.${h.column}`;
      const data =
        h.kind === 'key'
          ? { deviceId: dev, keyIndex: h.keyIndex, reason: 'left_held' }
          : { page: h.page, row: h.row, column: h.column, reason: 'left_held' };
      this.#ctx?.emitEvent(path, 'released', data, { correlationId: h.correlationId });
    }
  }

  // ------------------------------------------------------------------------------------------ subscriptions

  /** A location subscribed earlier but not redrawn by this session (kept stale). */
  #unrestored(s: Session, path: string): boolean {
    if (!path.startsWith('companion.page.')) return false;
    for (const [id, loc] of this.#subs) if (loc.path === path) return !s.subsFresh.has(id);
    return false;
  }

  #subState(id: string, status: SubStatus, reason?: string): void {
    this.#subStatus.set(id, reason === undefined ? { status } : { status, reason });
  }

  /** `companion.subscriptions`: every remembered location, its status and why it is not live. */
  #publishSubs(): void {
    const out: Record<string, unknown> = {};
    for (const [id, loc] of this.#subs) {
      const st = this.#subStatus.get(id) ?? { status: 'restoring' };
      out[`${loc.page}/${loc.row}/${loc.column}`] = { path: loc.path, ...st };
    }
    this.#set('companion.subscriptions', out);
  }

  /** A new session: send ADD-SUB again for every location an earlier session subscribed to. */
  #restoreSubs(s: Session): void {
    if (this.#subs.size === 0) return;
    if (!s.features.subscriptions) {
      const why = s.features.caps
        ? 'Companion has satellite subscriptions disabled (CAPS SUBSCRIPTIONS=0)'
        : `Companion ${s.companionVersion || '?'} (ApiVersion ${s.apiVersion}) has no ADD-SUB (needs 1.10.0)`;
      for (const id of this.#subs.keys()) this.#subState(id, 'unavailable', `cannot restore: ${why}`);
      this.#publishSubs();
      return;
    }
    for (const [id, loc] of this.#subs) {
      this.#subState(id, 'restoring', 'new Companion session: ADD-SUB sent again, waiting for its SUB-STATE');
      this.#ensureSub(s, id, loc).catch((err: unknown) => {
        if (this.#session !== s) return;
        this.#subState(id, 'failed', `ADD-SUB refused on the new session: ${(err as Error).message}`);
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
    return Promise.race([
      p,
      new Promise<never>((_, reject) =>
        signal.addEventListener('abort', () => reject(new Error('command deadline passed')), { once: true }),
      ),
    ]);
  }

  #request(
    s: Session,
    name: string,
    args: Record<string, SatelliteValue | undefined>,
    timeoutMs: number,
  ): Promise<SatelliteLine> {
    const link = s.link;
    if (!link || this.#session !== s) return Promise.reject(new Error('not connected to Companion'));
    const line = formatClientLine(name, args);
    return new Promise<SatelliteLine>((resolve, reject) => {
      const queue = s.pending.get(name) ?? [];
      s.pending.set(name, queue);
      const entry: Pending = {
        resolve,
        reject,
        timer: setTimeout(() => {
          const i = queue.indexOf(entry);
          if (i !== -1) queue.splice(i, 1);
          reject(new Error(`Companion did not answer ${name} within ${timeoutMs} ms`));
          // A lost reply leaves the FIFO matching unsure: start a clean session.
          this.#fail(s, 'reconnecting', `no reply to ${name}`);
        }, timeoutMs),
      };
      queue.push(entry);
      link.send(line);
    });
  }

  // ------------------------------------------------------------------------------------------ commands

  async execute(cmd: AdapterCommand, signal: AbortSignal): Promise<AdapterResult> {
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
    let silent = Date.now() - s.lastRx;
    if (silent > this.#suspectAfter) {
      // Our own event loop may have been busy while Companion's lines waited in the socket: let one I/O
      // poll phase read them before judging the link.
      await new Promise((r) => setImmediate(r));
      silent = Date.now() - s.lastRx;
    }
    if (this.#session !== s || s.phase !== 'live') return this.execute(cmd, signal);
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
      await Promise.race([
        reply,
        new Promise<never>((_, reject) =>
          signal.addEventListener('abort', () => reject(new Error('command deadline passed')), {
            once: true,
          }),
        ),
      ]);
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
      if (this.#configured.has(subId))
        throw new Error(`${t.page}/${t.row}/${t.column} is configured in companion.locations: not removed`);
      if (!this.#subs.has(subId)) return sent;
      if (s.subsLive.has(subId)) {
        await send('REMOVE-SUB', { SUBID: subId });
        s.subsLive.delete(subId);
      }
      this.#subs.delete(subId);
      this.#subStatus.delete(subId);
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
        this.#subs.set(subId, { path, page: t.page, row: t.row, column: t.column });
        this.#subState(subId, 'restoring', 'ADD-SUB sent, waiting for its SUB-STATE');
      }
      if (signal.aborted) throw new Error('command deadline passed');
      try {
        await this.#ensureSub(s, subId, { path, page: t.page, row: t.row, column: t.column }, signal);
      } catch (err) {
        if (isNew && !s.subsLive.has(subId)) {
          this.#subs.delete(subId);
          this.#subStatus.delete(subId);
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
