import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { repoRoot, requireTool, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { SECRET } from '../helpers.ts';
import { count, deleteSession, listening, restIn, sleep } from '../agent-netns.ts';
import { inNamespace, sh, type Group } from '../netns.ts';
import { MATRIX_SRT_PORT, createNatWorld, type NatKind, type NatSide, type NatWorld } from '../nat-netns.ts';

/**
 * The NAT matrix (docs/relay.md "NAT matrix"): two `punch agent`s, each on a private network behind a NAT
 * namespace of its own kind, the broker with its in-process relay on a third network (test/nat-netns.ts).
 * For each unordered pair of kinds (the rendezvous is symmetric: docs/relay.md) the test asserts the
 * documented path: CONNECTED directly without ever RELAYING, or RELAYING then CONNECTED with path relayed
 * in the broker's session view; the MPEG-TS that arrives is bit-exact (length and SHA-256 of what the feed
 * sent after the link came up, whole passes to the end); and it records the time from the first `start`
 * to the first media byte written by the receiver, printed per cell with the p95 over the cells.
 *
 * The feed (test/fixtures/udp-feed.mjs) plays the reference file in a loop from before `start`, so what
 * arrives is a tail of one pass then whole passes (srt-live-transmit discards what its source gives it
 * while its SRT target is not connected); SIGTERM makes it stop at the end of a pass.
 *
 * PUNCH_RELAY_AFTER_MS for the broker: NAT_MATRIX_RELAY_AFTER_MS, else the broker's default.
 */
const PORT = 8787;
const UDP_IN = 9300;
const KINDS: NatKind[] = ['none', 'full-cone', 'address-restricted', 'symmetric'];
const SHORT: Record<NatKind, string> = {
  none: 'no',
  'full-cone': 'fc',
  'address-restricted': 'ar',
  symmetric: 'sy',
};

/** docs/relay.md "NAT matrix": SRT rendezvous crosses unless a side maps endpoint-dependently. */
const expected = (a: NatKind, b: NatKind): 'direct' | 'relayed' =>
  a === 'symmetric' || b === 'symmetric' ? 'relayed' : 'direct';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const node = process.execPath;
const bin = join(repoRoot, 'packages/punch/bin/punch.mjs');
const fixture = (name: string) => join(repoRoot, 'packages/punch/test/fixtures', name);

/**
 * What the feed sent from the first datagram the receiver got: `ref` from that datagram's offset (a
 * multiple of 1316 bytes: one UDP datagram), then whole passes; null when `received` is not that.
 */
function expectedTail(received: Buffer, ref: Buffer): Buffer | null {
  const first = received.subarray(0, 1316);
  const offsets: number[] = [];
  for (let off = 0; off < ref.length; off += 1316) {
    if (ref.subarray(off, off + first.length).equals(first)) offsets.push(off);
  }
  if (offsets.length !== 1) return null;
  const head = ref.subarray(offsets[0]);
  const passes = (received.length - head.length) / ref.length;
  if (!Number.isInteger(passes) || passes < 1) return null;
  return Buffer.concat([head, ...Array.from({ length: passes }, () => ref)]);
}

/** Where `received` departs from the looped reference, for the failure message. */
function mismatch(received: Buffer, ref: Buffer): string {
  const first = received.subarray(0, 1316);
  let start = -1;
  for (let off = 0; off < ref.length && start < 0; off += 1316) {
    if (ref.subarray(off, off + first.length).equals(first)) start = off;
  }
  if (start < 0) return 'its first datagram is not one of the reference';
  for (let i = 0; i < received.length; i++) {
    if (received[i] !== ref[(start + i) % ref.length])
      return `the looped reference from offset ${start} differs at received byte ${i} (datagram ${Math.floor(i / 1316)})`;
  }
  return `the looped reference from offset ${start} matches but does not end at the end of a pass`;
}

interface Cell {
  a: NatKind;
  b: NatKind;
  expected: 'direct' | 'relayed';
  observed?: string;
  firstMediaMs?: number;
}

describe('NAT matrix: direct or relayed per pair of NAT kinds, bit-exact media', () => {
  let world: NatWorld;
  const tmp = tempDir('punch-nat-matrix-');
  const groups: Group[] = [];
  let broker: Group;
  let ref: Buffer;
  const refFile = join(tmp.path, 'ref.ts');
  const cells: Cell[] = [];
  const afterMs = process.env['NAT_MATRIX_RELAY_AFTER_MS'];
  const run = (space: string, cmd: string): Group => {
    const g = inNamespace(space, cmd, tmp.path);
    groups.push(g);
    return g;
  };
  let rest: ReturnType<typeof restIn>;
  let url: string;

  before(async () => {
    for (const tool of ['ip', 'nft', 'srt-live-transmit', 'ffmpeg', 'curl']) requireTool(tool);
    world = createNatWorld();
    url = `http://${world.brokerIp}:${PORT}`;
    rest = restIn(world.broker, url);
    // Two seconds of test pattern at 1 Mbit/s: one pass is about half a second at the feed's pace.
    sh('ffmpeg', [
      ...['-hide_banner', '-loglevel', 'error', '-nostdin', '-f', 'lavfi'],
      ...['-i', 'testsrc=size=320x240:rate=25', '-t', '2'],
      ...['-c:v', 'mpeg2video', '-b:v', '1M', '-f', 'mpegts', refFile],
    ]);
    ref = readFileSync(refFile);
    broker = run(
      world.broker,
      `PUNCH_SECRET=${SECRET} PUNCH_HOST=${world.brokerIp} PUNCH_PORT=${PORT} PUNCH_DB=${join(tmp.path, 'punch.db')} ` +
        `PUNCH_RELAY_PUBLIC_ADDRESS=${world.brokerIp} ${afterMs ? `PUNCH_RELAY_AFTER_MS=${afterMs}` : ''} ` +
        `LOG_LEVEL=info exec ${node} ${bin} serve`,
    );
    await listening(broker);
  });

  after(() => {
    for (const g of groups) g.signal('SIGKILL');
    world?.remove();
    tmp.remove();
    if (cells.length === 0) return;
    const rows = cells.map(
      (c) =>
        `${c.a.padEnd(18)} ${c.b.padEnd(18)} expected ${c.expected.padEnd(7)} observed ${(c.observed ?? '-').padEnd(7)} ` +
        `first media ${c.firstMediaMs === undefined ? '-' : `${(c.firstMediaMs / 1000).toFixed(2)} s`}`,
    );
    const times = cells
      .flatMap((c) => (c.firstMediaMs === undefined ? [] : [c.firstMediaMs]))
      .sort((x, y) => x - y);
    // p95 by linear interpolation between closest ranks.
    const rank = 0.95 * (times.length - 1);
    const lo = Math.floor(rank);
    const p95 = times.length
      ? times[lo]! + (times[Math.min(lo + 1, times.length - 1)]! - times[lo]!) * (rank - lo)
      : NaN;
    process.stdout.write(
      `\nNAT matrix (relay.fallbackAfterMs ${afterMs ?? 'default'}):\n${rows.join('\n')}\n` +
        `time from start to first media: p95 ${(p95 / 1000).toFixed(2)} s over ${times.length} cells\n`,
    );
  });

  for (let i = 0; i < KINDS.length; i++) {
    for (let j = i; j < KINDS.length; j++) {
      const [ka, kb] = [KINDS[i]!, KINDS[j]!];
      const cell: Cell = { a: ka, b: kb, expected: expected(ka, kb) };
      test(`${ka} × ${kb}: ${cell.expected}`, async () => {
        cells.push(cell);
        const sideA = world.side(1, ka);
        const sideB = world.side(2, kb);
        try {
          await runCell(cell, sideA, sideB);
        } finally {
          sideA.remove();
          sideB.remove();
        }
      });
    }
  }

  async function runCell(cell: Cell, sideA: NatSide, sideB: NatSide): Promise<void> {
    const name = `nm-${SHORT[cell.a]}-${SHORT[cell.b]}`;
    const created = await rest('POST', '/api/session', undefined, { name, latency: 200 });
    assert.equal(created.status, 201, created.text);
    const admin = created.json.token as string;
    const tokenFor = async (label: string) =>
      (await rest('POST', `/api/session/${name}/token`, admin, { label })).json.token as string;
    const [tSend, tRecv] = [await tokenFor('sender'), await tokenFor('receiver')];
    const observer = run(world.broker, `exec ${node} ${fixture('ws-observer.mjs')} ${url} ${name} ${admin}`);
    const rx = join(tmp.path, `${name}.ts`);
    // The feed runs from before `start`: the first media byte is not held back by the test.
    const feed = run(sideA.peer, `exec ${node} ${fixture('udp-feed.mjs')} ${refFile} ${UDP_IN} 4 600`);
    const agent = (side: NatSide, token: string, role: string, media: string) =>
      run(
        side.peer,
        `exec ${node} ${bin} agent --broker ${url} --session ${name} --token ${token} --role ${role} ` +
          `--port ${MATRIX_SRT_PORT} ${media} --label ${role} --health 1`,
      );
    const receiver = agent(sideB, tRecv, 'receiver', `--output file:${rx}`);
    const sender = agent(sideA, tSend, 'sender', `--input udp://127.0.0.1:${UDP_IN}`);
    const diag = () =>
      `\n--- broker\n${broker.output().slice(-6000)}\n--- sender\n${sender.output().slice(-4000)}` +
      `\n--- receiver\n${receiver.output().slice(-4000)}\n--- observer\n${observer.output().slice(-3000)}` +
      `\n--- gateway A\n${sideA.kind === 'none' ? '' : sideA.nft('list', 'ruleset')}` +
      `\n--- gateway B\n${sideB.kind === 'none' ? '' : sideB.nft('list', 'ruleset')}`;

    const size = () => (existsSync(rx) ? statSync(rx).size : 0);
    await waitFor(() => size() > 0, {
      timeoutMs: 60_000,
      intervalMs: 20,
      what: () => `first media${diag()}`,
    });
    const firstMedia = Date.now();
    const starts = [sender, receiver].flatMap((g) => {
      const m = /^\{.*"msg":"srt started".*$/m.exec(g.output());
      const time = m ? (JSON.parse(m[0]) as { time?: string }).time : undefined;
      return time ? [Date.parse(time)] : [];
    });
    assert.equal(starts.length, 2, `both agents logged "srt started"${diag()}`);
    cell.firstMediaMs = firstMedia - Math.min(...starts);

    await waitFor(() => /"state":"CONNECTED"/.test(observer.output()), {
      timeoutMs: 30_000,
      what: () => `CONNECTED${diag()}`,
    });
    const view = await rest('GET', `/api/session/${name}`, admin);
    const stream = view.json.streams.default as {
      path: string;
      peer_a: { ip: string };
      peer_b: { ip: string };
    };
    cell.observed = stream.path;
    assert.equal(view.json.state, 'CONNECTED', diag());
    // The broker saw each peer from its public address (the NAT's, or its own without NAT).
    assert.deepEqual(
      [stream.peer_a.ip, stream.peer_b.ip].sort(),
      [sideA.publicIp, sideB.publicIp].sort(),
      diag(),
    );
    const relaying = /"state":"RELAYING"/.test(observer.output());
    assert.equal(stream.path, cell.expected, `path${diag()}`);
    assert.equal(relaying, cell.expected === 'relayed', `RELAYING seen: ${relaying}${diag()}`);
    if (relaying) {
      // The direct attempts were made and failed at the symmetric NAT: the partner's datagrams to its
      // public SRT port had no mapping to follow and were dropped; a cone partner let the symmetric side's
      // datagrams in (they came from a port the partner's SRT was not talking to, so it ignored them).
      for (const [mine, theirs] of [
        [sideA, sideB],
        [sideB, sideA],
      ] as const) {
        if (mine.kind !== 'symmetric') continue;
        assert.ok(mine.counter('filter_input') > 0, `direct datagrams dropped at ${mine.gw}${diag()}`);
        if (theirs.kind === 'full-cone' || theirs.kind === 'address-restricted')
          assert.ok(theirs.counter('nat_prerouting') > 0, `the cone at ${theirs.gw} let them in${diag()}`);
      }
      const out = observer.output();
      assert.ok(
        out.indexOf('"state":"RELAYING"') < out.lastIndexOf('"state":"CONNECTED"'),
        'RELAYING, then CONNECTED',
      );
      // The agents followed the relay without a restart of their processes.
      for (const g of [sender, receiver]) {
        assert.equal(count(g.output(), /"msg":"connected to broker"/g), 1, diag());
        assert.equal(count(g.output(), /"msg":"srt started"/g), 2, diag());
      }
    }

    // Two more passes, then the feed stops at the end of its pass; what arrived must be bit-exact.
    const goal = size() + 2 * ref.length;
    await waitFor(() => size() >= goal, {
      timeoutMs: 30_000,
      what: () => `${goal} bytes (has ${size()})${diag()}`,
    });
    feed.signal('SIGTERM');
    assert.equal(await Promise.race([feed.exited, sleep(10_000).then(() => 'timeout')]), 0, 'the feed ends');
    // Until what arrived ends at the end of a pass and has not grown for a second: a receiver starved by
    // a loaded host may pause longer than any fixed settling time, and may still be writing at a pass end.
    let last = -1;
    await waitFor(
      () => {
        const now = size();
        const done = now === last && expectedTail(readFileSync(rx), ref) !== null;
        last = now;
        return done;
      },
      {
        timeoutMs: 20_000,
        intervalMs: 1000,
        what: () => `received ${size()} bytes: ${mismatch(readFileSync(rx), ref)}${diag()}`,
      },
    );
    const received = readFileSync(rx);
    const want = expectedTail(received, ref);
    assert.ok(want, `received ${received.length} bytes: ${mismatch(received, ref)}${diag()}`);
    assert.equal(received.length, want.length, 'received length');
    assert.equal(sha256(received), sha256(want), 'received bytes');

    assert.deepEqual(await deleteSession({ rest }, name, admin, [sender, receiver]), [0, 0], diag());
    observer.signal('SIGTERM');
  }
});
