/**
 * Codecs return Decoded (docs/ARCHITECTURE.md "Codecs return Decoded"): every function a service's
 * protocol/ module exports under a name starting with `decode`, `parse` or `read` returns core's
 * `Decoded<T, E>`, as the type checker sees it with the repository's compiler options. A failure names each
 * function and the type it returns instead. scripts/decoded-codecs.ts holds the check; the first test proves
 * on a fixture (scripts/test/fixtures/decoded-codecs/) that it accepts the shapes it should and refuses
 * throwing, `undefined`, home-made `{ ok }` unions, `{ error }` and an error without code and message.
 * Pure: reads files, no process, no socket.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '@broadcast-ops/core/testing';
import { auditCodecs, compilerOptionsOf } from '../../decoded-codecs.ts';
import { tsFilesUnder } from '../../import-graph.ts';

const FIXTURE_FILE = 'scripts/test/fixtures/decoded-codecs/protocol/codecs.ts';
const packages = join(repoRoot, 'packages');
const serviceCodecs = readdirSync(packages).flatMap((p) => tsFilesUnder(join(packages, p, 'src/protocol')));
// One program for the fixture and the services' codecs: building it is most of the test's time.
const audit = auditCodecs(
  [join(repoRoot, FIXTURE_FILE), ...serviceCodecs],
  compilerOptionsOf(join(repoRoot, 'tsconfig.json')),
  repoRoot,
);

test('the check accepts Decoded (direct, through an alias, as a const) and refuses every other shape', () => {
  const verdicts = Object.fromEntries(
    audit.filter((f) => f.file === FIXTURE_FILE).map((f) => [f.name, f.decoded]),
  );
  assert.deepEqual(verdicts, {
    decodeFrame: true,
    parseFrame: true,
    readFrame: true,
    decodeThrowing: false,
    parseMaybe: false,
    parseOwnUnion: false,
    decodeOrError: false,
    readBareError: false,
  });
});

test("every decode*/parse*/read* exported by a service's protocol/ returns Decoded", () => {
  const services = audit.filter((f) => f.file !== FIXTURE_FILE);
  // The check has something to check: one codec of each service is among those found (a moved folder or a
  // broken export scan would empty the list).
  const names = services.map((f) => f.name);
  for (const name of ['parseClientMessage', 'parseClientFrame', 'decodeOsc', 'decodeNtpPacket']) {
    assert.ok(names.includes(name), `${name} not found; found ${names.join(', ')}`);
  }
  const wrong = services.filter((f) => !f.decoded).map((f) => `${f.file}: ${f.name} returns ${f.returns}`);
  assert.deepEqual(wrong, [], `codecs that do not return Decoded:\n${wrong.join('\n')}`);
});
