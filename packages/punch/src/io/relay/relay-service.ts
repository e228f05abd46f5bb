import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Redis } from 'ioredis';
import type { Logger } from '@broadcast-ops/core';
import {
  MAX_REPORTED_ALLOCATIONS,
  parseRelayRequest,
  type RelayAllocationRecord,
  type RelayAnswer,
  type RelayRegistration,
  type RelayRequest,
} from '../../protocol/relay-bus.ts';
import { DEFAULT_RELAY_LIMITS } from '../../domain/relay-allocations.ts';
import { redisKeys } from '../redis-keys.ts';
import type { UdpRelay } from './udp-relay.ts';

/**
 * ioredis loads when a Redis deployment is configured, not at every start: a single-instance broker on
 * SQLite never uses it (docs/at-rest.md).
 */
function ioredis(): typeof import('ioredis') {
  return createRequire(import.meta.url)('ioredis') as typeof import('ioredis');
}

/**
 * A relay on Redis (docs/relay.md "Relays on Redis"): registers itself under `<prefix>relay:<id>` with an
 * expiry it renews every quarter of it, takes allocation and release requests on its channel
 * `<prefix>relay-rq:<id>`, answers on the requesting broker instance's bus, stores each allocation under
 * `<prefix>ra:<id>` for any instance to see, and tells the current owner when it ends one. It is given a
 * session id, two peer IPs, a byte rate and a lifetime, never a passphrase. `punch relay` runs one; so does
 * every broker instance on Redis whose in-process relay is on, so any instance can allocate on any relay.
 */
export interface RelayServiceOptions {
  relay: UdpRelay;
  url: string;
  prefix: string;
  /** The address the peers send to. */
  address: string;
  ports: string;
  capacity: number;
  /** Registration expiry; renewed every quarter. */
  ttlMs: number;
  kind: RelayRegistration['kind'];
  logger: Logger;
  /** Default: a random id. A broker's relay uses the instance id. */
  id?: string;
}

export class RelayService {
  readonly id: string;
  readonly #o: RelayServiceOptions;
  readonly #keys: ReturnType<typeof redisKeys>;
  readonly #redis: Redis;
  readonly #sub: Redis;
  #timer: NodeJS.Timeout | null = null;
  #stopped = false;
  /** Requests that did not parse (ignored). */
  badRequests = 0;
  /** Wall-clock ms of the last registration Redis took; undefined before the first. */
  registeredAt: number | undefined;

