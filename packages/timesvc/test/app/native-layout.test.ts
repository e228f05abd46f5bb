/**
 * The native responder's arrays are positional: the layout is named once in C (native/mmsg.c SERVED_LAYOUT,
 * POLICY_LAYOUT, STATS_LAYOUT; native/ntp-fast.h NF_OUTCOMES) and once in TypeScript (src/io/native-served.ts),
 * and the addon is used only when its layout() agrees (layoutMismatch). Here: the built addon agrees, each kind
 * of drift is refused with a reason, and the arrays are filled by name.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OUTCOME, type ServerSystemState } from '../../src/domain/ntp-responder.ts';
import { batchSocketsAvailable, nativeResponderForTests } from '../../src/io/batch-socket.ts';
import {
  NATIVE_STATS,
  POLICY_LAYOUT,
  SERVED_LAYOUT,
  layoutMismatch,
  policyArray,
  servedArray,
  type NativeLayout,
} from '../../src/io/native-served.ts';

const agreeing: NativeLayout = {
  served: [...SERVED_LAYOUT],
  policy: [...POLICY_LAYOUT],
  stats: [...NATIVE_STATS],
  outcomes: { ...OUTCOME },
};

test('the built ntp_mmsg addon reports the layout the sources expect, and so is loaded', () => {
  const native = nativeResponderForTests();
  assert.ok(
    native?.layout,
    'ntp_mmsg.node is missing or has no layout(): run `npm rebuild -w packages/timesvc`',
  );
  const layout = native.layout();
  assert.equal(layoutMismatch(layout), undefined);
  assert.deepEqual(layout, agreeing);
  assert.equal(batchSocketsAvailable(), true);
});

test('each kind of drift between the C and TypeScript layouts is refused, naming the array', () => {
  assert.equal(layoutMismatch(agreeing), undefined);
  assert.match(layoutMismatch(undefined) ?? '', /no layout\(\)/);
  const swapped: string[] = [...SERVED_LAYOUT];
  swapped.splice(7, 2, 'precision', 'stratum');
  assert.match(
    layoutMismatch({ ...agreeing, served: swapped }) ?? '',
    /^its served array is \[.*precision, stratum/,
  );
  assert.match(layoutMismatch({ ...agreeing, policy: POLICY_LAYOUT.slice(1) }) ?? '', /^its policy array/);
  assert.match(layoutMismatch({ ...agreeing, stats: [...NATIVE_STATS, 'extra'] }) ?? '', /^its stats array/);
  assert.match(
    layoutMismatch({ ...agreeing, outcomes: { ...OUTCOME, DROP_MALFORMED: 9 } }) ?? '',
    /^its outcome codes are .*DROP_MALFORMED=9/,
  );
});

test('the served and policy arrays are filled by field name, in the layout order', () => {
  const state: ServerSystemState = {
    leap: 1,
    stratum: 2,
    precision: -23,
    referenceId: 0xc0a80001,
    referenceTimestamp: { seconds: 0xeb000000, fraction: 0x80000000 },
    rootDelayS: 0.004,
    rootDispersionS: 0.002,
    dispersionRateS: 15e-6,
    updatedAtMs: 1234.5,
  };
  const out = servedArray(
    new Float64Array(SERVED_LAYOUT.length),
    { p0: 10, p1: 20, sec0: 3, ns0: 4, rate: 1.000001 },
    state,
  );
  const at = (name: (typeof SERVED_LAYOUT)[number]): number | undefined => out[SERVED_LAYOUT.indexOf(name)];
  assert.equal(at('valid'), 1);
  assert.equal(at('p1'), 20);
  assert.equal(at('rate'), 1.000001);
  assert.equal(at('stratum'), 2);
  assert.equal(at('precision'), -23);
  assert.equal(at('referenceId'), 0xc0a80001);
  assert.equal(at('referenceFraction'), 0x80000000);
  assert.equal(at('dispersionRateS'), 15e-6);
  assert.equal(at('updatedAtMs'), 1234.5);
  assert.equal(servedArray(new Float64Array(SERVED_LAYOUT.length), undefined, state)[0], 0);
  const policy = policyArray({
    rateLimiter: {
      options: {
        enabled: false,
        averageIntervalS: 2,
        burst: 8,
        kodIntervalS: 4,
        maxClients: 100,
        ipv6PrefixBits: 56,
      },
    },
  } as Parameters<typeof policyArray>[0]);
  assert.deepEqual([...policy], [0, 2, 8, 4, 100, 56]);
});
