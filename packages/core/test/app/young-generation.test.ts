// core's young-generation.ts: while held, V8 keeps the young generation at its first size however much of
// start-up survives; restored (or sized by the operator), it grows as V8 grows it. Each case runs in a child
// process, since the factor is process-wide.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';

const MODULE = new URL('../../src/young-generation.ts', import.meta.url).href;

/**
 * The young generation's size in MB before `steps` and after allocating ~30 MB that survives, in a fresh
 * process (its size before is what loading the TypeScript loader grew it to).
 */
function newSpaceMb(steps: string, nodeFlags: string[] = []): { before: number; after: number } {
  const script = `
    import { getHeapSpaceStatistics } from 'node:v8';
    import { holdYoungGeneration, restoreYoungGeneration } from ${JSON.stringify(MODULE)};
    const size = () => getHeapSpaceStatistics().find((x) => x.space_name === 'new_space').space_size / 1048576;
    const before = size();
    ${steps}
    const keep = [];
    for (let i = 0; i < 300000; i++) keep.push({ a: i, b: 'x' + i, c: [i] });
    console.log(JSON.stringify({ before, after: size(), kept: keep.length }));`;
  const out = execFileSync(
    process.execPath,
    [...nodeFlags, '--import', 'tsx', '--input-type=module', '-e', script],
    { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } },
  );
  return JSON.parse(out) as { before: number; after: number };
}

test('held, the young generation keeps its first size; restored, it grows', () => {
  const held = newSpaceMb('holdYoungGeneration();');
  const restored = newSpaceMb('holdYoungGeneration(); restoreYoungGeneration();');
  assert.equal(held.after, held.before, `held: ${JSON.stringify(held)} MB`);
  assert.ok(restored.after > restored.before, `restored: ${JSON.stringify(restored)} MB`);
});

test("the operator's own sizing is left alone", () => {
  const sized = newSpaceMb('holdYoungGeneration();', ['--max-semi-space-size=8']);
  assert.ok(sized.after > sized.before, `operator-sized: ${JSON.stringify(sized)} MB`);
});
