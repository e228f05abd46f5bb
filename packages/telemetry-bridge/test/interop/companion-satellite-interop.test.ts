/**
 * Interop: the bridge against Companion's own Satellite server code at three API versions, vendored unmodified
 * (but for import specifiers) under test/fixtures/ with a PROVENANCE.md each, run in this process behind a TCP
 * server wired as that version's SatelliteTcp.ts (test/fixtures/companion-satellite/harness.ts):
 *
 * | case | Companion code | API | CAPS |
 * | 1.7 | tag v3.5.5, companion/lib/Service/SatelliteApi.ts | 1.7.0 | none (no CAPS line) |
 * | 1.10 on / off | tag v4.3.4, companion/lib/Service/Satellite/SatelliteApi.ts | 1.10.1 | SUBSCRIPTIONS only |
 * | 1.14 on (png, rgb) / off | main 3d76cbad, the same path | 1.14.0 | + BITMAP_FORMATS, ROTARY_AMOUNT |
 *
 * One table, the same checks in every row: the handshake as that Companion sends it read into capabilities
 * (API version, CAPS, features, bitmap format) and ADD-DEVICE asking only what that version understands;
 * Companion's code answering every line without one ERROR, on one connection (no retry loop); a press on the
 * bridge's own surface key reaching the surface's doButton through Companion's KEY-PRESS (down and up); a
 * declared input set through SET-VARIABLE-VALUE. Where subscriptions are on: the configured location subscribed
 * with ADD-SUB and drawn by Companion's SUB-STATE in the agreed format, a press on it reaching Companion's
 * pressControl once down and once up, the JSON state and the WebSocket diff carrying the same seq, a reader
 * resuming from its seq getting only what it missed, `unwatch` answered by Companion's REMOVE-SUB OK. Where they
 * are off (1.10 and 1.14 with the setting off; 1.7, which has none): the location `unavailable` with the reason,
 * `watch` refused before anything is sent, and still no ADD-SUB after several heartbeats.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { DEV, DEVICE, VARIABLES, rig, stateOf, type Rig } from '../companion/harness.ts';
import { buttonReader } from '../companion/button-reader.ts';

type Version = '1.7' | '1.10' | '1.14';
interface CompanionServer {
  port: number;
  lines: string[];
  sent: string[];
  presses: { controlId: string; pressed: boolean; surfaceId: string }[];
  keyPresses: { deviceId: string; x: number; y: number; pressed: boolean }[];
  variableSets: { name: string; value: string }[];
  keyRotates: { x: number; y: number; direction: boolean | number }[];
  setButton(page: number, row: number, column: number, s: { text?: string; color?: number }): void;
  setSubscriptions(on: boolean): void;
  close(): Promise<void>;
}

// Imported by path at run time: the vendored code is kept as published, outside the repository's type check.
const HARNESS = fileURLToPath(new URL('../fixtures/companion-satellite/harness.ts', import.meta.url));
const startCompanion = async (o: { subscriptions: boolean; version: Version }): Promise<CompanionServer> => {
  const m = (await import(HARNESS)) as {
    startCompanion(o: { subscriptions: boolean; version: Version }): Promise<CompanionServer>;
  };
  return m.startCompanion(o);
};

const LOC = 'companion.page.2.row.1.column.3';

async function buttons(
  r: Rig,
  q = '',
): Promise<{
  epoch: string;
  seq: number;
  full: boolean;
  buttons: { path: string; pressed?: boolean; seq: number; imageFormat?: string }[];
}> {
  const res = await fetch(`${r.bridge.consoleUrl as string}api/buttons${q}`);
  assert.equal(res.status, 200);
  return (await res.json()) as Awaited<ReturnType<typeof buttons>>;
}

interface Case {
  name: string;
  version: Version;
  subscriptions: boolean;
  prefer: 'png' | 'rgb';
  /** What the handshake must read: BEGIN's ApiVersion, the CAPS line as published, the bitmap format. */
  apiVersion: string;
  caps: Record<string, unknown>;
  format: 'png' | 'rgb';
  /** The reason a location is unavailable when there are no subscriptions. */
  unavailable?: RegExp;
}

