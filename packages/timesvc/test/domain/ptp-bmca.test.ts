import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  Bmca,
  MAX_FOREIGN_MASTERS,
  compareDatasets,
  type ComparableDataset,
  type LocalDataset,
} from '../../src/domain/ptp-bmca.ts';
import type { AnnounceBody, PortIdentity } from '../../src/protocol/ptp.ts';

/** Quick tests of the BMCA (docs/ptp.md "BMCA"; IEEE 1588-2008 §9.3) on a hand-moved clock, no sockets. */

const OURS = '020000fffe000001';
const LOCAL: LocalDataset = {
  identity: OURS,
  priority1: 128,
  clockClass: 6,
  clockAccuracy: 0x28,
  offsetScaledLogVariance: 0xffff,
  priority2: 128,
};

function announce(over: Partial<AnnounceBody> = {}): AnnounceBody {
  return {
    originTimestamp: { seconds: 0, nanoseconds: 0 },
    currentUtcOffset: 37,
    grandmasterPriority1: 128,
    clockClass: 248,
    clockAccuracy: 0xfe,
    offsetScaledLogVariance: 0xffff,
    grandmasterPriority2: 128,
    grandmasterIdentity: 'aabbccfffe000002',
    stepsRemoved: 0,
    timeSource: 0xa0,
    ...over,
  };
}

const PORT: PortIdentity = { clockIdentity: 'aabbccfffe000002', portNumber: 1 };

let nextGm = 0x100;
/** A dataset of its own grandmaster (a fresh identity unless given): Figure 27 compares the fields. */
function dataset(over: Partial<ComparableDataset> = {}): ComparableDataset {
  return {
    priority1: 128,
    clockClass: 248,
    clockAccuracy: 0xfe,
    offsetScaledLogVariance: 0xffff,
    priority2: 128,
    grandmasterIdentity: 'aabbccfffe' + (nextGm++).toString(16).padStart(6, '0'),
    stepsRemoved: 0,
    sender: PORT,
    ...over,
  };
}

/** A port with announce interval 1 s (log 0) and announceReceiptTimeout 3, started at t = 0. */
function bmca(listenOnly = false): Bmca {
  return new Bmca({ announceReceiptTimeout: 3, logAnnounceInterval: 0, listenOnly, startMs: 0 });
}

test('dataset comparison: each field in the order of IEEE 1588-2008 Figure 27 decides before the next', () => {
  const base = dataset();
  // priority1 beats a better class; class beats accuracy; accuracy beats variance; variance beats priority2;
  // priority2 beats identity.
  assert.ok(compareDatasets(dataset({ priority1: 120 }), dataset({ clockClass: 6 })) < 0);
  assert.ok(
    compareDatasets(dataset({ clockClass: 6, clockAccuracy: 0xfe }), dataset({ clockAccuracy: 0x20 })) < 0,
  );
  assert.ok(
    compareDatasets(dataset({ clockAccuracy: 0x21 }), dataset({ offsetScaledLogVariance: 0x4000 })) < 0,
  );
  assert.ok(compareDatasets(dataset({ offsetScaledLogVariance: 0x4000 }), dataset({ priority2: 1 })) < 0);
  assert.ok(
    compareDatasets(
      dataset({ priority2: 1, grandmasterIdentity: 'ff00000000000000' }),
      dataset({ grandmasterIdentity: '0000000000000001' }),
    ) < 0,
  );
  assert.ok(compareDatasets(dataset({ grandmasterIdentity: '0000000000000001' }), base) < 0);
  // Figure 28, one grandmaster on two paths: fewer steps, then the lower sender.
  const gm = { grandmasterIdentity: '0000000000000007' };
  assert.ok(compareDatasets(dataset({ ...gm, stepsRemoved: 1 }), dataset({ ...gm, stepsRemoved: 2 })) < 0);
  assert.ok(
    compareDatasets(
      dataset({ ...gm, sender: { clockIdentity: '1000000000000000', portNumber: 2 } }),
      dataset({ ...gm, sender: { clockIdentity: '2000000000000000', portNumber: 1 } }),
    ) < 0,
  );
});