  constructor(options: RelayServiceOptions) {
    this.#o = options;
    this.id = options.id ?? randomBytes(6).toString('base64url');
    this.#keys = redisKeys(options.prefix);
    const common = {
      lazyConnect: true,
      maxRetriesPerRequest: 1,
      connectTimeout: 2_000,
      retryStrategy: (n: number) => Math.min(100 * n, 1_000),
    };
    this.#redis = new (ioredis().Redis)(options.url, {
      ...common,
      enableOfflineQueue: false,
      connectionName: `relay-${this.id}`,
    });
    this.#sub = new (ioredis().Redis)(options.url, {
      ...common,
      enableOfflineQueue: true,
      maxRetriesPerRequest: null,
    });
    this.#redis.on('error', () => undefined);
    this.#sub.on('error', () => undefined);
    this.#sub.on('message', (_channel: string, text: string) => {
      const req = parseRelayRequest(text);
      if (!req.ok) {
        this.badRequests++;
        return;
      }
      void this.#handle(req.value).catch((err: unknown) =>
        this.#o.logger.error({ err }, 'relay request failed'),
      );
    });
    this.#sub.on(
      'ready',
      () => void this.#sub.subscribe(this.#keys.relayRequests(this.id)).catch(() => undefined),
    );
    const previous = options.relay.onEnd;
    options.relay.onEnd = (local, reason) => {
      previous(local, reason);
      void this.#ended(local, reason).catch(() => undefined);
    };
  }

  async start(): Promise<void> {
    await this.#redis.connect();
    await this.#sub.connect();
    await this.#sub.subscribe(this.#keys.relayRequests(this.id));
    await this.#register();
    this.#timer = setInterval(
      () => void this.#register().catch(() => undefined),
      Math.max(100, Math.floor(this.#o.ttlMs / 4)),
    );
    this.#timer.unref();
  }

  /** Deregisters (so brokers stop choosing it at once) and disconnects; the UdpRelay is closed by its owner. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    await this.#redis.del(this.#keys.relay(this.id)).catch(() => undefined);
    this.#redis.disconnect();
    this.#sub.disconnect();
  }

  /** Stop renewing without deregistering: what a crash looks like to the brokers (tests). */
  halt(): void {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#redis.disconnect();
    this.#sub.disconnect();
  }

  async #register(): Promise<void> {
    if (this.#stopped) return;
    const held = this.#o.relay.allocations.size;
    const reg: RelayRegistration = {
      id: this.id,
      address: this.#o.address,
      ports: this.#o.ports,
      capacity: this.#o.capacity,
      free: Math.max(0, this.#o.capacity - held),
      at: Date.now(),
      kind: this.#o.kind,
    };
    await this.#redis
      .multi()
      .set(this.#keys.relay(this.id), JSON.stringify(reg), 'PX', this.#o.ttlMs)
      .sadd(this.#keys.relays, this.id)
      .exec();
    this.registeredAt = reg.at;
    if (held > 0) await this.#report();
  }

  /** Whether the command connection to Redis is up now. */
  get reachable(): boolean {
    return this.#redis.status === 'ready';
  }

  /** How long a registration lasts in Redis without a renewal. */
  get ttlMs(): number {
    return this.#o.ttlMs;
  }

  /** What the relay measured on each allocation, to the owner (docs/relay.md "What the relay measures"). */
  async #report(): Promise<void> {
    const allocations: Extract<RelayAnswer, { t: 'relay_report' }>['allocations'] = [];
    for (const a of this.#o.relay.allocations.list()) {
      const directions = this.#o.relay.pathFigures(a.id);
      if (directions && allocations.length < MAX_REPORTED_ALLOCATIONS)
        allocations.push({ id: `${this.id}.${a.id}`, directions });
    }
    await this.#toOwner({ t: 'relay_report', relay: this.id, at: Date.now(), allocations });
  }

  /** Publishes on the bus of the owner of the sessions (docs/multi-instance.md: the lease names it). */
  async #toOwner(answer: RelayAnswer): Promise<void> {
    const lease = await this.#redis.get(this.#keys.leader);
    const owner = lease?.slice(0, lease.lastIndexOf(':'));
    if (!owner) return;
    await this.#redis.publish(this.#keys.bus(owner), JSON.stringify(answer));
  }

  async #handle(req: RelayRequest): Promise<void> {
    if (req.t === 'release') {
      const local = this.#local(req.id);
      if (local !== undefined) this.#o.relay.release(local);
      return;
    }
    if (req.t === 'renew') {
      const local = this.#local(req.id);
      const until = local === undefined ? undefined : this.#o.relay.renew(local, req.lifetimeMs);
      if (until === undefined) return;
      // The stored record lives as long as the allocation now may.
      await this.#redis.pexpire(this.#keys.relayAllocation(req.id), req.lifetimeMs).catch(() => undefined);
      this.#o.logger.info(
        { relay: this.id, allocation: req.id, lifetimeMs: req.lifetimeMs },
        'relay allocation renewed',
      );
      return;
    }
    const r = await this.#o.relay.allocate({
      sessionId: req.sessionId,
      peers: req.peers,
      ...(req.bytesPerSecond === undefined ? {} : { bytesPerSecond: req.bytesPerSecond }),
      ...(req.lifetimeMs === undefined ? {} : { lifetimeMs: req.lifetimeMs }),
    });
    let answer: RelayAnswer;
    if (r.ok) {
      const id = `${this.id}.${r.id}`;
      const record: RelayAllocationRecord = {
        id,
        relay: this.id,
        sessionId: req.sessionId,
        address: this.#o.address,
        ports: [r.ports[0], r.ports[1]],
        at: Date.now(),
      };
      // The record lives as long as the allocation may (DEFAULT_RELAY_LIMITS: 6 h unless asked otherwise).
      const lifetime = req.lifetimeMs ?? DEFAULT_RELAY_LIMITS.defaultLifetimeMs;
      await this.#redis
        .set(this.#keys.relayAllocation(id), JSON.stringify(record), 'PX', lifetime)
        .catch(() => undefined);
      answer = { t: 'relay_allocated', rq: req.rq, id, address: this.#o.address, ports: record.ports };
      this.#o.logger.info(
        { relay: this.id, allocation: id, session: req.sessionId, ports: record.ports },
        'relay allocation made',
      );
    } else {
      answer = { t: 'relay_refused', rq: req.rq, reason: r.reason };
      this.#o.logger.warn(
        { relay: this.id, session: req.sessionId, reason: r.reason },
        'relay allocation refused',
      );
    }
    const delivered = await this.#redis.publish(this.#keys.bus(req.from), JSON.stringify(answer));
    // Nobody took the answer (the broker died or gave up): the allocation would only wait for its idle end.
    if (delivered === 0 && answer.t === 'relay_allocated')
      this.#o.relay.release(this.#local(answer.id) ?? '');
  }

  async #ended(local: string, reason: string): Promise<void> {
    const id = `${this.id}.${local}`;
    await this.#redis.del(this.#keys.relayAllocation(id));
    this.#o.logger.info({ relay: this.id, allocation: id, reason }, 'relay allocation ended');
    // The owner of the sessions hears of it.
    await this.#toOwner({ t: 'relay_ended', id, reason });
  }

  /** The local allocation id of one of this relay's ids. */
  #local(id: string): string | undefined {
    return id.startsWith(`${this.id}.`) ? id.slice(this.id.length + 1) : undefined;
  }
}
