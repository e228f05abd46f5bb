/**
 * Interop: the bridge against Companion's own Satellite server code (SatelliteApi.ts at API 1.14.0, vendored
 * unmodified under test/fixtures/companion-satellite/, PROVENANCE.md), run in this process behind a TCP server
 * wired as Companion's SatelliteTcp.ts. One table: Companion's "Enable Button Subscriptions API" on (the
 * bridge asking png, and asking rgb) and off. Checked: the handshake as Companion sends it (BEGIN, CAPS with
 * BITMAP_FORMATS) read into capabilities; the configured location subscribed with ADD-SUB and drawn by
 * Companion's SUB-STATE in the agreed format; a press on it reaches Companion's pressControl once down and
 * once up, changes the JSON state, and the WebSocket diff carries the same next seq; a reader resuming from
 * its seq gets only what it missed; `unwatch` is Companion's REMOVE-SUB OK; with subscriptions off the
 * location is `unavailable` with the reason and `watch` is refused before anything is sent.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { DEVICE, rig, stateOf, type Rig } from './harness.ts';
import { buttonReader } from './button-reader.ts';

interface CompanionServer {
  port: number;
  lines: string[];
  presses: { controlId: string; pressed: boolean; surfaceId: string }[];
  setButton(page: number, row: number, column: number, s: { text?: string; color?: number }): void;
  close(): Promise<void>;
}

// Imported by path at run time: the vendored code is kept as published, outside the repository's type check.
const HARNESS = fileURLToPath(new URL('../fixtures/companion-satellite/harness.ts', import.meta.url));
const startCompanion = async (o: { subscriptions: boolean }): Promise<CompanionServer> => {
  const m = (await import(HARNESS)) as {
    startCompanion(o: { subscriptions: boolean }): Promise<CompanionServer>;
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

const CASES = [
  { name: 'subscriptions on, png asked', subscriptions: true, prefer: 'png', format: 'png' },
  { name: 'subscriptions on, rgb asked', subscriptions: true, prefer: 'rgb', format: 'rgb' },
  { name: 'subscriptions off', subscriptions: false, prefer: 'png', format: 'png' },
] as const;

for (const c of CASES) {
  test(`Companion's SatelliteApi.ts (1.14.0), ${c.name}`, async (t) => {
    const companion = await startCompanion({ subscriptions: c.subscriptions });
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
          },
        },
      });
      const rr = r;
      await rr.until(() => stateOf(rr) === 'connected', 'registered on Companion');
      assert.match(
        companion.lines.find((l) => l.startsWith('ADD-DEVICE')) ?? '',
        new RegExp(`BITMAP_FORMAT="${c.format}"`),
      );
      const caps = rr.get('companion.capabilities')?.value as {
        apiVersion: string;
        companionVersion: string;
        caps: Record<string, unknown>;
        features: Record<string, unknown>;
        bitmapFormat: string;
      };
      assert.equal(caps.apiVersion, '1.14.0');
      assert.equal(caps.companionVersion, 'satelliteapi-interop');
      assert.equal(caps.caps['BITMAP_FORMATS'], 'rgb,png,webp');
      assert.equal(caps.features['subscriptions'], c.subscriptions);
      assert.equal(caps.bitmapFormat, c.format);
      const subs = (): Record<string, { status: string; reason?: string }> =>
        rr.get('companion.subscriptions')?.value as Record<string, { status: string; reason?: string }>;
      const client = await rr.client('interop');

      if (!c.subscriptions) {
        await rr.until(() => subs()['2/1/3']?.status === 'unavailable', 'unavailable');
        assert.match(subs()['2/1/3']?.reason ?? '', /SUBSCRIPTIONS=0/);
        const w = await client.command('companion', LOC, 'watch').done;
        assert.equal(w.payload.status, 'rejected');
        assert.equal(companion.lines.filter((l) => l.startsWith('ADD-SUB')).length, 0, 'nothing sent');
        return;
      }
      await rr.until(() => subs()['2/1/3']?.status === 'live', 'location live');
      const add = companion.lines.find((l) => l.startsWith('ADD-SUB')) ?? '';
      assert.match(add, /LOCATION="2\/1\/3"/);
      assert.match(add, /BITMAP=8/);
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
      // Companion's SUB-STATE draws 72 px when asked below 5 px; at 8 px: 8 × 8 × 3 raw bytes.
      else assert.equal(Buffer.from(loc.image, 'base64').length, 8 * 8 * 3);

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
          (rr.get('companion.page.3.row.0.column.0')?.value as { text?: string } | undefined)?.text === 'AUX',
        'watched',
      );
      assert.equal(
        (await client.command('companion', 'companion.page.3.row.0.column.0', 'unwatch').done).payload.status,
        'completed',
      );
      assert.ok(companion.lines.some((l) => l.startsWith('REMOVE-SUB')));
      assert.equal(rr.get('companion.page.3.row.0.column.0'), undefined);
    } finally {
      for (const x of readers) x.close();
      await r?.close();
      await companion.close();
    }
  });
}