const CAPS_114 = { NONSQUARE: true, BITMAP_FORMATS: 'rgb,png,webp', ROTARY_AMOUNT: true };
const CASES: Case[] = [
  // 1.7.0 sends no CAPS and has no subscriptions or BITMAP_FORMAT: KEY-STATE bitmaps are raw rgb.
  {
    name: 'no subscriptions',
    version: '1.7',
    subscriptions: false,
    prefer: 'png',
    apiVersion: '1.7.0',
    caps: {},
    format: 'rgb',
    unavailable: /needs 1\.10\.0/,
  },
  // 1.10.x: CAPS SUBSCRIPTIONS (the user setting) only; bitmaps raw rgb, BITMAP_FORMAT not sent.
  {
    name: 'subscriptions on',
    version: '1.10',
    subscriptions: true,
    prefer: 'png',
    apiVersion: '1.10.1',
    caps: { SUBSCRIPTIONS: true },
    format: 'rgb',
  },
  {
    name: 'subscriptions off',
    version: '1.10',
    subscriptions: false,
    prefer: 'png',
    apiVersion: '1.10.1',
    caps: { SUBSCRIPTIONS: false },
    format: 'rgb',
    unavailable: /SUBSCRIPTIONS=0/,
  },
  {
    name: 'subscriptions on, png asked',
    version: '1.14',
    subscriptions: true,
    prefer: 'png',
    apiVersion: '1.14.0',
    caps: { SUBSCRIPTIONS: true, ...CAPS_114 },
    format: 'png',
  },
  {
    name: 'subscriptions on, rgb asked',
    version: '1.14',
    subscriptions: true,
    prefer: 'rgb',
    apiVersion: '1.14.0',
    caps: { SUBSCRIPTIONS: true, ...CAPS_114 },
    format: 'rgb',
  },
  {
    name: 'subscriptions off',
    version: '1.14',
    subscriptions: false,
    prefer: 'png',
    apiVersion: '1.14.0',
    caps: { SUBSCRIPTIONS: false, ...CAPS_114 },
    format: 'png',
    unavailable: /SUBSCRIPTIONS=0/,
  },
];