test('dataset comparison is a total order: antisymmetric and transitive on random datasets', () => {
  // A grandmaster announces one set of fields whatever the path: only stepsRemoved and the sender vary
  // between Announces naming the same grandmaster (Figure 28 applies to those alone).
  const grandmasters = fc.uniqueArray(
    fc.record({
      priority1: fc.integer({ min: 0, max: 255 }),
      clockClass: fc.constantFrom(6, 7, 52, 187, 248, 255),
      clockAccuracy: fc.integer({ min: 0x20, max: 0x31 }),
      offsetScaledLogVariance: fc.constantFrom(0x4000, 0xffff),
      priority2: fc.integer({ min: 0, max: 255 }),
      grandmasterIdentity: fc.constantFrom('0000000000000001', 'aabbccfffe000002', 'ffffffffffffff00'),
    }),
    { minLength: 3, maxLength: 3, selector: (g) => g.grandmasterIdentity },
  );
  const path = fc.record({
    gm: fc.integer({ min: 0, max: 2 }),
    stepsRemoved: fc.integer({ min: 0, max: 3 }),
    sender: fc.record({
      clockIdentity: fc.constantFrom('0000000000000001', 'aabbccfffe000002'),
      portNumber: fc.integer({ min: 1, max: 3 }),
    }),
  });
  const ds = grandmasters.chain((gms) =>
    fc
      .tuple(path, path, path)
      .map((ps) =>
        ps.map(({ gm, ...p }): ComparableDataset => ({ ...(gms[gm] as (typeof gms)[number]), ...p })),
      ),
  );
  fc.assert(
    fc.property(ds, ([a, b, c]) => {
      if (!a || !b || !c) return;
      assert.equal(Math.sign(compareDatasets(a, b)) + Math.sign(compareDatasets(b, a)), 0);
      if (compareDatasets(a, b) < 0 && compareDatasets(b, c) < 0) assert.ok(compareDatasets(a, c) < 0);
    }),
    { numRuns: 2000, interruptAfterTimeLimit: 5000 },
  );
});

test('a newcomer listens for announceReceiptTimeout intervals before it becomes master', () => {
  const b = bmca();
  assert.equal(b.decide(LOCAL, 0).state, 'LISTENING');
  assert.equal(b.decide(LOCAL, 2999).state, 'LISTENING');
  const d = b.decide(LOCAL, 3000);
  assert.deepEqual([d.state, d.changed], ['MASTER', true]);
});

test('a better grandmaster heard while listening: never master, straight to PASSIVE on its second Announce', () => {
  const b = bmca();
  b.receive(PORT, 0, announce({ grandmasterPriority1: 120 }), 100);
  // One Announce is not qualified (FOREIGN_MASTER_THRESHOLD 2).
  assert.equal(b.decide(LOCAL, 100).state, 'LISTENING');
  b.receive(PORT, 0, announce({ grandmasterPriority1: 120 }), 1100);
  const d = b.decide(LOCAL, 1100);
  assert.equal(d.state, 'PASSIVE');
  assert.match(d.reason, /better grandmaster aabbcc\.fffe\.000002 \(priority1 120 vs ours 128\)/);
  for (let t = 2100; t < 20_000; t += 1000) {
    b.receive(PORT, 0, announce({ grandmasterPriority1: 120 }), t);
    assert.equal(b.decide(LOCAL, t).state, 'PASSIVE', `at ${t} ms`);
  }
});

test('a master steps aside within two of the better master Announces, and returns after announceReceiptTimeout', () => {
  const b = bmca();
  assert.equal(b.decide(LOCAL, 5000).state, 'MASTER');
  b.receive(PORT, 0, announce({ grandmasterPriority1: 120 }), 5200);
  assert.equal(b.decide(LOCAL, 5200).state, 'MASTER');
  b.receive(PORT, 0, announce({ grandmasterPriority1: 120 }), 6200);
  const d = b.decide(LOCAL, 6200);
  assert.deepEqual([d.state, d.changed, d.best?.grandmasterIdentity], ['PASSIVE', true, 'aabbccfffe000002']);
  // The better master stops after its Announce at 6.2 s: still PASSIVE until 3 intervals have passed.
  assert.equal(b.decide(LOCAL, 9199).state, 'PASSIVE');
  const back = b.decide(LOCAL, 9200);
  assert.deepEqual([back.state, back.changed, back.best], ['MASTER', true, undefined]);
});

