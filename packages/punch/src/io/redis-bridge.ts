import { randomBytes } from 'node:crypto';
import type { Clock, Logger } from '@broadcast-ops/core';
import type { AccessChecker, AccessRefusal } from '../domain/access.ts';
import type { SessionBroker } from '../domain/broker.ts';
import type { EndReason, PeerLink, SignallingHub } from '../domain/signalling.ts';
import type { TokenClaims } from '../protocol/token.ts';
import { WS_CLOSE, encode, type ClientMessage, type WsErrorCode } from '../protocol/ws-messages.ts';
import type { BusMessage, RedisCluster } from './redis-cluster.ts';

/**
 * The WebSocket bridge between instances (docs/multi-instance.md "How it works"), after LiveKit's
 * pattern: the instance that holds a peer's socket relays it to the instance that owns the sessions over
 * the Redis bus. On the owner, a bridged socket is a `RemoteLink`: the signalling hub handles it like a
 * local connection (same checks, same message order); what the hub sends it is published to the socket's
 * instance, in order.
 *
 * Socket side (`BridgedSocket`): token checked locally (signature, session name, expiry), frames limited
 * and parsed locally, then `open`, `msg` and `close` go to the owner. Owner side: `open` runs the same
 * session checks as a local connection, then `hub.attach`. An instance whose heartbeat expired is gone:
 * the owner detaches its links, so their partners see the departure as with a local socket that closed.
 */

/** What the bridge needs of a local socket (src/io/ws-server.ts `WsLink`). */
export interface BridgedSocket {
  readonly ip: string;
  send(text: string): void;
  end(reason: EndReason): void;
  probe(timeoutMs: number): Promise<boolean>;
  /** Close with a code and reason (refused by the owner, or the owner is gone). */
  closeWith(code: number, reason: string): void;
}

export interface RemoteHandle {
  message(m: ClientMessage): void;
  close(why: string): void;
}

export interface BridgeOptions {
  cluster: RedisCluster;
  broker: SessionBroker;
  hub: SignallingHub;
  access: AccessChecker;
  clock: Clock;
  logger: Logger;
  holderOf: (token: string) => string;
  /** A bridged peer-token connection that holds no slot this long after joining is closed (4408). */
  registerDeadlineMs: number;
  /** Whether the owner's broker is loaded and serving. */
  ownerReady: () => boolean;
}

function closeCodeOf(r: AccessRefusal): number {
  if (r.code === 'SESSION_EXPIRED') return WS_CLOSE.sessionExpired;
  return 'reason' in r && r.reason === 'other_session' ? WS_CLOSE.forbidden : WS_CLOSE.authFailed;
}

/** Close code 1012 (service restart, RFC 6455 7.4.1 registry): the owner changed; reconnect. */
const SERVICE_RESTART = 1012;
/** Close code 1013 (try again later): no owner reachable now. */
const TRY_AGAIN_LATER = 1013;

class RemoteLink implements PeerLink {
  readonly ip: string;
  readonly claims: TokenClaims;
  readonly holder: string;
  readonly conn: string;
  readonly from: string;
  readonly #bridge: RedisBridge;

  constructor(
    bridge: RedisBridge,
    conn: string,
    from: string,
    ip: string,
    claims: TokenClaims,
    holder: string,
  ) {
    this.#bridge = bridge;
    this.conn = conn;
    this.from = from;
    this.ip = ip;
    this.claims = claims;
    this.holder = holder;
  }

  send(text: string): void {
    this.#bridge.toSocket(this, { t: 'send', conn: this.conn, text });
  }

  end(reason: EndReason): void {
    this.#bridge.toSocket(this, { t: 'end', conn: this.conn, reason });
  }

  probe(timeoutMs: number): Promise<boolean> {
    return this.#bridge.probeRemote(this, timeoutMs);
  }
}

export class RedisBridge {
  readonly #o: BridgeOptions;
  /** Owner side: bridged connections by id. */
  readonly #remote = new Map<string, RemoteLink>();
  readonly #deadlines = new Map<string, NodeJS.Timeout>();
  /** Socket side: local sockets relayed to the owner, by connection id, with the owner they joined. */
  readonly #local = new Map<string, { socket: BridgedSocket; owner: string }>();
  readonly #probes = new Map<string, (alive: boolean) => void>();
  #seq = 0;
  readonly #reaper: NodeJS.Timeout;
  #reaping = false;

