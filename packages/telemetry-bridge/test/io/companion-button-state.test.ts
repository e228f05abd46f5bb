/**
 * The button-state JSON API (docs/console.md "Button state API") against the real adapter and the Companion
 * simulator: every surface key with its text, colours, pressed and a bitmap hash, with the hub's offset as
 * `seq`; a redraw in Companion changes the JSON and raises `seq`; a reader passing back `since` and `epoch`
 * gets only what changed; another epoch gets everything; bad input is a 400.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEVICE, rig } from '../companion/harness.ts';

interface Buttons {
  epoch: string;
  seq: number;
  full: boolean;
  buttons: {
    path: string;
    text?: string;
    colour?: string;
    pressed?: boolean;
    imageHash?: string;
    seq: number;
  }[];
}

test('button state as JSON: full list, a redraw raises seq, since returns only what changed', async () => {
  const r = await rig({
    companion: {
      device: { deviceId: DEVICE, productName: 'Buttons', keysTotal: 8, keysPerRow: 4, bitmaps: 72 },
    },
  });
  try {
    const url = `${r.bridge.consoleUrl as string}api/buttons`;
    const get = async (q = ''): Promise<Buttons> => {
      const res = await fetch(url + q);
      assert.equal(res.status, 200);
      return (await res.json()) as Buttons;
    };
    r.sim.setButton(1, 0, 1, { text: 'CAM 2', color: '#006000' });
    let first: Buttons | undefined;
    for (let i = 0; i < 200; i++) {
      first = await get();
      if (first.buttons.length === 8 && first.buttons.some((b) => b.text === 'CAM 2')) break;
      await new Promise((res) => setTimeout(res, 25));
    }
    assert.ok(first);
    assert.equal(first.full, true);
    assert.equal(first.buttons.length, 8);
    const cam2 = first.buttons.find((b) => b.text === 'CAM 2');
    assert.ok(cam2, JSON.stringify(first.buttons[1]));
    assert.equal(cam2.colour, '#006000');
    assert.equal(cam2.pressed, false);
    assert.match(cam2.imageHash ?? '', /^[0-9a-f]{16}$/);
    assert.ok(
      first.buttons.every((b) => !('image' in b)),
      'bitmaps are hashed, not sent',
    );

    r.sim.setButton(1, 0, 2, { text: 'LIVE', color: '#0050ff' });
    let next: Buttons | undefined;
    for (let i = 0; i < 200; i++) {
      next = await get(`?since=${first.seq}&epoch=${first.epoch}`);
      if (next.buttons.some((b) => b.text === 'LIVE')) break;
      await new Promise((res) => setTimeout(res, 25));
    }
    assert.ok(next);
    assert.equal(next.full, false);
    assert.ok(next.seq > first.seq, 'seq moved on');
    assert.deepEqual(
      next.buttons.map((b) => b.text),
      ['LIVE'],
      'only the redrawn button',
    );
    assert.ok((next.buttons[0]?.seq ?? 0) > first.seq);
    const other = await get(`?since=${first.seq}&epoch=another`);
    assert.equal(other.full, true);
    assert.equal(other.buttons.length, 8);
    assert.equal((await fetch(`${url}?since=-1`)).status, 400);
  } finally {
    await r.close();
  }
});
