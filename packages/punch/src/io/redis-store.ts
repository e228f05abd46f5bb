import type { Redis } from 'ioredis';
import type {
  CloseReason,
  InviteRecord,
  SessionRecord,
  SessionState,
  StreamRecord,
} from '../domain/session.ts';
import type { SessionStore } from '../domain/store.ts';
import { redisKeys } from './redis-keys.ts';

/**
 * The session store on Redis (docs/multi-instance.md). One hash per session, `<prefix>s:<name>`:
 * `core` (JSON: id, passphrase, latency, ttl, createdAt, expiresAt), `state`, `closedAt`, `closeReason`,
 * `streams` (JSON: streams with their peer claims, health left out as in every store) and `invites` (JSON). The key expires
 * on its own once the session is past its TTL and its tombstone time (a safety net: the owning broker
 * closes and purges it before), and the set `<prefix>sessions` lists the names for `loadAll`.
 *
 * Fenced writes: every write is a Lua script that first checks that the deployment's owner lease
 * (`<prefix>leader`) still holds this instance's token, and refuses otherwise. Only the lease holder runs
 * the broker, so slot claims and releases are decided by one sequencer; the fence makes that hold even
 * when an old owner wakes up after its lease passed to another instance (it cannot write, so two
 * instances can never give one slot to two peers). Redis runs each script atomically
 * (https://redis.io/docs/latest/develop/interact/programmability/eval-intro/).
 *
 * Save before acknowledge: a write resolves when Redis answered the script. With `appendonly yes` and
 * `appendfsync always` Redis writes and fsyncs its append-only file before it answers, so an answered
 * write survives a Redis crash or restart (docs/multi-instance.md "Redis settings").
 */