  constructor(options: BridgeOptions) {
    this.#o = options;
    options.cluster.subscribe((m) => this.#onBus(m));
    this.#reaper = setInterval(() => void this.#reap(), 1_000);
    this.#reaper.unref();
  }

  get bridgedSockets(): number {
    return this.#local.size;
  }

  get remoteLinks(): number {
    return this.#remote.size;
  }

  // --- socket side

  /** Relay a local, token-checked socket to the owner. Returns null (and closes it) when no owner is reachable. */
  open(socket: BridgedSocket, name: string, token: string): RemoteHandle | null {
    const { cluster } = this.#o;
    const owner = cluster.leader;
    if (owner === null || !cluster.reachable) {
      socket.closeWith(TRY_AGAIN_LATER, 'no broker instance reachable; try again');
      return null;
    }
    const conn = `${cluster.id}.${(this.#seq++).toString(36)}`;
    this.#local.set(conn, { socket, owner });
    const send = (m: BusMessage, onFail?: () => void): void => {
      cluster.publish(owner, m).catch(() => onFail?.());
    };
    send({ t: 'open', conn, from: cluster.id, ip: socket.ip, name, token }, () => {
      this.#local.delete(conn);
      socket.closeWith(TRY_AGAIN_LATER, 'the owning broker instance is unreachable; try again');
    });
    return {
      message: (m) =>
        send({ t: 'msg', conn, m }, () =>
          socket.send(
            encode({
              type: 'error',
              code: 'SERVER_ERROR',
              message: 'the owning broker instance is unreachable; the message was not handled',
            }),
          ),
        ),
      close: (why) => {
        if (this.#local.delete(conn)) send({ t: 'close', conn, why });
      },
    };
  }

  /**
   * Another instance owns the sessions: sockets relayed to the old owner are closed (1012) so that their
   * peers reconnect. No owner known (null) is not a change: after a Redis outage longer than the lease the
   * lease key is gone until the owner renews it, which it does as soon as Redis answers, while the others
   * wait half a lease before an election (redis-cluster.ts `#tick`); the sockets stay relayed to the owner
   * they joined, and are closed only once another instance is elected (docs/multi-instance.md "Failures").
   */
  ownerChanged(owner: string | null): void {
    if (owner === null) return;
    for (const [conn, l] of this.#local) {
      if (l.owner === owner) continue;
      this.#local.delete(conn);
      l.socket.closeWith(SERVICE_RESTART, 'the owning broker instance changed; reconnect');
    }
  }

  /**
   * Redis is back after a loss: messages of the outage may be lost, so the socket side tells the owner
   * which of its connections are still open, and the owner detaches the others.
   */
  resync(attempt = 0): void {
    const { cluster } = this.#o;
    const byOwner = new Map<string, string[]>();
    for (const [conn, l] of this.#local) byOwner.set(l.owner, [...(byOwner.get(l.owner) ?? []), conn]);
    const sent = [...byOwner].map(([owner, conns]) =>
      cluster.publish(owner, { t: 'sync', from: cluster.id, conns }).then(
        () => true,
        () => false,
      ),
    );
    // The owner may not listen yet (its own connection comes back too): try again, a bounded number of times.
    void Promise.all(sent).then((ok) => {
      if (ok.every(Boolean) || attempt >= 20) return;
      setTimeout(() => this.resync(attempt + 1), 500).unref();
    });
  }

  // --- owner side

  toSocket(link: RemoteLink, m: BusMessage): void {
    if (m.t === 'end') this.#forget(link.conn);
    // A message lost while Redis is down is not retried (docs/multi-instance.md "Failures").
    this.#o.cluster.publish(link.from, m).catch(() => undefined);
  }

  probeRemote(link: RemoteLink, timeoutMs: number): Promise<boolean> {
    const id = randomBytes(6).toString('base64url');
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#probes.delete(id);
        resolve(false);
      }, timeoutMs + 1_000);
      this.#probes.set(id, (alive) => {
        clearTimeout(timer);
        this.#probes.delete(id);
        resolve(alive);
      });
      this.#o.cluster
        .publish(link.from, { t: 'probe', conn: link.conn, id, ms: timeoutMs, from: this.#o.cluster.id })
        .catch(() => this.#probes.get(id)?.(false));
    });
  }

