/**
 * AES-SIV candidates for the NTS request path, timed in one process on the same inputs (docs/nts.md
 * "AES-SIV-CMAC"):
 *   - hand-written: packages/timesvc/src/protocol/aes-siv.ts (one persistent CBC object for CMAC, one ECB
 *     object as the CTR block function, both created once per key);
 *   - noble: @noble/ciphers `aessiv` (audited, pure JavaScript), keyed per call as its API requires;
 *   - node per-call: CMAC on a fresh `aes-128-cbc` cipher per MAC and the CTR half on a fresh `aes-128-ctr`
 *     cipher per message (the obvious node:crypto construction, no state kept between calls);
 *   - node hybrid: the hand-written CMAC, CTR half on a fresh `aes-128-ctr` cipher per message;
 *   - OpenSSL AES-128-SIV through the addon (native/nts-cookie.c; the running Node's OpenSSL, one keyed
 *     template context per key, copied per operation; S2V by hand with OpenSSL's CMAC for an empty
 *     plaintext), where built.
 * Each cell is the best of five slices (the machine is shared). Every candidate is checked against the hand-written output before timing. Two operations per size, as NTS
 * uses them (RFC 8915 §5.6, §5.7): `open` of a request authenticator (associated data = the packet before the
 * authenticator plus the 16-byte nonce, empty plaintext) and `seal` of a reply (associated data = the same,
 * plaintext = one 104-byte cookie field). Sizes are whole packet lengths: 228 bytes (a typical NTS request:
 * header, UID, one cookie, authenticator) and 1 KB (a request with placeholders).
 *
 *   npx tsx bench/timesvc-nts/aes-siv-micro.ts [--ms 400]
 */
import { createCipheriv, randomBytes, timingSafeEqual } from 'node:crypto';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { aessiv } from '@noble/ciphers/aes.js';
import { AesCmac, AesSiv, dbl, nativeNtsSiv } from '@broadcast-ops/timesvc/testing';
import type { NtsSiv } from '@broadcast-ops/timesvc/testing';

const { values } = parseArgs({ options: { ms: { type: 'string', default: '400' } } });
const MS = Number(values.ms);

interface Candidate {
  name: string;
  seal(key: Buffer, ad: Uint8Array[], p: Uint8Array): Uint8Array;
  open(key: Buffer, ad: Uint8Array[], c: Uint8Array): Uint8Array | undefined;
}

function xor(a: Buffer, b: Uint8Array, at = 0): void {
  for (let i = 0; i < b.length; i++) a[at + i]! ^= b[i]!;
}

/** CMAC on a fresh CBC cipher per MAC (RFC 4493 §2.4). */
function cmacPerCall(key: Buffer, k1: Buffer, k2: Buffer, m: Uint8Array): Buffer {
  const n = Math.max(1, Math.ceil(m.length / 16));
  const blocks = Buffer.alloc(n * 16);
  blocks.set(m);
  if (m.length > 0 && m.length % 16 === 0) xor(blocks, k1, (n - 1) * 16);
  else {
    blocks[m.length] = 0x80;
    xor(blocks, k2, (n - 1) * 16);
  }
  const c = createCipheriv('aes-128-cbc', key, Buffer.alloc(16));
  c.setAutoPadding(false);
  const out = c.update(blocks);
  return out.subarray(out.length - 16);
}

function s2vWith(mac: (m: Uint8Array) => Buffer, ad: Uint8Array[], p: Uint8Array): Buffer {
  let d = mac(Buffer.alloc(16));
  for (const a of ad) {
    d = dbl(d);
    xor(d, mac(a));
  }
  let t: Buffer;
  if (p.length >= 16) {
    t = Buffer.from(p);
    xor(t, d, t.length - 16);
  } else {
    t = dbl(d);
    const pad = Buffer.alloc(16);
    pad.set(p);
    pad[p.length] = 0x80;
    xor(t, pad);
  }
  return mac(t);
}

function ctrPerCall(key: Uint8Array, v: Uint8Array, input: Uint8Array): Buffer {
  const iv = Buffer.from(v);
  iv[8]! &= 0x7f;
  iv[12]! &= 0x7f;
  return createCipheriv('aes-128-ctr', key, iv).update(input);
}

function subkeys(key: Buffer): [Buffer, Buffer] {
  const c = createCipheriv('aes-128-ecb', key, null);
  c.setAutoPadding(false);
  const k1 = dbl(c.update(Buffer.alloc(16)));
  return [k1, dbl(k1)];
}

