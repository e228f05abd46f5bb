/**
 * Connected clients and their namespaces (docs/protocol.md "Handshake and namespaces"). A client named `x`
 * gets `app.x`; while `app.x` is held by a live connection, a newcomer gets `app.x_2`, `app.x_3`, ... unless
 * it proves it is the same client, in which case it takes the namespace over and the old connection is
 * closed (a reconnect racing its own half-open socket). Proof is the resume token the hub issued to that
 * namespace, or the same bearer token the holder authenticated with. A namespace whose holder has left keeps
 * its identity until its keys expire; with authentication on, only the same token can claim it back.
 * Also the per-client fixed-window rate limit.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Clock, TimerHandle } from '@broadcast-ops/core';
import type { ClientConn } from './client-conn.ts';

/** What a handshake offers to prove it is the client that held a namespace before. */
export interface IdentityProof {
  resumeToken?: string | undefined;
  /** The credential the connection authenticated with (only when authentication is on). */
  credential?: string | undefined;
  /** The stable id the client chose (handshake `clientId`). */
  clientId?: string | undefined;
}

/**
 * Whose idempotency keys a connection uses (docs/protocol.md "Exactly once"), never the namespace (its
 * `_N` suffix follows connection order): with authentication, the credential (a digest of it) and the
 * client's id if it gave one; without, the client's id; a client with neither shares the scope of its
 * name (`app.<name>` without suffix), so two such instances of one app cannot run one key twice.
 */
export function idempotencyScope(name: string, proof: IdentityProof): string {
  const id = proof.clientId === undefined ? '' : `id:${proof.clientId}`;
  if (proof.credential !== undefined) {
    const cred = createHash('sha256').update(proof.credential).digest('hex').slice(0, 32);
    return id === '' ? `cred:${cred}` : `cred:${cred}/${id}`;
  }
  return id === '' ? `name:${name}` : id;
}

/**
 * Where the namespace → credential binding survives a restart (hex SHA-256 digests of the credentials).
 * Without it a restored namespace could be claimed by any valid token after a restart.
 */
export interface IdentityStore {
  load(): Map<string, string>;
  save(bindings: Map<string, string>): void;
}

/** A namespace restored from the log whose credential is unknown: no proof matches it. */
const UNPROVABLE = Buffer.alloc(0);

interface Identity {
  resumeToken: Buffer;
  credential: Buffer | undefined;
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

function same(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

export class ClientRegistry {
  readonly #clock: Clock;
  readonly #clients = new Map<number, ClientConn>();
  readonly #live = new Map<string, number>();
  readonly #identities = new Map<string, Identity>();
  readonly #expiry = new Map<string, TimerHandle>();
  #nextConnId = 1;
  readonly #store: IdentityStore | undefined;

  constructor(clock: Clock, store?: IdentityStore) {
    this.#clock = clock;
    this.#store = store;
  }

  /**
   * After a restart, with authentication on: each restored namespace is bound to the credential that held
   * it (from the store), or, when none is known, reserved (no credential proves it) until its departed-key
   * expiry forgets it. Only that credential gets the name back; any other token gets `_N`.
   */
  restoreBindings(namespaces: Iterable<string>): void {
    const known = this.#store?.load() ?? new Map<string, string>();
    for (const ns of namespaces) {
      const d = known.get(ns);
      this.#identities.set(ns, {
        resumeToken: randomBytes(32),
        credential: d === undefined ? UNPROVABLE : Buffer.from(d, 'hex'),
      });
    }
  }