const FENCE = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('NOT_OWNER the owner lease of this deployment is held by another instance') end`;

const PUT_SESSION = `${FENCE}
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'core', ARGV[2], 'state', ARGV[3], 'closedAt', ARGV[4], 'closeReason', ARGV[5], 'streams', ARGV[6], 'invites', ARGV[9])
redis.call('PEXPIREAT', KEYS[2], ARGV[7])
redis.call('SADD', KEYS[3], ARGV[8])
return 1`;

const UPDATE_STATE = `${FENCE}
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('HSET', KEYS[2], 'state', ARGV[2], 'closedAt', ARGV[3], 'closeReason', ARGV[4])
if ARGV[5] ~= '' then redis.call('PEXPIREAT', KEYS[2], ARGV[5]) end
return 1`;

const PUT_EXPIRY = `${FENCE}
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local core = cjson.decode(redis.call('HGET', KEYS[2], 'core'))
core['expiresAt'] = tonumber(ARGV[2])
redis.call('HSET', KEYS[2], 'core', cjson.encode(core))
redis.call('PEXPIREAT', KEYS[2], ARGV[3])
return 1`;

/** One JSON field of the hash: `streams` or `invites` (ARGV[3]). */
const PUT_FIELD = `${FENCE}
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[2])
return 1`;

const DELETE_SESSION = `${FENCE}
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[2])
return 1`;

const PROBE = `${FENCE}
redis.call('SET', KEYS[2], ARGV[2])
return 1`;

interface Core {
  id: string;
  passphrase: string;
  latency: number;
  ttl: number;
  createdAt: number;
  expiresAt: number;
}

export interface RedisSessionStoreOptions {
  redis: Redis;
  prefix: string;
  /** The owner lease token this instance writes under; null while it holds no lease (writes refused). */
  fence: () => string | null;
  /** How long a closed session stays a tombstone: its key expires this long after the close. */
  tombstoneMs: number;
  /** Extra time a key is kept past its session's TTL, so the owner closes it before Redis drops it. */
  graceMs?: number;
}

function storedStreams(streams: readonly StreamRecord[]): string {
  return JSON.stringify(streams.map((s) => ({ ...s, health: null })));
}

export class RedisSessionStore implements SessionStore {
  readonly #redis: Redis;
  readonly #keys: ReturnType<typeof redisKeys>;
  readonly #fence: () => string | null;
  readonly #tombstoneMs: number;
  readonly #graceMs: number;

  constructor(options: RedisSessionStoreOptions) {
    this.#redis = options.redis;
    this.#keys = redisKeys(options.prefix);
    this.#fence = options.fence;
    this.#tombstoneMs = options.tombstoneMs;
    this.#graceMs = options.graceMs ?? 3_600_000;
  }

  #token(): string {
    const t = this.#fence();
    if (t === null) throw new Error('this instance does not hold the owner lease; nothing was written');
    return t;
  }

  /** When the session's key may expire: after its TTL plus the tombstone time (live) or its tombstone time. */
  #expireAt(expiresAt: number, closedAt: number | null): number {
    return closedAt === null
      ? expiresAt + this.#tombstoneMs + this.#graceMs
      : closedAt + this.#tombstoneMs + 60_000;
  }

  async loadAll(): Promise<SessionRecord[]> {
    const names = await this.#redis.smembers(this.#keys.sessions);
    const out: SessionRecord[] = [];
    const gone: string[] = [];
    const BATCH = 500;
    for (let i = 0; i < names.length; i += BATCH) {
      const part = names.slice(i, i + BATCH);
      const pipe = this.#redis.pipeline();
      for (const n of part) pipe.hgetall(this.#keys.session(n));
      const rows = (await pipe.exec()) ?? [];
      rows.forEach(([err, row], j) => {
        const name = part[j] ?? '';
        if (err) throw err;
        const h = row as Record<string, string>;
        if (!h['core']) {
          gone.push(name);
          return;
        }
        const core = JSON.parse(h['core']) as Core;
        out.push({
          name,
          ...core,
          state: h['state'] as SessionState,
          closedAt: h['closedAt'] ? Number(h['closedAt']) : null,
          closeReason: h['closeReason'] ? (h['closeReason'] as CloseReason) : null,
          streams: JSON.parse(h['streams'] ?? '[]') as StreamRecord[],
          invites: JSON.parse(h['invites'] ?? '[]') as InviteRecord[],
        });
      });
    }
    // Names whose key Redis expired: forget them (a plain write; harmless if it fails).
    if (gone.length > 0) await this.#redis.srem(this.#keys.sessions, ...gone).catch(() => undefined);
    return out;
  }

  async putSession(session: SessionRecord): Promise<void> {
    const core: Core = {
      id: session.id,
      passphrase: session.passphrase,
      latency: session.latency,
      ttl: session.ttl,
      createdAt: session.createdAt,
      expiresAt: session.expiresAt,
    };
    await this.#redis.eval(
      PUT_SESSION,
      3,
      this.#keys.leader,
      this.#keys.session(session.name),
      this.#keys.sessions,
      this.#token(),
      JSON.stringify(core),
      session.state,
      session.closedAt === null ? '' : String(session.closedAt),
      session.closeReason ?? '',
      storedStreams(session.streams),
      String(this.#expireAt(session.expiresAt, session.closedAt)),
      session.name,
      JSON.stringify(session.invites ?? []),
    );
  }

  async updateSessionState(
    name: string,
    change: { state: SessionState; closedAt: number | null; closeReason: CloseReason | null },
  ): Promise<void> {
    await this.#redis.eval(
      UPDATE_STATE,
      2,
      this.#keys.leader,
      this.#keys.session(name),
      this.#token(),
      change.state,
      change.closedAt === null ? '' : String(change.closedAt),
      change.closeReason ?? '',
      change.closedAt === null ? '' : String(this.#expireAt(0, change.closedAt)),
    );
  }

  /** The key is kept from the later of the expiry and `keepFrom` (a session past its TTL with media). */
  async putExpiry(name: string, expiresAt: number, keepFrom: number): Promise<void> {
    await this.#redis.eval(
      PUT_EXPIRY,
      2,
      this.#keys.leader,
      this.#keys.session(name),
      this.#token(),
      String(expiresAt),
      String(this.#expireAt(Math.max(expiresAt, keepFrom), null)),
    );
  }

  async putStreams(session: string, streams: readonly StreamRecord[]): Promise<void> {
    await this.#putField(session, 'streams', storedStreams(streams));
  }

  async putInvites(name: string, invites: readonly InviteRecord[]): Promise<void> {
    await this.#putField(name, 'invites', JSON.stringify(invites));
  }

  async #putField(name: string, field: 'streams' | 'invites', json: string): Promise<void> {
    await this.#redis.eval(
      PUT_FIELD,
      2,
      this.#keys.leader,
      this.#keys.session(name),
      this.#token(),
      json,
      field,
    );
  }

  async deleteSession(name: string): Promise<void> {
    await this.#redis.eval(
      DELETE_SESSION,
      3,
      this.#keys.leader,
      this.#keys.session(name),
      this.#keys.sessions,
      this.#token(),
      name,
    );
  }

  async probe(): Promise<void> {
    await this.#redis.eval(PROBE, 2, this.#keys.leader, this.#keys.probe, this.#token(), String(Date.now()));
  }

  close(): void {
    /* the connection belongs to the cluster (src/io/redis-cluster.ts) */
  }
}
