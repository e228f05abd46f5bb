import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildWebApp } from '../helpers/web-app.ts';

test('with a real user list the login page is told nothing about the users', async () => {
  const rig = await buildWebApp();
  try {
    const note = await rig.service.app.inject({ url: '/api/auth/lab-credential' });
    assert.equal(note.statusCode, 200);
    assert.deepEqual(note.json(), { in_use: false, users: [], password: null, jwt_secret: false });
  } finally {
    await rig.close();
  }
});

test('a user with its own hash of the lab password: found after start in a lab, refused before start in production', async () => {
  const { hashPassword } = await import('../../src/io/web/passwords.ts');
  const { LAB_PASSWORD, LAB_PASSWORD_HASH } = await import('../../src/io/web/lab-credential.ts');
  const hash = await hashPassword(LAB_PASSWORD, { log2N: 14, r: 8, p: 1, saltBytes: 16, keyBytes: 32 });
  assert.notEqual(hash, LAB_PASSWORD_HASH);
  const users = [
    { username: 'ops', password_hash: LAB_PASSWORD_HASH, role: 'admin' },
    { username: 'lab2', password_hash: hash, role: 'viewer' },
  ];
  const rig = await buildWebApp({ web: { users } });
  try {
    // The demo's own hash is known at once; the other needs its key derived, after start.
    await rig.service.web.checkCredentials();
    assert.deepEqual(rig.service.web.labCredential(), ['web.users[0] (ops)']);
    await rig.service.web.labCredentialChecked();
    assert.deepEqual(rig.service.web.labCredential(), ['web.users[0] (ops)', 'web.users[1] (lab2)']);
  } finally {
    await rig.close();
  }
  const prod = await buildWebApp({ environment: 'production', web: { users: [users[1]] } });
  try {
    await assert.rejects(
      prod.service.web.checkCredentials(),
      /lab credential is in use \(web\.users\[0\] \(lab2\)\)/,
    );
  } finally {
    await prod.close();
  }
});
