import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  clientAddress,
  normaliseAddress,
  parseTrustPolicy,
  rateLimitKey,
} from '../../src/io/client-address.ts';

const none = parseTrustPolicy('off');
const oneHop = parseTrustPolicy('on');
const twoHops = parseTrustPolicy('2');
const networks = parseTrustPolicy('10.0.0.0/8, 2001:db8:ffff::/48, 127.0.0.1');

test('no trusted proxy: the socket address, whatever the header says', () => {
  assert.equal(clientAddress('203.0.113.5', '198.51.100.1', none), '203.0.113.5');
  assert.equal(clientAddress('::ffff:203.0.113.5', undefined, none), '203.0.113.5');
});

test('hops: the right-most untrusted entry; a forged left-most entry is never used', () => {
  // Client 203.0.113.7 sent "X-Forwarded-For: 1.2.3.4"; the proxy appended the real address.
  assert.equal(clientAddress('127.0.0.1', '1.2.3.4, 203.0.113.7', oneHop), '203.0.113.7');
  assert.equal(clientAddress('127.0.0.1', ['1.2.3.4', '203.0.113.7'], oneHop), '203.0.113.7');
  // Two proxies: CDN then load balancer.
  assert.equal(clientAddress('10.0.0.2', '1.2.3.4, 203.0.113.7, 10.0.0.9', twoHops), '203.0.113.7');
  // Fewer entries than hops: the left-most there is.
  assert.equal(clientAddress('10.0.0.2', '203.0.113.7', twoHops), '203.0.113.7');
  // No header behind a proxy: the proxy itself.
  assert.equal(clientAddress('10.0.0.2', undefined, oneHop), '10.0.0.2');
  // Ports, brackets and mapped addresses are normalised.
  assert.equal(clientAddress('127.0.0.1', '[2001:db8::1]:443', oneHop), '2001:db8::1');
  assert.equal(clientAddress('127.0.0.1', '203.0.113.7:5555', oneHop), '203.0.113.7');
  assert.equal(clientAddress('127.0.0.1', 'not-an-ip', oneHop), '127.0.0.1');
});

test('networks: skip trusted proxies from the right; an untrusted socket peer ignores the header', () => {
  assert.equal(clientAddress('10.1.2.3', '1.2.3.4, 203.0.113.7, 10.9.9.9', networks), '203.0.113.7');
  assert.equal(clientAddress('203.0.113.9', '1.2.3.4', networks), '203.0.113.9');
  assert.equal(clientAddress('2001:db8:ffff:1::5', '2001:db8:1::7', networks), '2001:db8:1::7');
  // Every hop trusted: the left-most.
  assert.equal(clientAddress('127.0.0.1', '10.0.0.1, 10.0.0.2', networks), '10.0.0.1');
  // Garbage left of a trusted proxy: the nearest valid address.
  assert.equal(clientAddress('127.0.0.1', 'junk, 10.0.0.2', networks), '10.0.0.2');
});

test('rate-limit keys: IPv4 whole, IPv6 by /64 (configurable), mapped IPv4 as IPv4', () => {
  assert.equal(rateLimitKey('203.0.113.7'), '203.0.113.7');
  const k = rateLimitKey('2001:db8:1:2::1');
  assert.equal(k, '20010db8000100020000000000000000/64');
  assert.equal(rateLimitKey('2001:db8:1:2:ffff:ffff:ffff:ffff'), k);
  assert.notEqual(rateLimitKey('2001:db8:1:3::1'), k);
  assert.equal(rateLimitKey('2001:db8:1:2ff::1', 56), rateLimitKey('2001:db8:1:200::1', 56));
  assert.equal(rateLimitKey('2001:db8::1', 128), '20010db8000000000000000000000001/128');
  assert.equal(normaliseAddress('::FFFF:192.0.2.1'), '192.0.2.1');
  assert.equal(rateLimitKey('::ffff:c000:201'), rateLimitKey('::ffff:192.0.2.1'));
});

test('fuzz: any header gives a syntactically valid address or the socket peer; never throws', () => {
  const policies = [oneHop, twoHops, networks];
  fc.assert(
    fc.property(fc.string({ maxLength: 300 }), fc.integer({ min: 0, max: 2 }), (header, p) => {
      const policy = policies[p] ?? oneHop;
      const a = clientAddress('127.0.0.1', header, policy);
      assert.equal(typeof a, 'string');
      assert.ok(a.length > 0);
      rateLimitKey(a);
    }),
    { numRuns: 2000 },
  );
});

test('trust policy parsing', () => {
  assert.deepEqual(parseTrustPolicy(false), { kind: 'none' });
  assert.deepEqual(parseTrustPolicy(true), { kind: 'hops', hops: 1 });
  assert.deepEqual(parseTrustPolicy(3), { kind: 'hops', hops: 3 });
  assert.deepEqual(parseTrustPolicy('0'), { kind: 'none' });
  const n = parseTrustPolicy('192.168.0.0/16,::1');
  assert.equal(n.kind, 'networks');
  assert.deepEqual(n.kind === 'networks' ? n.cidrs : [], ['192.168.0.0/16', '::1/128']);
  assert.throws(() => parseTrustPolicy('11'), /at most 10/);
  assert.throws(() => parseTrustPolicy('::1/200'), /bad prefix/);
});
