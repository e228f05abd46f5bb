import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generatePassphrase } from '../../src/domain/session.ts';

test('32 alphanumerics from the system CSPRNG, different every time', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 200; i++) {
    const p = generatePassphrase();
    assert.match(p, /^[A-Za-z0-9]{32}$/);
    seen.add(p);
  }
  assert.equal(seen.size, 200);
});

test('no modulo bias: bytes 248-255 are rejected, 0-247 map each character exactly 4 times', () => {
  // A scripted random source: first a block of only rejectable bytes, then every byte value once.
  const blocks = [Buffer.alloc(64, 250), Buffer.from(Array.from({ length: 256 }, (_, i) => i))];
  const counts = new Map<string, number>();
  let calls = 0;
  const source = (n: number): Buffer => {
    calls++;
    const all = Buffer.concat(blocks.splice(0, 1));
    assert.ok(all.length > 0, 'random source called more often than planned');
    return all.subarray(0, Math.max(n, all.length));
  };
  const p = generatePassphrase(source, 248);
  assert.equal(calls, 2);
  for (const c of p) counts.set(c, (counts.get(c) ?? 0) + 1);
  assert.equal(counts.size, 62);
  for (const [c, n] of counts) assert.equal(n, 4, `character ${c}`);
});

test('a broken random source is an error, not an endless loop', () => {
  assert.throws(() => generatePassphrase(() => Buffer.alloc(64, 255)), /rejected/);
});