for (const c of CASES) {
  test(`Companion's SatelliteApi (${c.apiVersion}), ${c.name}`, async (t) => {
    const companion = await startCompanion({ subscriptions: c.subscriptions, version: c.version });
    companion.setButton(2, 1, 3, { text: 'REC', color: 0x00ff00 });
    let r: Rig | undefined;
    const readers: { close(): void }[] = [];
    try {
      r = await rig({
        sim: {},
        transport: 'tcp',
        port: companion.port,
        companion: {
          locations: ['2/1/3'],
          device: {
            deviceId: DEVICE,
            productName: 'Interop',
            keysTotal: 8,
            keysPerRow: 4,
            bitmaps: 8,
            bitmapFormat: c.prefer,
            variables: VARIABLES,
          },
        },
      });
      const rr = r;
      await rr.until(() => stateOf(rr) === 'connected', 'registered on Companion');

      // Handshake: what this Companion said, and ADD-DEVICE asking only what it understands.
      const caps = rr.get('companion.capabilities')?.value as {
        apiVersion: string;
        companionVersion: string;
        caps: Record<string, unknown>;
        features: Record<string, unknown>;
        bitmapFormat: string;
      };
      assert.equal(caps.apiVersion, c.apiVersion);
      assert.equal(caps.companionVersion, 'satelliteapi-interop');
      assert.deepEqual(caps.caps, c.caps);
      assert.equal(caps.features['caps'], c.version !== '1.7');
      assert.equal(caps.features['subscriptions'], c.subscriptions);
      assert.equal(caps.features['rotaryAmount'], c.version === '1.14');
      assert.equal(caps.bitmapFormat, c.format);
      assert.equal(companion.sent.filter((l) => l.startsWith('CAPS')).length, c.version === '1.7' ? 0 : 1);
      const add = companion.lines.find((l) => l.startsWith('ADD-DEVICE')) ?? '';
      if (c.version === '1.14') assert.match(add, new RegExp(`BITMAP_FORMAT="${c.format}"`));
      else assert.doesNotMatch(add, /BITMAP_FORMAT/, 'no BITMAP_FORMAT before 1.12.0');
      assert.match(add, /BITMAPS=8/);
      assert.match(add, /VARIABLES="/);
      assert.equal(/PINCODE_LOCK="FULL"/.test(add), c.version !== '1.7', 'PINCODE_LOCK from 1.8.0');
      assert.ok(companion.sent.includes(`ADD-DEVICE OK DEVICEID="${DEVICE}"`), companion.sent.join('\n'));

      const subs = (): Record<string, { status: string; reason?: string }> =>
        rr.get('companion.subscriptions')?.value as Record<string, { status: string; reason?: string }>;
      const client = await rr.client('interop');

      // A press on the bridge's own surface key: Companion's KEY-PRESS parses it to x/y on the surface.
      const key = await client.command('companion', `companion.device.${DEV}.key.6`, 'press').done;
      assert.equal(key.payload.status, 'completed', JSON.stringify(key.payload));
      assert.deepEqual(
        companion.keyPresses.map((p) => [p.deviceId, p.x, p.y, p.pressed]),
        [
          [DEVICE, 2, 1, true],
          [DEVICE, 2, 1, false],
        ],
        "down and up reached the surface's doButton (key 6 = column 2, row 1 of 4 × 2)",
      );
      // Rotations: left and right as Companion reads DIRECTION (a boolean before 1.14.0, a signed delta from it);
      // a step count only where CAPS ROTARY_AMOUNT says so, else refused before anything is sent.
      for (const direction of [-1, 1, 3]) {
        const rot = await client.command('companion', `companion.device.${DEV}.key.0`, 'rotate', {
          direction,
        }).done;
        assert.equal(rot.payload.status, direction === 3 && c.version !== '1.14' ? 'rejected' : 'completed');
      }
      assert.deepEqual(
        companion.keyRotates.map((k) => [k.x, k.y, k.direction]),
        c.version === '1.14'
          ? [
              [0, 0, -1],
              [0, 0, 1],
              [0, 0, 3],
            ]
          : [
              [0, 0, false],
              [0, 0, true],
            ],
      );
      // A declared input (1.7.0): Companion decodes VALUE and hands it to the surface.
      const set = await client.command('companion', 'companion.variables', 'setVariable', {
        variable: 'custom:cue',
        value: 'Take 2 "wide"',
      }).done;
      assert.equal(set.payload.status, 'completed', JSON.stringify(set.payload));
      assert.deepEqual(companion.variableSets, [{ name: 'custom:cue', value: 'Take 2 "wide"' }]);

      if (c.unavailable) {
        await rr.until(() => subs()['2/1/3']?.status === 'unavailable', 'unavailable');
        assert.match(subs()['2/1/3']?.reason ?? '', c.unavailable);
        const w = await client.command('companion', LOC, 'watch').done;
        assert.equal(w.payload.status, 'rejected');
        const p = await client.command('companion', LOC, 'press').done;
        assert.equal(p.payload.status, 'rejected');
        // Cleanly absent: several heartbeats later, still one session, no subscription ever tried, no error.
        const pings = companion.lines.filter((l) => l.startsWith('PING')).length;
        await rr.until(
          () => companion.lines.filter((l) => l.startsWith('PING')).length >= pings + 3,
          'three more heartbeats',
        );
        assert.equal(stateOf(rr), 'connected');
        assert.equal(companion.lines.filter((l) => /^(ADD-SUB|SUB-PRESS)/.test(l)).length, 0, 'nothing sent');
        assert.equal(companion.presses.length, 0);
      } else {
        await rr.until(() => subs()['2/1/3']?.status === 'live', 'location live');
        const addSub = companion.lines.find((l) => l.startsWith('ADD-SUB')) ?? '';
        assert.match(addSub, /LOCATION="2\/1\/3"/);
        assert.match(addSub, /BITMAP=8/);
        const loc = rr.get(LOC)?.value as {
          text: string;
          colour: string;
          pressed: boolean;
          image: string;
          imageFormat: string;
        };
        assert.equal(loc.text, 'REC');
        assert.equal(loc.colour, '#00ff00');
        assert.equal(loc.pressed, false);
        assert.equal(loc.imageFormat, c.format);
        if (c.format === 'png') assert.match(loc.image, /^data:image\/png;base64,iVBORw0KGgo/);
        else {
          // 8 × 8 × 3 raw bytes, the button's colour (1.10 scales Companion's 72 px RGBA render with image-rs).
          const px = Buffer.from(loc.image, 'base64');
          assert.equal(px.length, 8 * 8 * 3);
          assert.deepEqual([...px.subarray(0, 3)], [0, 255, 0]);
        }

        const w1 = await buttonReader(rr.bridge.clientUrl, ['companion.page.**']);
        readers.push(w1);
        const j0 = await buttons(rr);
        assert.ok(j0.buttons.some((b) => b.path === LOC && b.pressed === false));
        const before = w1.msgs.length;
        const down = await client.command('companion', LOC, 'down').done;
        assert.equal(down.payload.status, 'completed', JSON.stringify(down.payload));
        const diff = await w1.pressedAfter(before, LOC);
        assert.deepEqual(
          companion.presses.map((p) => [p.controlId, p.pressed]),
          [['bank:2/1/3', true]],
          "one press reached Companion's control",
        );
        const j1 = await buttons(rr, `?since=${j0.seq}&epoch=${j0.epoch}`);
        assert.deepEqual(
          j1.buttons.map((b) => [b.path, b.pressed, b.seq]),
          [[LOC, true, diff.offset]],
        );
        t.diagnostic(
          `press → SUB-STATE pushed=1 → JSON seq ${j1.buttons[0]?.seq} = WebSocket offset ${diff.offset}`,
        );

        // Resume: the reader leaves, the button is released and redrawn by Companion, the reader comes back.
        const position = w1.last();
        w1.close();
        assert.equal((await client.command('companion', LOC, 'up').done).payload.status, 'completed');
        await rr.until(() => !(rr.get(LOC)?.value as { pressed: boolean }).pressed, 'released');
        companion.setButton(2, 1, 3, { text: 'REC 2', color: 0xff0000 });
        await rr.until(() => (rr.get(LOC)?.value as { text: string }).text === 'REC 2', 'redrawn');
        const w2 = await buttonReader(rr.bridge.clientUrl, ['companion.page.**'], {
          offset: position,
          epoch: j0.epoch,
        });
        readers.push(w2);
        const done = w2.complete();
        assert.ok(
          (done?.payload?.['data'] as { replayed?: number }).replayed !== undefined,
          'resumed, not a snapshot',
        );
        const states = w2.msgs.filter((m) => m.type === 'state');
        assert.ok(states.length >= 1 && states.every((m) => m.path === LOC), 'only the changed location');
        assert.equal((states.at(-1)?.payload?.['value'] as { text: string }).text, 'REC 2');
        assert.deepEqual(
          companion.presses.map((p) => [p.controlId, p.pressed]),
          [
            ['bank:2/1/3', true],
            ['bank:2/1/3', false],
          ],
        );

        // watch / unwatch against Companion's ADD-SUB / REMOVE-SUB.
        companion.setButton(3, 0, 0, { text: 'AUX', color: 0x0000ff });
        assert.equal(
          (await client.command('companion', 'companion.page.3.row.0.column.0', 'watch').done).payload.status,
          'completed',
        );
        await rr.until(
          () =>
            (rr.get('companion.page.3.row.0.column.0')?.value as { text?: string } | undefined)?.text ===
            'AUX',
          'watched',
        );
        assert.equal(
          (await client.command('companion', 'companion.page.3.row.0.column.0', 'unwatch').done).payload
            .status,
          'completed',
        );
        assert.ok(companion.sent.some((l) => l.startsWith('REMOVE-SUB OK')));
        assert.equal(rr.get('companion.page.3.row.0.column.0'), undefined);
      }

      // Companion's code accepted every line the bridge sent, on the one connection the test opened.
      assert.deepEqual(
        companion.sent.filter((l) => /\bERROR\b/.test(l)),
        [],
        'no ERROR from Companion',
      );
      assert.equal(companion.sent.filter((l) => l.startsWith('BEGIN')).length, 1, 'one connection');
      assert.equal(companion.lines.filter((l) => l.startsWith('ADD-DEVICE')).length, 1);
    } finally {
      for (const x of readers) x.close();
      await r?.close();
      await companion.close();
    }
  });
}

// Companion closes every Satellite connection when the user toggles "Enable Button Subscriptions API"
// (updateUserConfig in SatelliteApi.ts, 1.10 and later), so clients reconnect and read CAPS again.
for (const version of ['1.10', '1.14'] as const) {
  test(`Companion's SatelliteApi (${version}): the subscriptions setting toggled on, then off`, async () => {
    const companion = await startCompanion({ subscriptions: false, version });
    companion.setButton(2, 1, 3, { text: 'REC', color: 0x00ff00 });
    let r: Rig | undefined;
    try {
      r = await rig({
        sim: {},
        transport: 'tcp',
        port: companion.port,
        companion: { locations: ['2/1/3'] },
      });
      const rr = r;
      const sub = (): { status: string; reason?: string } | undefined =>
        (rr.get('companion.subscriptions')?.value as Record<string, { status: string; reason?: string }>)[
          '2/1/3'
        ];
      await rr.until(() => sub()?.status === 'unavailable', 'unavailable with the setting off');

      companion.setSubscriptions(true);
      await rr.until(() => sub()?.status === 'live', 'live after Companion dropped the link and CAPS said 1');
      assert.equal((rr.get(LOC)?.value as { text: string }).text, 'REC');
      assert.equal(rr.get(LOC)?.stale, false);
      assert.equal(companion.sent.filter((l) => l.startsWith('BEGIN')).length, 2, 'reconnected once');

      companion.setSubscriptions(false);
      await rr.until(() => sub()?.status === 'unavailable', 'unavailable again');
      assert.match(sub()?.reason ?? '', /SUBSCRIPTIONS=0/);
      await rr.until(() => stateOf(rr) === 'connected', 'registered again');
      // Companion no longer sends this location: the bridge keeps its last value, marked stale, never fresh.
      const loc = rr.get(LOC);
      assert.ok(loc?.stale === true, JSON.stringify(loc));
      assert.equal(
        (loc.value as { text: string }).text,
        'REC',
        'the last value Companion drew, kept as stale',
      );
      assert.equal(companion.sent.filter((l) => l.startsWith('BEGIN')).length, 3);
      assert.deepEqual(
        companion.sent.filter((l) => /\bERROR\b/.test(l)),
        [],
      );
      assert.equal(companion.lines.filter((l) => l.startsWith('ADD-SUB')).length, 1, 'only while on');
    } finally {
      await r?.close();
      await companion.close();
    }
  });
}
