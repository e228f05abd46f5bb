// The README's list of malformed-input kinds is the closed list in src/malformed.ts, word for word.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { createMetricsRegistry, silentLogger } from '@broadcast-ops/core';
import { MALFORMED_KINDS, MalformedInputs } from '../../src/malformed.ts';

test('README malformed-kinds list matches MALFORMED_KINDS', () => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const block = /<!-- malformed-kinds:start -->\n([\s\S]*?)<!-- malformed-kinds:end -->/.exec(readme);
  assert.ok(block, 'the README has the malformed-kinds block');
  const listed = (block[1] ?? '').trim().split('\n');
  const expected = Object.entries(MALFORMED_KINDS).map(([kind, what]) => `- \`${kind}\`: ${what}`);
  assert.deepEqual(listed, expected);
});

test('counts per kind and in total; the metric carries the kind', async () => {
  const registry = createMetricsRegistry();
  const m = new MalformedInputs(silentLogger(), registry);
  m.report('osc-datagram', {});
  m.report('osc-datagram', {});
  m.report('vmix-not-xml', {});
  assert.deepEqual(m.counts(), { 'osc-datagram': 2, 'vmix-not-xml': 1 });
  assert.equal(m.total(), 3);
  assert.match(await registry.metrics(), /playout_monitor_malformed_input_total\{kind="osc-datagram"\} 2/);
});