  #save(): void {
    if (!this.#store) return;
    const m = new Map<string, string>();
    for (const [ns, id] of this.#identities)
      if (id.credential && id.credential.length > 0) m.set(ns, id.credential.toString('hex'));
    this.#store.save(m);
  }

  get size(): number {
    return this.#clients.size;
  }

  nextConnId(): number {
    return this.#nextConnId++;
  }

  get(connId: number): ClientConn | undefined {
    return this.#clients.get(connId);
  }

  byNamespace(namespace: string): ClientConn | undefined {
    const id = this.#live.get(namespace);
    return id === undefined ? undefined : this.#clients.get(id);
  }

  all(): IterableIterator<ClientConn> {
    return this.#clients.values();
  }

  #proves(namespace: string, proof: IdentityProof): boolean {
    const id = this.#identities.get(namespace);
    if (!id) return false;
    if (proof.resumeToken !== undefined && same(id.resumeToken, digest(proof.resumeToken))) return true;
    return (
      proof.credential !== undefined &&
      id.credential !== undefined &&
      same(id.credential, digest(proof.credential))
    );
  }

  /** May a newcomer without a live rival use `namespace`? Not if the namespace is bound to another credential. */
  #free(namespace: string, proof: IdentityProof): boolean {
    if (this.#live.has(namespace)) return false;
    const id = this.#identities.get(namespace);
    if (!id?.credential) return true;
    return this.#proves(namespace, proof);
  }

  /**
   * Choose the namespace for a handshake: `app.<name>` when free or proven, else the first free `_N`.
   * `supersedes` is the live connection a proven client takes over from (the caller closes it).
   */
  resolve(name: string, proof: IdentityProof): { namespace: string; supersedes: ClientConn | undefined } {
    const base = `app.${name}`;
    for (let i = 1; ; i++) {
      const ns = i === 1 ? base : `${base}_${i}`;
      const holder = this.byNamespace(ns);
      if (holder && this.#proves(ns, proof)) return { namespace: ns, supersedes: holder };
      if (this.#free(ns, proof)) return { namespace: ns, supersedes: undefined };
    }
  }

  add(conn: ClientConn, proof: IdentityProof): string {
    this.#clients.set(conn.connId, conn);
    this.#live.set(conn.namespace, conn.connId);
    const token = randomBytes(24).toString('base64url');
    const before = this.#identities.get(conn.namespace)?.credential;
    const credential = proof.credential === undefined ? undefined : digest(proof.credential);
    this.#identities.set(conn.namespace, { resumeToken: digest(token), credential });
    // Saved before the handshake is answered, so a restart cannot hand the name to another token.
    if (credential && !(before && same(before, credential))) this.#save();
    this.cancelExpiry(conn.namespace);
    return token;
  }

  remove(conn: ClientConn): void {
    this.#clients.delete(conn.connId);
    if (this.#live.get(conn.namespace) === conn.connId) this.#live.delete(conn.namespace);
  }

  isLive(namespace: string): boolean {
    return this.#live.has(namespace);
  }

  /** Forget a namespace entirely (its keys are gone). */
  forget(namespace: string): void {
    const had = this.#identities.get(namespace)?.credential;
    this.#identities.delete(namespace);
    if (had && had.length > 0) this.#save();
    this.cancelExpiry(namespace);
  }

  /** Expire a departed client's keys after `ms` unless it comes back first. */
  scheduleExpiry(namespace: string, ms: number, expire: () => void): void {
    this.cancelExpiry(namespace);
    this.#expiry.set(
      namespace,
      this.#clock.setTimer(ms, () => {
        this.#expiry.delete(namespace);
        if (!this.#live.has(namespace)) expire();
      }),
    );
  }

  cancelExpiry(namespace: string): void {
    this.#expiry.get(namespace)?.cancel();
    this.#expiry.delete(namespace);
  }

  get pendingExpiries(): number {
    return this.#expiry.size;
  }

  /** Count one inbound message against the fixed window; false when over the limit. */
  allow(conn: ClientConn, limit: number, windowMs: number): boolean {
    const now = this.#clock.monotonicMs();
    if (now - conn.windowStart >= windowMs) {
      conn.windowStart = now;
      conn.windowCount = 0;
    }
    return ++conn.windowCount <= limit;
  }

  /** Cancel every timer (shutdown). */
  dispose(): void {
    for (const t of this.#expiry.values()) t.cancel();
    this.#expiry.clear();
  }
}
