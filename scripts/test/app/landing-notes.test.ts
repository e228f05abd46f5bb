/**
 * The landing page's "Before you start" notes (scripts/stack/landing-notes.ts) tell the truth: the credential is the
 * one the demo config's scrypt hash accepts, and the root README's quick start says the same.
 */
import assert from 'node:assert/strict';
import { scryptSync, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { repoRoot } from '@broadcast-ops/core/testing';
import { TIMESVC_LAB_PASSWORD, TIMESVC_LAB_USER, landingNotes } from '../../stack/landing-notes.ts';

test("the lab credential is the one config/timesvc.demo.yaml's scrypt hash accepts", () => {
  const config = parse(readFileSync(join(repoRoot, 'config/timesvc.demo.yaml'), 'utf8')) as {
    web: { users: { username: string; password_hash: string }[] };
  };
  const user = config.web.users.find((u) => u.username === TIMESVC_LAB_USER);
  assert.ok(user, 'no such user in the demo config');
  // scrypt$<log2 N>$<r>$<p>$<salt b64>$<key b64> (packages/timesvc/README.md "Passwords").
  const [scheme, logN, r, p, salt, key] = user.password_hash.split('$');
  assert.equal(scheme, 'scrypt');
  const expected = Buffer.from(key ?? '', 'base64');
  const derive = (password: string): Buffer =>
    scryptSync(password, Buffer.from(salt ?? '', 'base64'), expected.length, {
      N: 2 ** Number(logN),
      r: Number(r),
      p: Number(p),
      maxmem: 256 * 1024 * 1024,
    });
  assert.ok(timingSafeEqual(derive(TIMESVC_LAB_PASSWORD), expected), 'the password does not match the hash');
  assert.ok(!timingSafeEqual(derive(`${TIMESVC_LAB_PASSWORD}x`), expected)); // the check can fail
});

test('the landing notes and the README quick start show the credential and the base-URL note', () => {
  const notes = landingNotes();
  const text = (id: string): string => notes.find((n) => n.id === id)?.text ?? '';
  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
  const quickStart = readme.slice(readme.indexOf('## Two commands'), readme.indexOf('## Node.js versions'));
  assert.match(
    text('credential'),
    new RegExp(`user ${TIMESVC_LAB_USER}, password ${TIMESVC_LAB_PASSWORD}\\.`),
  );
  assert.match(
    quickStart,
    new RegExp(`user \`${TIMESVC_LAB_USER}\`, password\\s+\`${TIMESVC_LAB_PASSWORD}\``),
  );
  const command = "PUNCH_HOST=0.0.0.0 PUNCH_BASE_URL=http://<this machine's address>:8787 npm start";
  assert.ok(text('base-url').includes(command), text('base-url'));
  assert.ok(
    quickStart.replace(/\s+/g, ' ').includes(command),
    'README quick start lacks the base-URL command',
  );
});
