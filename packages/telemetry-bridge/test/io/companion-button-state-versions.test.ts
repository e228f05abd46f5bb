/**
 * Companion's button state for every app (docs/companion.md "Button state for every app"), one table over
 * the Satellite ApiVersions that change it: 1.7.0, 1.10.0 without and with CAPS SUBSCRIPTIONS, 1.14.0 with
 * subscriptions asking for png, and 1.14.0 asking for webp (not offered by this Companion: raw rgb). Against
 * the Companion simulator, through the bridge's WebSocket and its JSON API:
 *
 * - the handshake: BITMAP_FORMAT only where CAPS BITMAP_FORMATS exists, the bitmap in the format agreed;
 * - a configured location is subscribed where Companion offers subscriptions, and said `unavailable` (with
 *   the reason) where not; `watch` / `unwatch` add and drop a location, or are refused with the reason;
 * - a press on a subscribed location (the surface's own key where there are no subscriptions) changes the
 *   JSON state, and the WebSocket diff arrives with the next `seq`, the same number the JSON carries;
 * - a client resuming from its `seq` gets only what it missed (no snapshot), and so does the JSON `since`;
 * - the declared outputs as JSON (`/api/variables`) with `seq` and `since`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEV, DEVICE, VARIABLES, rig, stateOf, type Rig } from '../companion/harness.ts';
import { buttonReader } from '../companion/button-reader.ts';

interface Buttons {
  epoch: string;
  seq: number;
  full: boolean;
  buttons: { path: string; text?: string; pressed?: boolean; imageHash?: string; seq: number }[];
}
interface Variables {
  epoch: string;
  seq: number;
  full: boolean;
  variables: { path: string; value: unknown; seq: number }[];
}

const LOC = 'companion.page.2.row.1.column.3';
const PATTERNS = ['companion.page.**', 'companion.device.*.key.*'];
const KEY = (i: number): string => `companion.device.${DEV}.key.${i}`;
const PNG = '89504e470d0a1a0a';

const CASES: {
  name: string;
  version: string;
  subscriptions: boolean;
  prefer: 'png' | 'webp';
  format: 'rgb' | 'png';
  bitmapFormatSent: boolean;
}[] = [
  {
    name: '1.7.0',
    version: '1.7.0',
    subscriptions: false,
    prefer: 'png',
    format: 'rgb',
    bitmapFormatSent: false,
  },
  {
    name: '1.10.0 without SUBSCRIPTIONS',
    version: '1.10.0',
    subscriptions: false,
    prefer: 'png',
    format: 'rgb',
    bitmapFormatSent: false,
  },
  {
    name: '1.10.0 with SUBSCRIPTIONS',
    version: '1.10.0',
    subscriptions: true,
    prefer: 'png',
    format: 'rgb',
    bitmapFormatSent: false,
  },
  {
    name: '1.14.0 with SUBSCRIPTIONS, png',
    version: '1.14.0',
    subscriptions: true,
    prefer: 'png',
    format: 'png',
    bitmapFormatSent: true,
  },
  {
    name: '1.14.0 with SUBSCRIPTIONS, webp asked, not offered',
    version: '1.14.0',
    subscriptions: true,
    prefer: 'webp',
    format: 'rgb',
    bitmapFormatSent: true,
  },
];

async function json<T>(r: Rig, path: string): Promise<T> {
  const res = await fetch(`${r.bridge.consoleUrl as string}${path}`);
  assert.equal(res.status, 200, path);
  return (await res.json()) as T;
}

for (const c of CASES) {
  test(`button state, ApiVersion ${c.name}`, async () => {
    const r = await rig({
      sim: { apiVersion: c.version, subscriptions: c.subscriptions },
      companion: {
        locations: ['2/1/3'],
        device: {
          deviceId: DEVICE,
          productName: 'Buttons',
          keysTotal: 8,
          keysPerRow: 4,
          bitmaps: 8,
          bitmapFormat: c.prefer,
          variables: VARIABLES,
        },
      },
    });
    const readers: { close: () => void }[] = [];
    try {
      r.sim.setButton(1, 0, 0, { text: 'CAM 1', color: '#ff0000' });
      r.sim.setButton(2, 1, 3, { text: 'REC', color: '#00ff00' });
      await r.until(() => stateOf(r) === 'connected', 'connected');
      await r.until(() => (r.get(KEY(0))?.value as { text?: string } | undefined)?.text === 'CAM 1', 'drawn');

      // Handshake: the bitmap format is asked for only where CAPS offers a choice, and used as agreed.
      const add = r.sim.linesNamed('ADD-DEVICE')[0]?.parsed.params ?? {};
      assert.equal(add['BITMAP_FORMAT'], c.bitmapFormatSent ? c.format : undefined);
      const caps = r.get('companion.capabilities')?.value as { bitmapFormat?: string };
      assert.equal(caps.bitmapFormat, c.format);
      const k0 = r.get(KEY(0))?.value as { image: string; imageFormat: string };
      assert.equal(k0.imageFormat, c.format);
      // png arrives as a data URL (Companion's SatelliteRenderUtil.ts), rgb as bare base64 pixels.
      if (c.format === 'png') {
        assert.match(k0.image, /^data:image\/png;base64,/);
        assert.equal(
          Buffer.from(k0.image.split(',')[1] ?? '', 'base64')
            .subarray(0, 8)
            .toString('hex'),
          PNG,
        );
      } else assert.equal(Buffer.from(k0.image, 'base64').length, 8 * 8 * 3, 'raw rgb, 8 × 8 × 3');

      // The configured location: subscribed where offered, otherwise unavailable with the reason.
      const subs = (): Record<string, { status: string; reason?: string }> =>
        r.get('companion.subscriptions')?.value as Record<string, { status: string; reason?: string }>;
      const client = await r.client('ops');
      if (c.subscriptions) {
        await r.until(() => subs()['2/1/3']?.status === 'live', 'location live');
        const sub = r.sim.linesNamed('ADD-SUB')[0]?.parsed.params ?? {};
        assert.equal(sub['LOCATION'], '2/1/3');
        assert.equal(sub['BITMAP'], '8');
        assert.equal(sub['BITMAP_FORMAT'], c.bitmapFormatSent ? c.format : undefined);
        const loc = r.get(LOC)?.value as { text: string; imageFormat: string; image: string };
        assert.equal(loc.text, 'REC');
        assert.equal(loc.imageFormat, c.format);
        // watch adds a location without pressing it; unwatch drops it (REMOVE-SUB); a configured one stays.
        const w = await client.command('companion', 'companion.page.3.row.0.column.0', 'watch').done;
        assert.equal(w.payload.status, 'completed', JSON.stringify(w.payload));
        await r.until(() => r.get('companion.page.3.row.0.column.0') !== undefined, 'watched location drawn');
        assert.equal(r.sim.linesNamed('SUB-PRESS').length, 0, 'watch never presses');
        const u = await client.command('companion', 'companion.page.3.row.0.column.0', 'unwatch').done;
        assert.equal(u.payload.status, 'completed', JSON.stringify(u.payload));
        assert.equal(r.sim.linesNamed('REMOVE-SUB').length, 1);
        assert.equal(r.get('companion.page.3.row.0.column.0'), undefined);
        const keep = await client.command('companion', LOC, 'unwatch').done;
        assert.equal(keep.payload.status, 'failed');
        assert.match(keep.payload.error?.message ?? '', /configured in companion\.locations/);
      } else {
        await r.until(() => subs()['2/1/3']?.status === 'unavailable', 'location unavailable');
        assert.match(
          subs()['2/1/3']?.reason ?? '',
          c.version === '1.7.0' ? /needs 1\.10\.0/ : /SUBSCRIPTIONS=0/,
        );
        assert.equal(r.sim.linesNamed('ADD-SUB').length, 0);
        const w = await client.command('companion', LOC, 'watch').done;
        assert.equal(w.payload.status, 'rejected');
        assert.match(w.payload.error?.message ?? '', /surface keys .* are still published/);
      }

      // A reader on the WebSocket, and the JSON as it stands.
      const w1 = await buttonReader(r.bridge.clientUrl, PATTERNS);
      readers.push(w1);
      const j0 = await json<Buttons>(r, 'api/buttons');
      assert.equal(j0.full, true);
      assert.equal(
        j0.buttons.length,
        c.subscriptions ? 9 : 8,
        'the surface keys, plus the location where subscribed',
      );
      assert.ok(
        j0.buttons.every((b) => /^[0-9a-f]{16}$/.test(b.imageHash ?? '')),
        'every button has an image hash',
      );

      // A press on the subscribed location (the surface's own key without subscriptions).
      const target = c.subscriptions ? LOC : KEY(0);
      const before = w1.msgs.length;
      const down = await client.command('companion', target, 'down').done;
      assert.equal(down.payload.status, 'completed', JSON.stringify(down.payload));
      assert.equal(r.sim.linesNamed(c.subscriptions ? 'SUB-PRESS' : 'KEY-PRESS').length, 1);
      const diff = await w1.pressedAfter(before, target);
      const j1 = await json<Buttons>(r, `api/buttons?since=${j0.seq}&epoch=${j0.epoch}`);
      assert.equal(j1.full, false);
      assert.deepEqual(
        j1.buttons.map((b) => [b.path, b.pressed]),
        [[target, true]],
        'the JSON changed for the pressed button only',
      );
      assert.ok((diff.offset ?? 0) > j0.seq, 'the diff comes after the JSON the reader had');
      assert.equal(j1.buttons[0]?.seq, diff.offset, 'the WebSocket diff and the JSON carry the same seq');
      assert.equal(
        w1.msgs.slice(before).filter((m) => m.type === 'state').length,
        1,
        'one diff, not a resend',
      );

      // The reader goes away; two buttons change; it resumes from its seq and gets only those two.
      const position = w1.last();
      w1.close();
      assert.equal((await client.command('companion', target, 'up').done).payload.status, 'completed');
      r.sim.setButton(1, 0, 1, { text: 'NEW', color: '#0000ff' });
      await r.until(() => (r.get(KEY(1))?.value as { text?: string }).text === 'NEW', 'key 1 redrawn');
      await r.until(() => (r.get(target)?.value as { pressed?: boolean }).pressed === false, 'released');
      const w2 = await buttonReader(r.bridge.clientUrl, PATTERNS, { offset: position, epoch: j0.epoch });
      readers.push(w2);
      const data = w2.complete()?.payload?.['data'] as { replayed?: number };
      assert.ok(data.replayed !== undefined, `resumed, not a snapshot: ${JSON.stringify(data)}`);
      assert.ok(!w2.msgs.some((m) => m.payload?.['event'] === 'recovery_failed'));
      const got = new Set(w2.msgs.filter((m) => m.type === 'state').map((m) => m.path));
      assert.deepEqual([...got].sort(), [KEY(1), target].sort(), 'only what it missed');
      const j2 = await json<Buttons>(r, `api/buttons?since=${position}&epoch=${j0.epoch}`);
      assert.deepEqual(j2.buttons.map((b) => b.path).sort(), [KEY(1), target].sort());

      // Variables (declared outputs, 1.7.0+) as JSON the same way.
      r.sim.setOutput('custom:tally_pgm', '1');
      await r.until(() => r.get('companion.variables.custom.tally_pgm')?.value === '1', 'output');
      const v0 = await json<Variables>(r, 'api/variables');
      assert.deepEqual(
        v0.variables.map((v) => [v.path, v.value]),
        [['companion.variables.custom.tally_pgm', '1']],
      );
      r.sim.setOutput('internal:time_hms', '10:00:01');
      await r.until(() => r.get('companion.variables.internal.time_hms') !== undefined, 'second output');
      const v1 = await json<Variables>(r, `api/variables?since=${v0.seq}&epoch=${v0.epoch}`);
      assert.deepEqual(
        v1.variables.map((v) => [v.path, v.value]),
        [['companion.variables.internal.time_hms', '10:00:01']],
      );
    } finally {
      for (const x of readers) x.close();
      await r.close();
    }
  });
}
