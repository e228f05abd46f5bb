/**
 * The Companion simulator's wire fidelity, with raw sockets: exact reply strings and quirks as Companion
 * writes them (SatelliteApi.ts and its test suite at bitfocus/companion main after v5.0.3; Satellite.js at
 * v3.4.0 for ApiVersion 1.7.0), and the idle timeout on TCP and WebSocket.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import WebSocket from 'ws';
import { LineSplitter } from '@broadcast-ops/telemetry-bridge/protocol';
import { loadFactor } from '@broadcast-ops/core/testing';
import { CompanionSimulator } from '../../src/companion/companion-sim.ts';

interface Raw {
  lines: string[];
  send(text: string): void;
  next(n?: number): Promise<string[]>;
  closed: Promise<void>;
  close(): void;
}

function tcp(port: number): Raw {
  const s = connect({ host: '127.0.0.1', port });
  return wrap(
    (t) => s.write(t),
    () => s.destroy(),
    (on) => s.on('data', (d) => on(d.toString('utf8'))),
    new Promise((r) => s.on('close', () => r())),
  );
}

function ws(port: number): Raw {
  const w = new WebSocket(`ws://127.0.0.1:${port}/`);
  const queue: string[] = [];
  w.on('open', () => {
    for (const t of queue.splice(0)) w.send(t);
  });
  return wrap(
    (t) => (w.readyState === WebSocket.OPEN ? w.send(t) : queue.push(t)),
    () => w.terminate(),
    (on) => w.on('message', (d: Buffer) => on(d.toString('utf8'))),
    new Promise((r) => w.on('close', () => r())),
  );
}

function wrap(
  send: (t: string) => unknown,
  close: () => void,
  onData: (f: (t: string) => void) => void,
  closed: Promise<void>,
): Raw {
  const lines: string[] = [];
  const sp = new LineSplitter();
  let read = 0;
  onData((t) => lines.push(...sp.push(t)));
  return {
    lines,
    send: (t) => void send(t),
    close,
    closed,
    async next(n = 1) {
      const end = Date.now() + 5000;
      while (lines.length < read + n) {
        if (Date.now() > end) throw new Error(`expected ${n} more lines after ${JSON.stringify(lines)}`);
        await new Promise((r) => setTimeout(r, 5));
      }
      const out = lines.slice(read, read + n);
      read += n;
      return out;
    },
  };
}

test('newest ApiVersion: exact handshake, replies and quirks', async () => {
  const sim = new CompanionSimulator({ companionVersion: '5.1.0' });
  const { tcp: port } = await sim.listen({ ws: null });
  const a = tcp(port ?? 0);
  const b = tcp(port ?? 0);
  try {
    assert.deepEqual(await a.next(2), [
      'BEGIN CompanionVersion="5.1.0" ApiVersion="1.14.0" ',
      'CAPS SUBSCRIPTIONS=0 NONSQUARE=1 BITMAP_FORMATS="rgb,png" ROTARY_AMOUNT=1 ',
    ]);
    await b.next(2);
    a.send('PING\nping abc\n');
    assert.deepEqual(await a.next(2), ['PONG  ', 'PONG abc ']);
    a.send('FOOBAR x=1\n');
    assert.deepEqual(await a.next(), ['ERROR MESSAGE="Unknown command: FOOBAR" ']);
    a.send('ADD-DEVICE PRODUCT_NAME="x"\nADD-DEVICE DEVICEID="emulator:1" PRODUCT_NAME="x"\n');
    assert.deepEqual(await a.next(2), [
      'ADD-DEVICE ERROR MESSAGE="Missing DEVICEID" ',
      'ADD-DEVICE ERROR DEVICEID="emulator:1" MESSAGE="Reserved DEVICEID" ',
    ]);
    a.send(
      'ADD-DEVICE DEVICEID="d1" PRODUCT_NAME="P" KEYS_TOTAL=2 KEYS_PER_ROW=2 VARIABLES="W3siaWQiOiJpbiIsInR5cGUiOiJpbnB1dCIsIm5hbWUiOiJJbiJ9XQ=="\n',
    );
    assert.deepEqual(await a.next(4), [
      'ADD-DEVICE OK DEVICEID="d1" ',
      'BRIGHTNESS DEVICEID="d1" VALUE=100 ',
      'KEY-STATE DEVICEID="d1" KEY=0 LOCATION="1/0/0" PRESSED=0 TYPE="BUTTON" ',
      'KEY-STATE DEVICEID="d1" KEY=1 LOCATION="1/0/1" PRESSED=0 TYPE="BUTTON" ',
    ]);
    // The same id from another socket: the error goes to the owner, the newcomer hears nothing.
    b.send('ADD-DEVICE DEVICEID="d1" PRODUCT_NAME="P"\nPING 1\n');
    assert.deepEqual(await a.next(), ['ADD-DEVICE ERROR DEVICEID="d1" MESSAGE="Device exists elsewhere" ']);
    assert.deepEqual(await b.next(), ['PONG 1 ']);
    a.send('ADD-DEVICE DEVICEID="d1" PRODUCT_NAME="P"\n');
    assert.deepEqual(await a.next(), ['ADD-DEVICE ERROR DEVICEID="d1" MESSAGE="Device already added" ']);
    a.send('KEY-PRESS DEVICEID="d1" KEY=5 PRESSED=1\nKEY-PRESS DEVICEID="d1" KEY=0/1 PRESSED=true\n');
    assert.deepEqual(await a.next(3), [
      'KEY-PRESS ERROR DEVICEID="d1" MESSAGE="Invalid KEY" ',
      'KEY-PRESS OK DEVICEID="d1" ',
      'KEY-STATE DEVICEID="d1" KEY=1 LOCATION="1/0/1" PRESSED=1 TYPE="BUTTON" ',
    ]);
    a.send(
      'SET-VARIABLE-VALUE DEVICEID="d1" VARIABLE="nope" VALUE="eA=="\nSET-VARIABLE-VALUE DEVICEID="d1" VARIABLE="in" VALUE="aMOpbGxv"\n',
    );
    assert.deepEqual(await a.next(2), [
      'SET-VARIABLE-VALUE OK DEVICEID="d1" VARIABLE="nope" ',
      'SET-VARIABLE-VALUE OK DEVICEID="d1" VARIABLE="in" ',
    ]);
    assert.equal(sim.inputValues.get('in'), 'héllo');
    assert.equal(sim.inputValues.has('nope'), false);
    a.send(
      'CHANGE-PAGE DEVICEID="d1" DIRECTION=1\nADD-SUB SUBID=s1 LOCATION=1/0/0\nKEY-PRESS DEVICEID="zz" KEY=0 PRESSED=1\n',
    );
    assert.deepEqual(await a.next(3), [
      'CHANGE-PAGE OK DEVICEID="d1" ',
      'ADD-SUB ERROR MESSAGE="Subscriptions not enabled" ',
      'KEY-PRESS ERROR DEVICEID="zz" MESSAGE="Device not found" ',
    ]);
    a.send('QUIT\n');
    await a.closed;
    await sim.waitFor(() => sim.devices.length === 0, 2000, 'devices removed on close');
  } finally {
    a.close();
    b.close();
    await sim.close();
  }
});

test('ApiVersion 1.7.0 (Companion 3.4): hand-written lines, bare OKs, newer commands unknown', async () => {
  const sim = new CompanionSimulator({ apiVersion: '1.7.0', companionVersion: '3.4.0' });
  const { ws: port } = await sim.listen({ tcp: null });
  const a = ws(port ?? 0);
  try {
    assert.deepEqual(await a.next(), ['BEGIN CompanionVersion=3.4.0 ApiVersion=1.7.0']);
    a.send('ADD-DEVICE DEVICEID="d" PRODUCT_NAME="P" KEYS_TOTAL=1 COLORS=hex TEXT=1\n');
    sim.setButton(1, 0, 0, { text: 'A', color: '#ff0000' });
    assert.deepEqual(await a.next(3), [
      'ADD-DEVICE OK DEVICEID="d"',
      'BRIGHTNESS DEVICEID=d VALUE=100',
      'KEY-STATE DEVICEID=d KEY=0 TYPE=BUTTON  COLOR=#ff0000 TEXTCOLOR=#000000 TEXT=QQ== PRESSED=false',
    ]);
    a.send('KEY-PRESS DEVICEID="d" KEY=0 PRESSED=1\nADD-SUB SUBID=x LOCATION=1/0/0\nKEY-PRESS KEY=0\n');
    assert.deepEqual(await a.next(4), [
      'KEY-PRESS OK',
      'ERROR MESSAGE="Unknown command: ADD-SUB"',
      'KEY-PRESS ERROR MESSAGE="Missing DEVICEID"',
      // the redraw of the pushed button comes after the synchronous replies
      'KEY-STATE DEVICEID=d KEY=0 TYPE=BUTTON  COLOR=#ff0000 TEXTCOLOR=#000000 TEXT=QQ== PRESSED=true',
    ]);
  } finally {
    a.close();
    await sim.close();
  }
});

test('idle timeout: a silent client is dropped on TCP and WebSocket, a pinging one stays', async () => {
  // Timings stretched by the load factor: on a loaded machine a 50 ms ping can wait longer than a 200 ms idle
  // timeout, and the pinging client would be dropped for the machine's delay, not its silence.
  const f = loadFactor();
  const sim = new CompanionSimulator({ idleTimeoutMs: 200 * f });
  const ports = await sim.listen();
  const silentTcp = tcp(ports.tcp ?? 0);
  const silentWs = ws(ports.ws ?? 0);
  const busy = tcp(ports.tcp ?? 0);
  const timer = setInterval(() => busy.send('PING\n'), 50);
  try {
    const t0 = Date.now();
    await Promise.all([silentTcp.closed, silentWs.closed]);
    const waited = Date.now() - t0;
    assert.ok(waited >= 150 * f, `dropped after ${waited} ms`);
    assert.ok(busy.lines.length > 2);
    await new Promise((r) => setTimeout(r, 150 * f));
    const before = busy.lines.length;
    await new Promise((r) => setTimeout(r, 120 * f));
    assert.ok(busy.lines.length > before, 'the pinging client is still answered');
  } finally {
    clearInterval(timer);
    busy.close();
    await sim.close();
  }
});

test('a line over the bound: ERROR ERROR MESSAGE="Line too long", then the socket is destroyed', async () => {
  const sim = new CompanionSimulator({ maxLineLength: 1024 });
  const { tcp: port } = await sim.listen({ ws: null });
  const a = tcp(port ?? 0);
  try {
    await a.next(2);
    a.send('x'.repeat(2000));
    assert.deepEqual(await a.next(), ['ERROR ERROR MESSAGE="Line too long" ']);
    await a.closed;
  } finally {
    a.close();
    await sim.close();
  }
});