const handCache = new Map<Buffer, AesSiv>();
const hybridCache = new Map<Buffer, AesCmac>();
const nativeSiv = nativeNtsSiv();
const nativeCache = new Map<Buffer, NtsSiv>();
const candidates: Candidate[] = [
  {
    name: 'hand-written (aes-siv.ts)',
    seal: (k, ad, p) => handCache.get(k)!.seal(ad, p),
    open: (k, ad, c) => handCache.get(k)!.open(ad, c),
  },
  {
    name: '@noble/ciphers aessiv',
    seal: (k, ad, p) => aessiv(k, ...ad).encrypt(p),
    open: (k, ad, c) => {
      try {
        return aessiv(k, ...ad).decrypt(c);
      } catch {
        return undefined;
      }
    },
  },
  {
    name: 'node:crypto per call (cbc+ctr)',
    seal: (k, ad, p) => {
      const mk = k.subarray(0, 16);
      const [k1, k2] = subkeys(mk);
      const v = s2vWith((m) => cmacPerCall(mk, k1, k2, m), ad, p);
      return Buffer.concat([v, ctrPerCall(k.subarray(16), v, p)]);
    },
    open: (k, ad, c) => {
      const mk = k.subarray(0, 16);
      const [k1, k2] = subkeys(mk);
      const v = c.subarray(0, 16);
      const p = ctrPerCall(k.subarray(16), v, c.subarray(16));
      const t = s2vWith((m) => cmacPerCall(mk, k1, k2, m), ad, p);
      return timingSafeEqual(t, v) ? p : undefined;
    },
  },
  ...(nativeSiv
    ? [
        {
          name: 'OpenSSL AES-SIV (addon, per key)',
          seal: (k: Buffer, ad: Uint8Array[], p: Uint8Array) => nativeCache.get(k)!.seal(ad[0]!, ad[1]!, p),
          open: (k: Buffer, ad: Uint8Array[], c: Uint8Array) => nativeCache.get(k)!.open(ad[0]!, ad[1]!, c),
        },
      ]
    : []),
  {
    name: 'hybrid (kept CMAC, ctr per call)',
    seal: (k, ad, p) => {
      const cmac = hybridCache.get(k)!;
      const v = s2vWith((m) => cmac.mac(m), ad, p);
      return Buffer.concat([v, ctrPerCall(k.subarray(16), v, p)]);
    },
    open: (k, ad, c) => {
      const cmac = hybridCache.get(k)!;
      const v = c.subarray(0, 16);
      const p = ctrPerCall(k.subarray(16), v, c.subarray(16));
      const t = s2vWith((m) => cmac.mac(m), ad, p);
      return timingSafeEqual(t, v) ? p : undefined;
    },
  },
];

/**
 * CPU µs per call (user + system time of this process, so time spent waiting for a core on the shared
 * machine does not count): the best of 5 slices of MS/5 each.
 */
function time(fn: () => void): number {
  for (let i = 0; i < 2000; i++) fn(); // warm-up (JIT)
  let best = Infinity;
  for (let slice = 0; slice < 5; slice++) {
    let n = 0;
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    while (performance.now() - t0 < MS / 5) {
      for (let i = 0; i < 100; i++) fn();
      n += 100;
    }
    const cpu = process.cpuUsage(cpu0);
    best = Math.min(best, (cpu.user + cpu.system) / n);
  }
  return best;
}

console.log(
  `AES-SIV-CMAC-256 candidates, ${MS} ms per cell, node ${process.version}, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
console.log(
  'candidate                          size   open µs   seal µs (CPU)   vs hand-written (open / seal)',
);
for (const size of [228, 1024]) {
  const key = randomBytes(32);
  handCache.set(key, new AesSiv(key));
  hybridCache.set(key, new AesCmac(key.subarray(0, 16)));
  if (nativeSiv) nativeCache.set(key, nativeSiv(key));
  const packet = randomBytes(size - 16 - 4 - 16); // authenticator EF header + nonce + tag follow the packet
  const nonce = randomBytes(16);
  const ad = [packet, nonce];
  const cookie = randomBytes(104);
  const reference = new AesSiv(key);
  const sealedRequest = reference.seal(ad, new Uint8Array(0));
  const sealedReply = reference.seal(ad, cookie);
  let base: [number, number] | undefined;
  for (const c of candidates) {
    // Cross-check on these very inputs before timing.
    if (Buffer.compare(Buffer.from(c.seal(key, ad, cookie)), sealedReply) !== 0)
      throw new Error(`${c.name}: seal differs from the hand-written code`);
    if (c.open(key, ad, sealedRequest)?.length !== 0) throw new Error(`${c.name}: open failed`);
    const open = time(() => void c.open(key, ad, sealedRequest));
    const seal = time(() => void c.seal(key, ad, cookie));
    base ??= [open, seal];
    console.log(
      `${c.name.padEnd(34)} ${String(size).padStart(4)} ${open.toFixed(2).padStart(9)} ${seal.toFixed(2).padStart(9)}   ` +
        `${(open / base[0]).toFixed(2)}× / ${(seal / base[1]).toFixed(2)}×`,
    );
  }
}
console.log(
  `load average after: ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
