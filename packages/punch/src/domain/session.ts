import { randomBytes, randomFillSync } from 'node:crypto';

/**
 * The session model shared by the HTTP API and the WebSocket signalling.
 * Plain data: the broker (broker.ts) owns transitions, the store (store.ts) persists these records.
 */
export type SessionState = 'WAITING' | 'READY' | 'CONNECTED' | 'RELAYING' | 'CLOSED';
/**
 * README "States": waiting (0-1 peers) → ready (matched) → connected; `relaying` when direct rendezvous did
 * not connect in time and the stream was moved to the relay (docs/relay.md "Detection"), until SRT connects
 * over it (then `connected`, path relayed).
 */
export type StreamState = 'waiting' | 'ready' | 'relaying' | 'connected';
export type CloseReason = 'admin_closed' | 'ttl_expired' | 'error';
export type PeerSlot = 'a' | 'b';

export interface PeerClaim {
  /** Public IP taken from the connection (spec: peers never send their own IP), `::ffff:` stripped. */
  ip: string;
  /** Local SRT port from `register`, 1024-65535. */
  port: number;
  label: string;
  role: 'sender' | 'receiver' | null;
  /** Opaque metadata advertised by the peer (bounded by the WebSocket layer). */
  meta: Record<string, unknown>;
  /** Optional `meta.clientId` for immediate reclaim after a reconnect. */
  clientId: string | null;
  /**
   * Fingerprint of the token that registered the claim (SHA-256, truncated; never the token itself): a
   * reconnect with the same token gets the slot back (README "Reconnection"). Absent on claims made in-process.
   */
  holder?: string | null | undefined;
  claimedAt: number;
}

export interface StreamHealth {
  rtt: number;
  retransmit: number;
  bitrate: number;
  /** Unix epoch ms when the report arrived: a report older than HEALTH_MAX_AGE_MS is not shown. */
  at: number;
}

export interface StreamRecord {
  name: string;
  state: StreamState;
  peerA: PeerClaim | null;
  peerB: PeerClaim | null;
  /** Latest health (not persisted: it is stale after a restart anyway). */
  health: StreamHealth | null;
  /**
   * The stream's relay, if the broker moved it to one (docs/relay.md "Detection"). Saved with the streams
   * in Redis, where relays outlive an instance (docs/relay.md "Relays on Redis"); the SQLite store leaves it
   * out, since the in-process relay's allocations are gone after a restart.
   */
  relay?: StreamRelay | null | undefined;
}

/**
 * A stream's relay as the view shows it (docs/relay.md "What the operator sees"): `allocated` (the link runs
 * through the relay's two ports), `refused` (no allocation could be made: `reason`), or `ended` (the relay
 * ended the allocation: idle or expired).
 */
export interface StreamRelay {
  state: 'allocated' | 'refused' | 'ended';
  reason: string | null;
  /** The relay's allocation id (null when refused). */
  id: string | null;
  /** The relay's address as advertised to the peers. */
  address: string | null;
  /** The relay's port for slot a's peer, then slot b's. */
  ports: readonly [number, number] | null;
  /** Unix epoch ms of the change. */
  since: number;
}

/** `relayed` while the stream's link runs (or is being set up) through an allocated relay. */
export function pathOf(stream: StreamRecord): 'direct' | 'relayed' {
  return stream.relay?.state === 'allocated' ? 'relayed' : 'direct';
}

/**
 * A peer token the operator issued (README "Invites"): kept so that the console lists every invite and can
 * revoke one. The token itself is not stored: it is re-signed from these fields (signing is deterministic).
 */
export interface InviteRecord {
  /** Random id, carried in the token as the `inv` claim. */
  id: string;
  stream: string | null;
  label: string | null;
  /** Unix epoch ms. */
  issuedAt: number;
  /** Unix epoch ms when revoked; a revoked invite's token is refused everywhere from then on. */
  revokedAt: number | null;
}

export interface SessionRecord {
  name: string;
  /**
   * Random id of this incarnation of the name, carried in tokens as the `sid` claim, so a token of a closed
   * session never opens a later session of the same name.
   */
  id: string;
  state: SessionState;
  /** 32 alphanumerics, generated once at creation (spec "Passphrase"). Never logged. */
  passphrase: string;
  latency: number;
  ttl: number;
  /** Unix epoch ms. */
  createdAt: number;
  /** Unix epoch ms, a whole second so that the tokens' `exp` (seconds) equals it exactly. */
  expiresAt: number;
  closedAt: number | null;
  closeReason: CloseReason | null;
  streams: StreamRecord[];
  /** Issued invites, oldest first (absent on records made before invites were kept: none). */
  invites?: InviteRecord[] | undefined;
}

/** Invites kept per session at most: a bound on the record's size. */
export const MAX_INVITES = 200;

export const PASSPHRASE_LENGTH = 32;
const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** Largest multiple of 62 that fits in a byte: bytes at or above it are rejected, so there is no modulo bias. */
const UNBIASED_LIMIT = 256 - (256 % ALPHANUMERIC.length); // 248

export type RandomBytes = (n: number) => Buffer;

const POOL = Buffer.alloc(8192);
let poolOffset = POOL.length;

/**
 * CSPRNG bytes from a pool refilled by `randomFillSync`: one system call per 8 KiB instead of two per
 * session. Every byte is handed out once and copied, so callers never share or alias pool memory.
 */
export function pooledRandomBytes(n: number): Buffer {
  if (n > POOL.length) return randomBytes(n);
  if (poolOffset + n > POOL.length) {
    randomFillSync(POOL);
    poolOffset = 0;
  }
  const out = Buffer.from(POOL.subarray(poolOffset, poolOffset + n));
  poolOffset += n;
  return out;
}

/** 32 alphanumerics from a CSPRNG by rejection sampling (no modulo bias). */
export function generatePassphrase(
  random: RandomBytes = pooledRandomBytes,
  length = PASSPHRASE_LENGTH,
): string {
  let out = '';
  // Each byte is accepted with probability 248/256; 64 bytes per round make a second round rare.
  for (let round = 0; out.length < length; round++) {
    if (round > 1000) throw new Error('random source returned only rejected bytes');
    for (const b of random(64)) {
      if (b >= UNBIASED_LIMIT) continue;
      out += ALPHANUMERIC.charAt(b % ALPHANUMERIC.length);
      if (out.length === length) break;
    }
  }
  return out;
}

export function isLive(session: SessionRecord): boolean {
  return session.state !== 'CLOSED';
}

export function peerCount(stream: StreamRecord): number {
  return (stream.peerA ? 1 : 0) + (stream.peerB ? 1 : 0);
}

/**
 * Session state from its streams (README "States"): any connected → CONNECTED, any moved to the relay and
 * not yet connected → RELAYING (spec "States and transitions"), any matched → READY.
 */
export function deriveSessionState(streams: readonly StreamRecord[]): SessionState {
  if (streams.some((s) => s.state === 'connected')) return 'CONNECTED';
  if (streams.some((s) => s.state === 'relaying')) return 'RELAYING';
  if (streams.some((s) => s.state === 'ready')) return 'READY';
  return 'WAITING';
}
