import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Redis } from 'ioredis';
import type { Logger } from '@broadcast-ops/core';
import { redisKeys } from './redis-keys.ts';

/**
 * ioredis loads when a Redis deployment is configured, not at every start: a single-instance broker on
 * SQLite never uses it (docs/at-rest.md).
 */
function ioredis(): typeof import('ioredis') {
  return createRequire(import.meta.url)('ioredis') as typeof import('ioredis');
}

/**
 * Membership of one broker instance in a Redis deployment (docs/multi-instance.md):
 *
 * - **Heartbeat**: `<prefix>instance:<id>` set every `leaseMs / 4` with a `heartbeatTtlMs` expiry. An
 *   instance that dies stops renewing it; the owner then treats its bridged peers as gone.
 * - **Owner lease**: `<prefix>leader` holds `<id>:<epoch>` with a `leaseMs` expiry, renewed every
 *   `leaseMs / 4` by its holder. The holder runs the broker (every session's sequencer); the others
 *   forward to it. When it lapses (the owner died or lost Redis longer than the lease), the first instance
 *   to run the election script takes it with a new epoch. A holder whose lease lapsed takes it back only if
 *   nobody was elected since (same epoch); otherwise it has lost it for good (`onLost`).
 * - **Bus**: one pub/sub channel per instance, `<prefix>bus:<id>`. Redis delivers the messages of one
 *   publishing connection to a subscriber in the order they were published, so what the owner sends to a
 *   bridged peer arrives in the order the owner sent it (https://redis.io/docs/latest/develop/interact/pubsub/).
 *
 * Commands fail fast while Redis is unreachable (no offline queue, one retry): callers answer 503 instead
 * of waiting, and ioredis reconnects on its own.
 */
export interface RedisClusterOptions {
  url: string;
  prefix: string;
  /** Owner lease length. Default 10 s; a new owner takes over at most this long after the old one died. */
  leaseMs: number;
  logger: Logger;
}

export type BusMessage = Record<string, unknown> & { t: string };

const ELECT = `if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local e = redis.call('INCR', KEYS[2])
local token = ARGV[1] .. ':' .. e
redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
return token`;

const RENEW = `local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if cur == false and redis.call('GET', KEYS[2]) == ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0`;

const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

export class RedisCluster {
  readonly id = randomBytes(6).toString('base64url');
  readonly redis: Redis;
  readonly #sub: Redis;
  readonly #keys: ReturnType<typeof redisKeys>;
  readonly #leaseMs: number;
  readonly #log: Logger;
  #token: string | null = null;
  #leaderId: string | null = null;
  #timer: NodeJS.Timeout | null = null;
  #ticking = false;
  #listening = false;
  /** The load that follows an election (start() waits for the one of its first round). */
  #electing: Promise<void> | null = null;
  #stopped = false;
  /** Monotonic ms since Redis has been answering (after a loss); null while it is not. */
  #upSince: number | null = null;
  readonly #onMessage = new Set<(m: BusMessage) => void>();
  /** Called when this instance became the owner (not awaited); it serves once its broker is loaded. */
  onElected: () => Promise<void> = () => Promise.resolve();
  /** Called once when this instance lost the owner lease to another instance (it must stop serving). */
  onLost: () => void = () => undefined;
  /** Called when the owner changed (another instance, or none known). */
  onLeaderChanged: (leader: string | null) => void = () => undefined;
  /** Called when Redis answers again after a loss. */
  onReconnected: () => void = () => undefined;

