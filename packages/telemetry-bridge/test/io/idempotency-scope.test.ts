/**
 * Whose idempotency key it is (docs/protocol.md "Exactly once"), with authentication on, over real sockets:
 * a key is kept per bearer token and client id, so a client with another token that claims the same client
 * id runs its own command, and the first client, back on a new connection with its token and id, gets its
 * recorded outcome without a second execution. The scope table: test/domain/idempotency-scope.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestBridge } from '../helpers.ts';

const T1 = 'studio-a-token-0123456789';
const T2 = 'studio-b-token-0123456789';

test('with auth on: the same client id under another token runs its own command; the owner gets its outcome', async () => {
  const tb = await startTestBridge({ clientTransport: { requireAuth: true, authTokens: [T1, T2] } });
  try {
    const first = await tb.client('panel', { authToken: T1, clientId: 'panel-one-0001' });
    const h1 = first.command('fake', 'fake.x', 'ok', { n: 1 }, { idempotencyKey: 'take-1' });
    assert.equal((await h1.done).payload.status, 'completed');
    assert.equal(tb.adapter.executed.length, 1);
    await first.close();

    const other = await tb.client('panel', { authToken: T2, clientId: 'panel-one-0001' });
    const h2 = other.command('fake', 'fake.x', 'ok', { n: 2 }, { idempotencyKey: 'take-1' });
    const final2 = await h2.done;
    assert.equal(final2.payload.status, 'completed');
    assert.equal((final2.payload as { originalCommandId?: string }).originalCommandId, undefined);
    assert.equal(tb.adapter.executed.length, 2, 'another token: its own command ran');

    const back = await tb.client('panel', { authToken: T1, clientId: 'panel-one-0001' });
    const h3 = back.command('fake', 'fake.x', 'ok', { n: 3 }, { idempotencyKey: 'take-1' });
    const final3 = await h3.done;
    assert.equal(final3.payload.status, 'completed');
    assert.equal((final3.payload as { originalCommandId?: string }).originalCommandId, h1.id);
    assert.deepEqual(final3.payload.result, { echoed: { n: 1 } }, 'the first command’s result');
    assert.equal(tb.adapter.executed.length, 2, 'not executed again');
  } finally {
    await tb.close();
  }
});
