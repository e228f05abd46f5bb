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
