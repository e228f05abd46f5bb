import type { Clock } from '@broadcast-ops/core';
import { AddressPolicy, normaliseIp, type AddressRefusal } from './relay-address-policy.ts';

/**
 * The relay's allocations (packages/punch/docs/relay.md): which datagrams a relay port may forward, and where.
 * Pure: time from the injected clock, no sockets, no timers (the io layer calls `sweep()` on its own timer).
 *
 * An allocation belongs to one session and has two sides, 0 and 1, one per peer, each pinned to the public IP
 * its WebSocket came from. The first datagram from the pinned IP on a side latches that side's source port
 * (the NAT's mapping, unknown to the broker); from then on only that IP and port may use the side, so a third
 * client cannot, not even one behind the same NAT. A side whose latched source has been silent for
 * `relatchAfterMs` may be latched again by a new port from the pinned IP (a peer that restarted, or a NAT
 * that rebound). A datagram arriving on one side is forwarded to the latched address of the other, unread.
 *
 * Bounds, modelled on coturn: a byte-rate cap per direction (a token bucket: `bytesPerSecond` with a burst of
 * `burstBytes`), an expiry, an idle timeout, at most `maxPerSession` allocations per session and
 * `maxAllocations` on the server, and the address policy on the pinned addresses. Every refused allocation
 * and every dropped datagram is counted by reason.
 */
export type Side = 0 | 1;

export type DropReason =
  /** The source IP is not the one pinned to this side. */
  | 'unpinned_source'
  /** The pinned IP, but not the port latched on this side (a second client behind the same address). */
  | 'unlatched_port'
  /** Above the allocation's byte-rate cap in this direction. */
  | 'over_rate'
  /** The other side has not sent yet, so there is nowhere to forward to. */
  | 'peer_not_latched'
  /** No such allocation (released, expired or never made). */
  | 'no_allocation';

export type RefuseReason = 'server_cap' | 'session_cap' | 'bad_request' | AddressRefusal;

export type EndReason = 'expired' | 'idle' | 'released';

export interface RelayLimits {
  /** Allocations on this relay at once. */
  maxAllocations: number;
  /** Allocations one session may hold at once. */
  maxPerSession: number;
  /** Default byte rate per direction when an allocation names none. */
  defaultBytesPerSecond: number;
  /** Largest byte rate an allocation may ask for. */
  maxBytesPerSecond: number;
  /** Token bucket depth as time at the allocation's rate (bursts of a live encoder). */
  burstMs: number;
  /** Default and largest lifetime of an allocation. */
  defaultLifetimeMs: number;
  maxLifetimeMs: number;
  /** No datagram forwarded in either direction for this long ends the allocation. */
  idleTimeoutMs: number;
  /** A latched side silent this long may be latched again from the pinned IP. */
  relatchAfterMs: number;
  /** CIDRs allowed as peer addresses although loopback, private-use, link-local or multicast. */
  allow: readonly string[];
}

export const DEFAULT_RELAY_LIMITS: RelayLimits = {
  maxAllocations: 100,
  maxPerSession: 2,
  // 20 Mbit/s: a contribution feed with headroom.
  defaultBytesPerSecond: 2_500_000,
  maxBytesPerSecond: 12_500_000,
  burstMs: 250,
  defaultLifetimeMs: 6 * 60 * 60 * 1000,
  maxLifetimeMs: 24 * 60 * 60 * 1000,
  idleTimeoutMs: 30_000,
  relatchAfterMs: 5_000,
  allow: [],
};

export interface AllocationRequest {
  sessionId: string;
  /** The public IPs the two peers' WebSockets came from, side 0 then side 1. */
  peers: readonly [string, string];
  bytesPerSecond?: number;
  lifetimeMs?: number;
}

export interface Endpoint {
  address: string;
  port: number;
}

