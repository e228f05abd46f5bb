/**
 * UUID version 7 (RFC 9562 §5.7): 48-bit Unix ms, version, 12-bit rand_a used as a counter so ids made in the
 * same millisecond still sort in creation order (RFC 9562 §6.2 method 1), variant, 62 random bits.
 * Random bytes come from node:crypto in batches, so an id costs no syscall on the hot path.
 */
import { randomFillSync } from 'node:crypto';

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
const POOL_IDS = 512;

export class UuidV7Generator {
  #lastMs = -1;
  #counter = 0;
  readonly #pool = Buffer.alloc(8 * POOL_IDS);
  #poolPos = this.#pool.length;
  readonly #now: () => number;

  constructor(now: () => number) {
    this.#now = now;
  }

  next(): string {
    let ms = this.#now();
    if (ms <= this.#lastMs) {
      // Same (or an earlier, stepped-back) millisecond: keep order by counting in rand_a, and borrow the next
      // millisecond when the 12-bit counter runs out.
      ms = this.#lastMs;
      this.#counter++;
      if (this.#counter > 0xfff) {
        ms++;
        this.#counter = 0;
      }
    } else {
      this.#counter = 0;
    }
    this.#lastMs = ms;
    if (this.#poolPos + 8 > this.#pool.length) {
      randomFillSync(this.#pool);
      this.#poolPos = 0;
    }
    const p = this.#pool;
    const r = this.#poolPos;
    this.#poolPos += 8;
    const b = new Array<string>(16);
    let t = ms;
    for (let i = 5; i >= 0; i--) {
      b[i] = HEX[t % 256] as string;
      t = Math.floor(t / 256);
    }
    b[6] = HEX[0x70 | (this.#counter >> 8)] as string;
    b[7] = HEX[this.#counter & 0xff] as string;
    b[8] = HEX[0x80 | ((p[r] as number) & 0x3f)] as string;
    for (let i = 1; i < 8; i++) b[8 + i] = HEX[p[r + i] as number] as string;
    return `${b[0]}${b[1]}${b[2]}${b[3]}-${b[4]}${b[5]}-${b[6]}${b[7]}-${b[8]}${b[9]}-${b[10]}${b[11]}${b[12]}${b[13]}${b[14]}${b[15]}`;
  }
}

export const UUID_V7_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The Unix ms timestamp inside a UUID v7. */
export function uuidV7Time(id: string): number {
  return parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
}
