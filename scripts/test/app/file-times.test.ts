/** The file-times reader on its own (the reporter run through node:test is io/file-times.test.ts). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readFileTimes } from '../../file-times.ts';

test("lines that are not the reporter's are ignored, the rest still add up", () => {
  const times = readFileTimes(
    '{"file":"/r/a.ts","ms":1500}\nnot json\n{"file":3}\n{"file":"/r/a.ts","ms":500}\n',
    '/r/',
  );
  assert.deepEqual(times, [{ file: 'a.ts', seconds: 2 }]);
});
