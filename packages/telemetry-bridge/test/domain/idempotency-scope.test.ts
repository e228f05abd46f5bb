/**
 * Whose idempotency key it is (docs/protocol.md "Exactly once"): the scope table. With authentication on,
 * over real sockets: test/io/idempotency-scope.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { idempotencyScope } from '../../src/domain/client-registry.ts';

const T1 = 'studio-a-token-0123456789';
const T2 = 'studio-b-token-0123456789';

test('idempotencyScope: token and client id with auth, client id without, else the bare name', () => {
  const withId = idempotencyScope('panel', { credential: T1, clientId: 'panel-one-0001' });
  assert.match(withId, /^cred:[0-9a-f]{32}\/id:panel-one-0001$/);
  assert.notEqual(withId, idempotencyScope('panel', { credential: T2, clientId: 'panel-one-0001' }));
  assert.match(idempotencyScope('panel', { credential: T1 }), /^cred:[0-9a-f]{32}$/);
  assert.equal(idempotencyScope('panel', { clientId: 'panel-one-0001' }), 'id:panel-one-0001');
  assert.equal(idempotencyScope('panel', {}), 'name:panel');
  // The resume token never decides the scope.
  assert.equal(idempotencyScope('panel', { resumeToken: 'x' }), 'name:panel');
});
