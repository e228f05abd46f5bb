import assert from 'node:assert/strict';
import { test } from 'node:test';
import { aessiv } from '@noble/ciphers/aes.js';
import fc from 'fast-check';
import { AesCmac, AesSiv } from '../../src/protocol/aes-siv.ts';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

// RFC 4493 §4 test vectors (AES-128 key 2b7e1516…).
const CMAC_KEY = hex('2b7e151628aed2a6abf7158809cf4f3c');
const CMAC_MSG = hex(
  `6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51
   30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710`,
);

test('AES-CMAC: RFC 4493 §4 examples 1-4', () => {
  const cmac = new AesCmac(CMAC_KEY);
  assert.equal(cmac.mac(Buffer.alloc(0)).toString('hex'), 'bb1d6929e95937287fa37d129b756746');
  assert.equal(cmac.mac(CMAC_MSG.subarray(0, 16)).toString('hex'), '070a16b46b4d4144f79bdd9dd04a287c');
  assert.equal(cmac.mac(CMAC_MSG.subarray(0, 40)).toString('hex'), 'dfa66747de9ae63030ca32611497c827');
  assert.equal(cmac.mac(CMAC_MSG).toString('hex'), '51f0bebf7e3b9d92fc49741779363cfe');
});

test('AES-SIV: RFC 5297 A.1 deterministic example, both ways', () => {
  const siv = new AesSiv(hex('fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff'));
  const ad = hex('101112131415161718191a1b1c1d1e1f2021222324252627');
  const p = hex('112233445566778899aabbccddee');
  const out = siv.seal([ad], p);
  assert.equal(out.toString('hex'), '85632d07c6e8f37f950acd320a2ecc93' + '40c02b9690c4dc04daef7f6afe5c');
  assert.deepEqual(siv.open([ad], out), p);
  const bad = Buffer.from(out);
  bad[20] = (bad[20] ?? 0) ^ 1;
  assert.equal(siv.open([ad], bad), undefined);
  assert.equal(siv.open([Buffer.from(ad).fill(0, 0, 1)], out), undefined);
});

test('AES-SIV: RFC 5297 A.2 nonce-based example (nonce as the last AD component), both ways', () => {
  const siv = new AesSiv(hex('7f7e7d7c7b7a79787776757473727170404142434445464748494a4b4c4d4e4f'));
  const ad1 = hex('00112233445566778899aabbccddeeffdeaddadadeaddadaffeeddccbbaa99887766554433221100');
  const ad2 = hex('102030405060708090a0');
  const nonce = hex('09f911029d74e35bd84156c5635688c0');
  const p = hex(
    '7468697320697320736f6d6520706c61696e7465787420746f20656e6372797074207573696e67205349562d414553',
  );
  const out = siv.seal([ad1, ad2, nonce], p);
  assert.equal(out.subarray(0, 16).toString('hex'), '7bdb6e3b432667eb06f4d14bff2fbd0f');
  assert.equal(
    out.subarray(16).toString('hex'),
    'cb900f2fddbe404326601965c889bf17dba77ceb094fa663b7a3f748ba8af829ea64ad544a272e9c485b62a3fd5c0d',
  );
  assert.deepEqual(siv.open([ad1, ad2, nonce], out), p);
});

test('AES-SIV agrees with @noble/ciphers aessiv (independent RFC 5297 implementation) on random input', () => {
  fc.assert(
    fc.property(
      fc.constantFrom(32, 48, 64),
      fc.uint8Array({ minLength: 64, maxLength: 64 }),
      fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 4 }),
      fc.uint8Array({ maxLength: 400 }),
      (keyLength, keyBytes, ad, plaintext) => {
        const key = keyBytes.subarray(0, keyLength);
        const ours = new AesSiv(key).seal(ad, plaintext);
        const theirs = aessiv(key, ...ad).encrypt(plaintext);
        assert.equal(ours.toString('hex'), Buffer.from(theirs).toString('hex'));
        assert.deepEqual(new Uint8Array(new AesSiv(key).open(ad, theirs) ?? []), plaintext);
      },
    ),
    { numRuns: 400 },
  );
});

test('AES-SIV rejects wrong key sizes and short ciphertexts', () => {
  assert.throws(() => new AesSiv(Buffer.alloc(16)), RangeError);
  assert.equal(new AesSiv(Buffer.alloc(32)).open([], Buffer.alloc(15)), undefined);
});