  constructor(options: RedisClusterOptions) {
    this.#keys = redisKeys(options.prefix);
    this.#leaseMs = options.leaseMs;
    this.#log = options.logger;
    const common = {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 2_000,
      retryStrategy: (n: number) => Math.min(100 * n, 1_000),
    };
    this.redis = new (ioredis().Redis)(options.url, { ...common, connectionName: `punch-${this.id}` });
    // The subscriber keeps an offline queue for its own (re)subscription, never for publishing.
    this.#sub = new (ioredis().Redis)(options.url, {
      ...common,
      enableOfflineQueue: true,
      maxRetriesPerRequest: null,
      autoResubscribe: false,
    });
    this.redis.on('error', () => undefined);
    this.#sub.on('error', () => undefined);
    this.redis.on('ready', () => {
      if (this.#upSince === null) {
        this.#upSince = performance.now();
        this.onReconnected();
        // The owner renews at once, before any other instance may run an election.
        if (this.#token !== null) void this.#tick();
      }
    });
    this.redis.on('close', () => {
      if (this.#upSince !== null)
        this.#log.error('redis connection lost; requests fail with 503 until it returns');
      this.#upSince = null;
    });
    // The bus counts as up only once this instance's channel is subscribed again: before that, what the
    // others publish to it is lost, so health stays 503 and the relay forwards nothing.
    this.#sub.on('ready', () => {
      this.#sub.subscribe(this.#keys.bus(this.id)).then(
        () => {
          this.#listening = true;
        },
        () => this.#sub.disconnect(true),
      );
    });
    this.#sub.on('close', () => {
      this.#listening = false;
    });
    this.#sub.on('message', (_channel: string, text: string) => {
      let m: BusMessage;
      try {
        m = JSON.parse(text) as BusMessage;
      } catch {
        return;
      }
      for (const l of this.#onMessage) {
        try {
          l(m);
        } catch (err) {
          this.#log.error({ err }, 'bus message handler failed');
        }
      }
    });
  }

  get keys(): ReturnType<typeof redisKeys> {
    return this.#keys;
  }

  /** This instance's lease token while it holds the owner lease, else null (the store's fence). */
  get token(): string | null {
    return this.#token;
  }

  get isOwner(): boolean {
    return this.#token !== null;
  }

  /** The owner instance as last seen (this one when it owns), or null. */
  get leader(): string | null {
    return this.#leaderId;
  }

  /** Redis answers commands and this instance's bus channel is subscribed. */
  get reachable(): boolean {
    return this.redis.status === 'ready' && this.#listening;
  }

  /** How long Redis has been answering since it was last lost (ms), 0 while it is not. */
  upForMs(): number {
    return this.#upSince === null ? 0 : performance.now() - this.#upSince;
  }

  get heartbeatTtlMs(): number {
    return Math.max(3_000, this.#leaseMs);
  }

  subscribe(listener: (m: BusMessage) => void): () => void {
    this.#onMessage.add(listener);
    return () => this.#onMessage.delete(listener);
  }

  async start(): Promise<void> {
    await this.redis.connect();
    await this.#sub.connect();
    await this.#sub.subscribe(this.#keys.bus(this.id));
    this.#listening = true;
    await this.#tick(true);
    const every = Math.max(100, Math.floor(this.#leaseMs / 4));
    this.#timer = setInterval(() => void this.#tick(), every);
    this.#timer.unref();
    // Listen once the sessions are loaded when this instance took the lease at start.
    await this.#electing;
  }

  /** Publish to an instance's channel; throws when Redis is unreachable or nobody listens there. */
  async publish(instance: string, message: BusMessage): Promise<void> {
    const n = await this.redis.publish(this.#keys.bus(instance), JSON.stringify(message));
    if (n === 0) throw new Error(`instance ${instance} does not listen on the bus`);
  }

  /** Whether an instance's heartbeat is current. */
  async alive(instance: string): Promise<boolean> {
    return (await this.redis.exists(this.#keys.instance(instance))) === 1;
  }

  /**
   * One round: heartbeat, then renew (owner) or try the election (others). After Redis was lost, the
   * others wait half a lease before they run the election, so the owner (which renews at once when Redis
   * answers again) keeps its sessions when its lease lapsed only because Redis was down. A starting
   * instance holds no state to protect and may elect at once.
   */
  async #tick(starting = false): Promise<void> {
    if (this.#ticking || this.#stopped) return;
    this.#ticking = true;
    try {
      await this.redis.set(this.#keys.instance(this.id), '1', 'PX', this.heartbeatTtlMs);
      if (this.#token !== null) {
        const epoch = this.#token.slice(this.#token.lastIndexOf(':') + 1);
        const kept = await this.redis.eval(
          RENEW,
          2,
          this.#keys.leader,
          this.#keys.epoch,
          this.#token,
          String(this.#leaseMs),
          epoch,
        );
        if (kept !== 1) {
          this.#log.error(
            { instance: this.id },
            'the owner lease passed to another instance; this instance stops serving',
          );
          this.#token = null;
          this.onLost();
          return;
        }
      } else if (starting || this.upForMs() >= this.#leaseMs / 2) {
        const token = (await this.redis.eval(
          ELECT,
          2,
          this.#keys.leader,
          this.#keys.epoch,
          this.id,
          String(this.#leaseMs),
        )) as string | null;
        if (token) {
          this.#token = token;
          this.#log.info({ instance: this.id, lease: token }, 'this instance took the owner lease');
          this.#setLeader(this.id);
          // Loading the sessions may take longer than a renewal period: the renewals go on meanwhile.
          this.#electing = this.onElected();
          return;
        }
      }
      const current = await this.redis.get(this.#keys.leader);
      this.#setLeader(current === null ? null : current.slice(0, current.lastIndexOf(':')));
    } catch {
      // Redis unreachable: nothing to decide now; the next tick tries again.
    } finally {
      this.#ticking = false;
    }
  }

  #setLeader(id: string | null): void {
    if (id === this.#leaderId) return;
    this.#leaderId = id;
    this.onLeaderChanged(id);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    // A clean stop hands the lease over at once instead of after its expiry.
    if (this.#token !== null && this.reachable) {
      await this.redis.eval(RELEASE, 1, this.#keys.leader, this.#token).catch(() => undefined);
      this.#token = null;
    }
    await this.redis.del(this.#keys.instance(this.id)).catch(() => undefined);
    this.#sub.disconnect();
    this.redis.disconnect();
  }
}