  #refuse(from: string, conn: string, code: WsErrorCode, message: string, closeCode: number): void {
    this.#o.cluster.publish(from, { t: 'refuse', conn, code, message, closeCode }).catch(() => undefined);
  }

  #onOpen(m: BusMessage): void {
    const { access, broker, hub, clock, cluster } = this.#o;
    const conn = String(m['conn']);
    const from = String(m['from']);
    const name = String(m['name']);
    const token = String(m['token']);
    if (!cluster.isOwner || !this.#o.ownerReady()) {
      this.#refuse(
        from,
        conn,
        'SERVER_ERROR',
        'this instance does not own the sessions now',
        TRY_AGAIN_LATER,
      );
      return;
    }
    const auth = access.authenticate(token, name, clock.now());
    if (!auth.ok) {
      this.#refuse(from, conn, auth.code, auth.message, closeCodeOf(auth));
      return;
    }
    const live = access.liveSession(broker.get(name), name, auth.claims);
    if (!live.ok) {
      this.#refuse(from, conn, live.code, live.message, closeCodeOf(live));
      return;
    }
    const link = new RemoteLink(this, conn, from, String(m['ip']), auth.claims, this.#o.holderOf(token));
    this.#remote.set(conn, link);
    const joined = hub.attach(link, name);
    if (!joined.ok) {
      this.#remote.delete(conn);
      this.#refuse(
        from,
        conn,
        joined.code,
        joined.message,
        joined.code === 'SESSION_FULL' ? WS_CLOSE.rateLimited : WS_CLOSE.sessionExpired,
      );
      return;
    }
    if (auth.claims.role !== 'admin') {
      const ms = this.#o.registerDeadlineMs;
      const timer = setTimeout(() => {
        this.#deadlines.delete(conn);
        if (!this.#remote.has(conn) || hub.holdsSlot(link) || hub.watches(link)) return;
        link.send(
          encode({
            type: 'error',
            code: 'INVALID_MESSAGE',
            message: `register: a peer connection must register within ${ms} ms`,
          }),
        );
        this.#detach(conn, 'no register in time');
        this.#refuse(from, conn, 'INVALID_MESSAGE', 'no register in time', WS_CLOSE.registerTimeout);
      }, ms);
      timer.unref();
      this.#deadlines.set(conn, timer);
    }
  }

  #forget(conn: string): void {
    this.#remote.delete(conn);
    clearTimeout(this.#deadlines.get(conn));
    this.#deadlines.delete(conn);
  }

  #detach(conn: string, why: string): void {
    const link = this.#remote.get(conn);
    if (!link) return;
    this.#forget(conn);
    this.#o.hub.detach(link, why);
  }

  /** Detach the links of instances whose heartbeat expired (checked once Redis has been up a heartbeat). */
  async #reap(): Promise<void> {
    const { cluster } = this.#o;
    if (this.#reaping || !cluster.isOwner || this.#remote.size === 0) return;
    if (cluster.upForMs() < cluster.heartbeatTtlMs) return;
    this.#reaping = true;
    try {
      const instances = new Set([...this.#remote.values()].map((l) => l.from));
      for (const id of instances) {
        if (id === cluster.id || (await cluster.alive(id))) continue;
        this.#o.logger.warn(
          { instance: id },
          'broker instance gone (heartbeat expired); its peers are absent',
        );
        for (const [conn, l] of this.#remote) if (l.from === id) this.#detach(conn, 'instance gone');
      }
    } catch {
      /* Redis unreachable: tried again in a second */
    } finally {
      this.#reaping = false;
    }
  }

  #onBus(m: BusMessage): void {
    switch (m.t) {
      // owner side
      case 'open':
        this.#onOpen(m);
        return;
      case 'msg': {
        const link = this.#remote.get(String(m['conn']));
        if (link) this.#o.hub.handle(link, m['m'] as ClientMessage);
        return;
      }
      case 'close':
        this.#detach(String(m['conn']), String(m['why']));
        return;
      case 'sync': {
        const open = new Set((m['conns'] as string[] | undefined) ?? []);
        for (const [conn, l] of this.#remote) {
          if (l.from === m['from'] && !open.has(conn)) this.#detach(conn, 'closed while Redis was lost');
        }
        return;
      }
      case 'probed':
        this.#probes.get(String(m['id']))?.(m['alive'] === true);
        return;
      // socket side
      case 'send':
        this.#local.get(String(m['conn']))?.socket.send(String(m['text']));
        return;
      case 'end': {
        const l = this.#local.get(String(m['conn']));
        if (!l) return;
        this.#local.delete(String(m['conn']));
        const reason = m['reason'];
        l.socket.end(reason === 'replaced' || reason === 'revoked' ? reason : 'session_closed');
        return;
      }
      case 'refuse': {
        const conn = String(m['conn']);
        const l = this.#local.get(conn);
        if (!l) return;
        this.#local.delete(conn);
        l.socket.send(
          encode({ type: 'error', code: m['code'] as WsErrorCode, message: String(m['message']) }),
        );
        l.socket.closeWith(Number(m['closeCode']), String(m['code']));
        return;
      }
      case 'probe': {
        const l = this.#local.get(String(m['conn']));
        const reply = (alive: boolean): void => {
          this.#o.cluster
            .publish(String(m['from']), { t: 'probed', id: m['id'], alive })
            .catch(() => undefined);
        };
        if (!l) reply(false);
        else void l.socket.probe(Number(m['ms'])).then(reply);
        return;
      }
      default:
        return;
    }
  }

  stop(): void {
    clearInterval(this.#reaper);
    for (const t of this.#deadlines.values()) clearTimeout(t);
    this.#deadlines.clear();
    for (const l of this.#local.values()) l.socket.closeWith(WS_CLOSE.goingAway, 'server shutting down');
    this.#local.clear();
  }
}
