// core's start-v8.ts: while held, V8 keeps the young generation at its size and does not optimise with
// TurboFan; released (or set by the operator), both work as V8's defaults do. Each case runs in a child
// process, since V8's flags are process-wide.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';

const MODULE = new URL('../../src/start-v8.ts', import.meta.url).href;

interface Seen {
  /** The young generation's size (MB) before the steps and after allocating ~30 MB that survives. */
  before: number;
  after: number;
  /** V8's optimisation status of a hot function after the steps (%GetOptimizationStatus bits). */
  status: number;
}

function run(steps: string, nodeFlags: string[] = []): Seen {
  const script = `
    import { getHeapSpaceStatistics } from 'node:v8';
    import { holdStartSettings, releaseStartSettings } from ${JSON.stringify(MODULE)};
    const size = () => getHeapSpaceStatistics().find((x) => x.space_name === 'new_space').space_size / 1048576;
    const before = size();
    ${steps}
    const keep = [];
    for (let i = 0; i < 300000; i++) keep.push({ a: i, b: 'x' + i, c: [i] });
    const after = size();
    function hot(n) { let s = 0; for (let i = 0; i < n; i++) s += (i * 7) % 13; return s; }
    for (let i = 0; i < 3000; i++) hot(2000);
    console.log(JSON.stringify({ before, after, status: %GetOptimizationStatus(hot), kept: keep.length }));`;
  const out = execFileSync(
    process.execPath,
    [...nodeFlags, '--allow-natives-syntax', '--import', 'tsx', '--input-type=module', '-e', script],
    { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } },
  );
  return JSON.parse(out) as Seen;
}

/** V8's "optimised by TurboFan" bit of %GetOptimizationStatus (src/runtime/runtime.h, OptimizationStatus). */
const TURBOFANNED = 1 << 6;

test('held: the young generation keeps its size and TurboFan optimises nothing; released: both as before', () => {
  const held = run('holdStartSettings();');
  assert.equal(held.after, held.before, `held: ${JSON.stringify(held)}`);
  assert.equal(held.status & TURBOFANNED, 0, `held: ${JSON.stringify(held)}`);
  const released = run('holdStartSettings(); releaseStartSettings();');
  assert.ok(released.after > released.before, `released: ${JSON.stringify(released)}`);
  assert.notEqual(released.status & TURBOFANNED, 0, `released: ${JSON.stringify(released)}`);
});

test("the operator's own settings are left alone", () => {
  const sized = run('holdStartSettings();', ['--max-semi-space-size=8', '--turbofan']);
  assert.ok(sized.after > sized.before, `operator-sized: ${JSON.stringify(sized)}`);
  assert.notEqual(sized.status & TURBOFANNED, 0, `operator's --turbofan: ${JSON.stringify(sized)}`);
});