export interface AllocationView {
  id: string;
  sessionId: string;
  pinned: readonly [string, string];
  latched: readonly [Endpoint | undefined, Endpoint | undefined];
  bytesPerSecond: number;
  expiresAtMs: number;
  forwardedBytes: readonly [number, number];
  forwardedPackets: readonly [number, number];
}

export type Admission = { forward: true; to: Endpoint } | { forward: false; reason: DropReason };

export type AllocateResult = { ok: true; allocation: AllocationView } | { ok: false; reason: RefuseReason };

interface SideState {
  pinned: string;
  latched: Endpoint | undefined;
  lastSeenMs: number;
  tokens: number;
  refilledAtMs: number;
  bytes: number;
  packets: number;
}

interface Allocation {
  id: string;
  sessionId: string;
  sides: [SideState, SideState];
  bytesPerSecond: number;
  burstBytes: number;
  expiresAtMs: number;
  lastForwardMs: number;
}

const DROP_REASONS: readonly DropReason[] = [
  'unpinned_source',
  'unlatched_port',
  'over_rate',
  'peer_not_latched',
  'no_allocation',
];

export class RelayAllocations {
  readonly #limits: RelayLimits;
  readonly #clock: Clock;
  readonly #policy: AddressPolicy;
  readonly #byId = new Map<string, Allocation>();
  #seq = 0;
  readonly drops: Record<DropReason, number> = Object.fromEntries(DROP_REASONS.map((r) => [r, 0])) as Record<
    DropReason,
    number
  >;
  readonly refusals = new Map<RefuseReason, number>();
  readonly ended: Record<EndReason, number> = { expired: 0, idle: 0, released: 0 };
  relatched = 0;
  /** Renewals taken (docs/relay.md "Renewal"). */
  renewed = 0;
  /** Bytes and packets forwarded per direction (index: the side they arrived on), ended allocations included. */
  readonly forwardedTotals = { bytes: [0, 0] as [number, number], packets: [0, 0] as [number, number] };

  constructor(clock: Clock, limits: Partial<RelayLimits> = {}) {
    this.#clock = clock;
    this.#limits = { ...DEFAULT_RELAY_LIMITS, ...limits };
    this.#policy = new AddressPolicy(this.#limits.allow);
  }

  get size(): number {
    return this.#byId.size;
  }

