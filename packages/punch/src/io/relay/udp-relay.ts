import { createSocket, type Socket } from 'node:dgram';
import { isIP } from 'node:net';
import { systemClock, type Clock, type TimerHandle } from '@broadcast-ops/core';
import {
  RelayAllocations,
  type AllocationRequest,
  type AllocationView,
  type EndReason,
  type RefuseReason,
  type RelayLimits,
  type Side,
} from '../../domain/relay-allocations.ts';
import {
  RelayPathMeter,
  emptyTotals,
  type DirectionFigures,
  type PathTotals,
} from '../../domain/relay-path-meter.ts';

/**
 * The opaque UDP relay (packages/punch/docs/relay.md): two UDP ports per allocation, one per peer. Each peer
 * runs SRT in rendezvous mode towards its own port on the relay; a datagram that the allocation admits on one
 * port leaves by the other port towards the other peer's latched address, so each peer sees its rendezvous
 * partner at the relay port it talks to (libsrt drops packets from any other source address). Payloads are
 * never read, copied or queued here: a datagram is sent on as it arrived or dropped, and dropped too when the
 * kernel has not taken the previous sends (`maxSendQueue`), so a slow path never grows a buffer in this process.
 */
export interface UdpRelayOptions {
  /** Address the relay ports bind to. */
  host: string;
  /** Ports to allocate from, inclusive (the firewall opens this range); [0, 0] for ephemeral ports. */
  portRange: readonly [number, number];
  /** Datagrams a side may have handed to the kernel but not yet sent before further ones are dropped. */
  maxSendQueue: number;
  /**
   * How often expiry and idle timeouts are checked while allocations exist (docs/relay.md "Bounds");
   * with none the sweep sleeps until the next allocation.
   */
  sweepMs: number;
  limits: Partial<RelayLimits>;
  clock: Clock;
}

export interface RelayAllocation extends AllocationView {
  /** The relay's port for each side: side 0's peer sends to ports[0], side 1's to ports[1]. */
  ports: readonly [number, number];
}

type Refused = { ok: false; reason: RefuseReason | 'no_port' | 'closed' };

export class UdpRelay {
  readonly allocations: RelayAllocations;
  readonly #o: UdpRelayOptions;
  readonly #sockets = new Map<string, [Socket, Socket]>();
  readonly #usedPorts = new Set<number>();
  readonly #meters = new Map<string, RelayPathMeter>();
  /** What the meters saw, summed over every allocation, ended ones included (docs/relay.md "Counters"). */
  readonly pathTotals: PathTotals = emptyTotals();
  #sweep: TimerHandle | undefined;
  #closed = false;
  /** Datagrams dropped because the kernel had not drained the socket's earlier sends. */
  sendQueueDrops = 0;
  /** Errors from the sockets (an ICMP unreachable reported on a later send, for example). */
  socketErrors = 0;
  onEnd: (id: string, reason: EndReason) => void = () => {};
  /** Called on each sweep with every allocation's path figures (the RTT histogram samples them). */
  onSweep: (figures: readonly (readonly [DirectionFigures, DirectionFigures])[]) => void = () => {};

  constructor(options: Partial<UdpRelayOptions> = {}) {
    this.#o = {
      host: options.host ?? '0.0.0.0',
      portRange: options.portRange ?? [0, 0],
      maxSendQueue: options.maxSendQueue ?? 64,
      sweepMs: options.sweepMs ?? 1000,
      limits: options.limits ?? {},
      clock: options.clock ?? systemClock,
    };
    this.allocations = new RelayAllocations(this.#o.clock, this.#o.limits);
  }

