import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { bearerToken } from '@broadcast-ops/core';
import { TokenSigner, MAX_TOKEN_LENGTH } from '../../src/protocol/token.ts';

const SECRET = 'k'.repeat(40);
const NOW = Date.UTC(2026, 0, 1);
const EXP = NOW / 1000 + 1800;

/** The token built by hand from the formula in docs/protocol.md "Tokens" (independent of TokenSigner). */
function handMade(payloadJson: string, secret = SECRET): string {
  const seg = Buffer.from(payloadJson, 'utf8').toString('base64url');
  const sig = createHmac('sha256', secret).update(seg, 'ascii').digest('base64url');
  return `p_${seg}.${sig}`;
}

describe('Punch tokens', () => {
  const signer = new TokenSigner(SECRET);

  test('format: p_ + base64url(JSON claims) + "." + base64url_nopad(HMAC-SHA256)', () => {
    const token = signer.sign({ session: 'cam1', role: 'admin', stream: null, exp: EXP });
    assert.equal(token, handMade(`{"session":"cam1","role":"admin","stream":null,"exp":${EXP}}`));
    assert.match(token, /^p_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
  });

  test("the original's documented payload (no stream claim) verifies; a missing stream means all streams", () => {
    // The original's security page shows p_eyJzZXNzaW9uIjoiY2FtMSIsInJvbGUiOiJhZG1pbiIsImV4cCI6MTc0MTIzNH0.
    const seg = 'eyJzZXNzaW9uIjoiY2FtMSIsInJvbGUiOiJhZG1pbiIsImV4cCI6MTc0MTIzNH0';
    assert.equal(Buffer.from(seg, 'base64url').toString(), '{"session":"cam1","role":"admin","exp":1741234}');
    const sig = createHmac('sha256', SECRET).update(seg).digest('base64url');
    const v = signer.verify(`p_${seg}.${sig}`, 1741233_000);
    assert.deepEqual(v, {
      ok: true,
      claims: { session: 'cam1', role: 'admin', stream: null, exp: 1741234 },
      expired: false,
    });
  });

  test('round trip with every claim', () => {
    const claims = {
      session: 's.1',
      role: 'peer' as const,
      stream: 'cam-2',
      exp: EXP,
      sid: 'abc',
      label: 'Cam 2',
    };
    assert.deepEqual(signer.verify(signer.sign(claims), NOW), { ok: true, claims, expired: false });
  });

  test('expiry: exp*1000 <= now is expired, one ms before is not', () => {
    const token = signer.sign({ session: 'x', role: 'admin', stream: null, exp: EXP });
    const before = signer.verify(token, EXP * 1000 - 1);
    const at = signer.verify(token, EXP * 1000);
    assert.ok(before.ok && !before.expired);
    assert.ok(at.ok && at.expired);
  });

  test('forgeries are refused', () => {
    const token = signer.sign({ session: 'cam1', role: 'peer', stream: 'a', exp: EXP });
    const dot = token.lastIndexOf('.');
    const seg = token.slice(2, dot);
    const sig = token.slice(dot + 1);
    const upgraded = Buffer.from(
      JSON.stringify({ session: 'cam1', role: 'admin', stream: null, exp: EXP }),
    ).toString('base64url');
    assert.deepEqual(signer.verify(`p_${upgraded}.${sig}`, NOW), { ok: false, reason: 'bad_signature' });
    assert.deepEqual(signer.verify(`p_${seg}.${sig.slice(0, -1)}${sig.endsWith('A') ? 'B' : 'A'}`, NOW), {
      ok: false,
      reason: 'bad_signature',
    });
    assert.deepEqual(new TokenSigner('another-secret-with-enough-characters-000').verify(token, NOW), {
      ok: false,
      reason: 'bad_signature',
    });
    // A correctly signed but meaningless payload is refused too.
    assert.deepEqual(signer.verify(handMade('{"session":"x","role":"root","exp":1}'), NOW), {
      ok: false,
      reason: 'bad_claims',
    });
    assert.deepEqual(signer.verify(handMade('[1,2]'), NOW), { ok: false, reason: 'bad_claims' });
    assert.deepEqual(signer.verify(handMade('not json'), NOW), { ok: false, reason: 'bad_claims' });
    assert.deepEqual(signer.verify(handMade('{"session":"x","role":"admin","stream":5,"exp":1}'), NOW), {
      ok: false,
      reason: 'bad_claims',
    });
    for (const bad of [
      '',
      'p_',
      'p_abc',
      'p_.x',
      'p_abc.',
      'x_abc.def',
      'p_a b.c',
      `p_${'a'.repeat(MAX_TOKEN_LENGTH)}.b`,
    ]) {
      assert.deepEqual(signer.verify(bad, NOW), { ok: false, reason: 'malformed' }, bad);
    }
  });

  test('fuzz: arbitrary strings and single-character mutations never verify and never throw', () => {
    const token = signer.sign({ session: 'cam1', role: 'admin', stream: null, exp: EXP });
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (s) => {
        assert.equal(signer.verify(s, NOW).ok, false);
      }),
      { numRuns: 500 },
    );
    fc.assert(
      fc.property(fc.nat(token.length - 1), fc.constantFrom(...'ABCabc012-_.xyz'.split('')), (i, c) => {
        const mutated = token.slice(0, i) + c + token.slice(i + 1);
        fc.pre(mutated !== token);
        assert.equal(signer.verify(mutated, NOW).ok, false, mutated);
      }),
      { numRuns: 500 },
    );
  });

  test('bearer header parsing', () => {
    assert.equal(bearerToken('Bearer p_a.b'), 'p_a.b');
    assert.equal(bearerToken('bearer  p_a.b '), 'p_a.b');
    assert.equal(bearerToken('Basic p_a.b'), undefined);
    assert.equal(bearerToken('Bearer'), undefined);
    assert.equal(bearerToken('Bearer a b'), undefined);
    assert.equal(bearerToken(undefined), undefined);
  });
});
