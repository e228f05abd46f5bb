import { randomFillSync } from 'node:crypto';

/**
 * Random bytes for per-request nonces (NTS cookie and authenticator nonces), drawn from a pool that the
 * CSPRNG refills 4 KiB at a time: one `randomFillSync` per ~200 requests instead of a `randomBytes` call
 * (and its buffer) per nonce, which measured as costly as an AES-SIV operation on this path
 * (docs/performance.md). Every byte is handed out once and then zeroed in the pool.
 */
const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let at = POOL_BYTES;

/** Fill `target[offset, offset + length)` with fresh random bytes. */
export function randomInto(target: Uint8Array, offset: number, length: number): void {
  if (length > POOL_BYTES) {
    randomFillSync(target, offset, length);
    return;
  }
  if (at + length > POOL_BYTES) {
    randomFillSync(pool);
    at = 0;
  }
  target.set(pool.subarray(at, at + length), offset);
  pool.fill(0, at, at + length);
  at += length;
}

/** `length` fresh random bytes in a new buffer. */
export function randomBuffer(length: number): Buffer {
  const out = Buffer.allocUnsafe(length);
  randomInto(out, 0, length);
  return out;
}