  async allocate(req: AllocationRequest): Promise<({ ok: true } & RelayAllocation) | Refused> {
    if (this.#closed) return { ok: false, reason: 'closed' };
    const result = this.allocations.allocate(req);
    if (!result.ok) return result;
    const { id } = result.allocation;
    this.#meters.set(id, new RelayPathMeter(this.#o.clock, this.pathTotals));
    if (!this.#sweep) this.#scheduleSweep();
    let ports: readonly [number, number];
    try {
      ports = [(await this.#bind(id, 0)).address().port, (await this.#bind(id, 1)).address().port];
    } catch {
      this.allocations.release(id);
      await this.#closeSockets(id);
      this.#meters.delete(id);
      return { ok: false, reason: 'no_port' };
    }
    return { ok: true, ...result.allocation, ports };
  }

  /** Extends an allocation (relay-allocations.ts `renew`); undefined when it is gone. */
  renew(id: string, lifetimeMs: number): number | undefined {
    return this.allocations.renew(id, lifetimeMs);
  }

  /** What the relay measured on allocation `id` per media direction (index: the sending side). */
  pathFigures(id: string): [DirectionFigures, DirectionFigures] | undefined {
    return this.#meters.get(id)?.figures();
  }

  release(id: string): boolean {
    const had = this.allocations.release(id);
    void this.#closeSockets(id);
    if (had) this.onEnd(id, 'released');
    return had;
  }

  /** Releases every allocation; resolves once all of their sockets are closed. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#sweep?.cancel();
    const closing: Promise<void>[] = [];
    for (const a of this.allocations.list()) {
      closing.push(this.#closeSockets(a.id));
      if (this.allocations.release(a.id)) this.onEnd(a.id, 'released');
    }
    await Promise.all(closing);
  }

  /**
   * Every `sweepMs` while an allocation exists; the last one gone, the sweep sleeps (no timer: an idle
   * broker's relay wakes nothing, docs/at-rest.md) until `allocate` starts it again.
   */
  #scheduleSweep(): void {
    if (this.#closed) return;
    this.#sweep = this.#o.clock.setTimer(this.#o.sweepMs, () => {
      this.#sweep = undefined;
      for (const { id, reason } of this.allocations.sweep()) {
        void this.#closeSockets(id);
        this.onEnd(id, reason);
      }
      if (this.#meters.size > 0) this.onSweep([...this.#meters.values()].map((m) => m.figures()));
      if (this.allocations.size > 0) this.#scheduleSweep();
    });
  }

  /** True while the sweep timer is armed (tests; docs/relay.md "Bounds"). */
  get sweeping(): boolean {
    return this.#sweep !== undefined;
  }

  #closeSockets(id: string): Promise<void> {
    const pair = this.#sockets.get(id);
    this.#sockets.delete(id);
    this.#meters.delete(id);
    const closing: Promise<void>[] = [];
    for (const s of pair ?? []) {
      try {
        this.#usedPorts.delete(s.address().port);
        closing.push(new Promise<void>((resolve) => s.close(() => resolve())));
      } catch {
        /* never bound, or closed already */
      }
    }
    return Promise.all(closing).then(() => undefined);
  }

  async #bind(id: string, side: Side): Promise<Socket> {
    const [lo, hi] = this.#o.portRange;
    const candidates = lo === 0 ? [0] : Array.from({ length: hi - lo + 1 }, (_, i) => lo + i);
    for (const port of candidates) {
      if (this.#usedPorts.has(port)) continue;
      const socket = createSocket(isIP(this.#o.host) === 6 ? 'udp6' : 'udp4');
      const bound = await new Promise<boolean>((resolve) => {
        socket.once('error', () => resolve(false));
        socket.bind(port, this.#o.host, () => resolve(true));
      });
      if (!bound) {
        socket.close();
        continue;
      }
      this.#usedPorts.add(socket.address().port);
      const pair = this.#sockets.get(id) ?? ([] as unknown as [Socket, Socket]);
      pair[side] = socket;
      this.#sockets.set(id, pair);
      socket.on('error', () => this.socketErrors++);
      socket.on('message', (msg, rinfo) => this.#forward(id, side, msg, rinfo.address, rinfo.port));
      return socket;
    }
    throw new Error('no free relay port');
  }

  #forward(id: string, side: Side, msg: Buffer, address: string, port: number): void {
    const verdict = this.allocations.admit(id, side, { address, port }, msg.length);
    // docs/relay.md "What the relay measures": every datagram from the side's own peer is metered by its
    // header (also those the relay then drops, so its own drops are not taken for loss upstream).
    if (verdict.forward || verdict.reason === 'over_rate' || verdict.reason === 'peer_not_latched')
      this.#meters.get(id)?.observe(side, msg);
    if (!verdict.forward) return;
    const out = this.#sockets.get(id)?.[side === 0 ? 1 : 0];
    if (!out) return;
    if (out.getSendQueueCount() >= this.#o.maxSendQueue) {
      this.sendQueueDrops++;
      return;
    }
    out.send(msg, verdict.to.port, verdict.to.address);
  }
}