test('a worse master is reported but changes nothing; a lower class wins over a better identity', () => {
  const b = bmca();
  b.receive(PORT, 0, announce({ grandmasterIdentity: '0000000000000001' }), 3000);
  b.receive(PORT, 0, announce({ grandmasterIdentity: '0000000000000001' }), 4000);
  const d = b.decide(LOCAL, 4000);
  assert.equal(d.state, 'MASTER');
  assert.equal(d.best?.clockClass, 248);
  assert.match(d.reason, /better than 000000\.0000\.000001 \(clockClass\)/);
});

test('our own grandmaster relayed by a boundary clock keeps us master', () => {
  const b = bmca();
  const bc: PortIdentity = { clockIdentity: '1111111111111111', portNumber: 3 };
  b.receive(bc, 0, announce({ grandmasterIdentity: OURS, clockClass: 6, stepsRemoved: 1 }), 3000);
  b.receive(bc, 0, announce({ grandmasterIdentity: OURS, clockClass: 6, stepsRemoved: 1 }), 4000);
  assert.equal(b.decide(LOCAL, 4000).state, 'MASTER');
});

test('a master announcing slower than us is not dropped between two of its Announces', () => {
  const b = bmca();
  // logAnnounceInterval 2 (4 s) against our 1 s and timeout 3: its record lives 12 s, not 3 s.
  for (const t of [0, 4000, 8000, 12_000, 16_000]) {
    b.receive(PORT, 2, announce({ grandmasterPriority1: 1 }), t);
    if (t > 0) assert.equal(b.decide(LOCAL, t + 3500).state, 'PASSIVE', `at ${t + 3500} ms`);
  }
  assert.equal(b.decide(LOCAL, 16_000 + 12_000).state, 'MASTER');
});

test('an Announce with stepsRemoved 255 is not qualified; a nonsense interval is clamped', () => {
  const b = bmca();
  b.receive(PORT, 0x7f, announce({ grandmasterPriority1: 1, stepsRemoved: 255 }), 3000);
  b.receive(PORT, 0x7f, announce({ grandmasterPriority1: 1, stepsRemoved: 255 }), 4000);
  assert.equal(b.decide(LOCAL, 4000).state, 'MASTER');
  // Clamped to 2^7 s: the record still expires (3 × 128 s), it does not live for 2^127 s.
  assert.equal(b.qualified(4000 + 3 * 128_000).length, 0);
});

test('a listener never becomes master and names the best master it hears', () => {
  const b = bmca(true);
  assert.equal(b.decide(LOCAL, 60_000).state, 'LISTENING');
  b.receive(PORT, 0, announce(), 60_000);
  b.receive(PORT, 0, announce(), 61_000);
  const d = b.decide(LOCAL, 61_000);
  assert.equal(d.state, 'LISTENING');
  assert.equal(d.best?.grandmasterIdentity, 'aabbccfffe000002');
  assert.match(d.reason, /listener; best master aabbcc\.fffe\.000002/);
});

test('a flood of invented ports keeps at most MAX_FOREIGN_MASTERS records, the best one among them', () => {
  const b = bmca();
  for (let i = 0; i < 500; i++) {
    const port = { clockIdentity: i.toString(16).padStart(16, '0'), portNumber: 1 };
    const a = announce({
      grandmasterIdentity: port.clockIdentity,
      grandmasterPriority1: i === 250 ? 1 : 200,
    });
    b.receive(port, 0, a, 3000 + i);
    b.receive(port, 0, a, 3500 + i);
  }
  const q = b.qualified(4100);
  assert.ok(q.length <= MAX_FOREIGN_MASTERS, `${q.length} records`);
  assert.equal(q[0]?.priority1, 1);
  assert.equal(b.decide(LOCAL, 4100).state, 'PASSIVE');
});