  allocate(req: AllocationRequest): AllocateResult {
    const refuse = (reason: RefuseReason): AllocateResult => {
      this.refusals.set(reason, (this.refusals.get(reason) ?? 0) + 1);
      return { ok: false, reason };
    };
    const l = this.#limits;
    const rate = req.bytesPerSecond ?? l.defaultBytesPerSecond;
    const lifetime = req.lifetimeMs ?? l.defaultLifetimeMs;
    if (!req.sessionId || !(rate > 0) || !(lifetime > 0)) return refuse('bad_request');
    for (const peer of req.peers) {
      const refusal = this.#policy.refusal(peer);
      if (refusal) return refuse(refusal);
    }
    if (this.#byId.size >= l.maxAllocations) return refuse('server_cap');
    let held = 0;
    for (const a of this.#byId.values()) if (a.sessionId === req.sessionId) held++;
    if (held >= l.maxPerSession) return refuse('session_cap');

    const now = this.#clock.monotonicMs();
    const bytesPerSecond = Math.min(rate, l.maxBytesPerSecond);
    // At least one full-size datagram, so a low cap still passes a packet now and then.
    const burstBytes = Math.max(1500, Math.round((bytesPerSecond * l.burstMs) / 1000));
    const side = (ip: string): SideState => ({
      pinned: normaliseIp(ip),
      latched: undefined,
      lastSeenMs: now,
      tokens: burstBytes,
      refilledAtMs: now,
      bytes: 0,
      packets: 0,
    });
    const allocation: Allocation = {
      id: `r${++this.#seq}`,
      sessionId: req.sessionId,
      sides: [side(req.peers[0]), side(req.peers[1])],
      bytesPerSecond,
      burstBytes,
      expiresAtMs: now + Math.min(lifetime, l.maxLifetimeMs),
      lastForwardMs: now,
    };
    this.#byId.set(allocation.id, allocation);
    return { ok: true, allocation: view(allocation) };
  }

  get(id: string): AllocationView | undefined {
    const a = this.#byId.get(id);
    return a ? view(a) : undefined;
  }

  list(): AllocationView[] {
    return [...this.#byId.values()].map(view);
  }

  /**
   * Extends an allocation to `lifetimeMs` from now (at most `maxLifetimeMs`), never shortening it; the
   * new expiry, or undefined when there is no such allocation (docs/relay.md "Renewal").
   */
  renew(id: string, lifetimeMs: number): number | undefined {
    const a = this.#byId.get(id);
    if (!a || !(lifetimeMs > 0)) return undefined;
    const until = this.#clock.monotonicMs() + Math.min(lifetimeMs, this.#limits.maxLifetimeMs);
    a.expiresAtMs = Math.max(a.expiresAtMs, until);
    this.renewed++;
    return a.expiresAtMs;
  }

  release(id: string): boolean {
    if (!this.#byId.delete(id)) return false;
    this.ended.released++;
    return true;
  }

  /**
   * The verdict on one datagram of `bytes` bytes from `source` arriving on `side` of allocation `id`. The
   * payload is never passed in: the relay decides on addresses and sizes alone.
   */
  admit(id: string, side: Side, source: Endpoint, bytes: number): Admission {
    const drop = (reason: DropReason): Admission => {
      this.drops[reason]++;
      return { forward: false, reason };
    };
    const a = this.#byId.get(id);
    const now = this.#clock.monotonicMs();
    if (!a || now >= a.expiresAtMs) return drop('no_allocation');
    const here = a.sides[side];
    const ip = normaliseIp(source.address);
    if (ip !== here.pinned) return drop('unpinned_source');
    if (!here.latched) here.latched = { address: ip, port: source.port };
    else if (here.latched.port !== source.port) {
      if (now - here.lastSeenMs < this.#limits.relatchAfterMs) return drop('unlatched_port');
      here.latched = { address: ip, port: source.port };
      this.relatched++;
    }
    here.lastSeenMs = now;
    const there = a.sides[side === 0 ? 1 : 0];
    if (!there.latched) return drop('peer_not_latched');
    here.tokens = Math.min(a.burstBytes, here.tokens + ((now - here.refilledAtMs) * a.bytesPerSecond) / 1000);
    here.refilledAtMs = now;
    if (here.tokens < bytes) return drop('over_rate');
    here.tokens -= bytes;
    here.bytes += bytes;
    here.packets++;
    this.forwardedTotals.bytes[side] += bytes;
    this.forwardedTotals.packets[side]++;
    a.lastForwardMs = now;
    return { forward: true, to: there.latched };
  }

  /** Ends the allocations past their expiry or idle for `idleTimeoutMs`; returns them with the reason. */
  sweep(): { id: string; reason: EndReason }[] {
    const now = this.#clock.monotonicMs();
    const out: { id: string; reason: EndReason }[] = [];
    for (const a of this.#byId.values()) {
      const reason: EndReason | undefined =
        now >= a.expiresAtMs
          ? 'expired'
          : now - a.lastForwardMs >= this.#limits.idleTimeoutMs
            ? 'idle'
            : undefined;
      if (!reason) continue;
      this.#byId.delete(a.id);
      this.ended[reason]++;
      out.push({ id: a.id, reason });
    }
    return out;
  }
}

function view(a: Allocation): AllocationView {
  const [s0, s1] = a.sides;
  return {
    id: a.id,
    sessionId: a.sessionId,
    pinned: [s0.pinned, s1.pinned],
    latched: [s0.latched, s1.latched],
    bytesPerSecond: a.bytesPerSecond,
    expiresAtMs: a.expiresAtMs,
    forwardedBytes: [s0.bytes, s1.bytes],
    forwardedPackets: [s0.packets, s1.packets],
  };
}
