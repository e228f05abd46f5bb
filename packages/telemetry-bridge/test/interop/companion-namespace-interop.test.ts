/**
 * Interop: exactly once by client identity, not by connection order (docs/protocol.md "Exactly once"),
 * against Companion's own Satellite server code: SatelliteApi.ts at API 1.14.0, vendored unmodified under
 * test/fixtures/companion-satellite/ (PROVENANCE.md), run in this test process behind a TCP server wired as
 * Companion's SatelliteTcp.ts, with button subscriptions on. Companion's server lives outside the bridge, so it
 * stays up while the bridge (bin/telemetry-bridge.mjs, its own process) is stopped with SIGTERM or SIGKILL and
 * started again on the same event log. Presses are counted on Companion's side: every SUB-PRESS that
 * SatelliteApi.ts accepts reaches the control's `pressControl` (the harness's stand-in records each down and
 * up), never the bridge's own bookkeeping.
 *
 * The review's run, with two kinds of client:
 * - raw WebSocket clients, as the review ran them (a handshake with a name only, so the key is the name's:
 *   docs/protocol.md "Exactly once", the last row of the scope table);
 * - `BridgeClient`, which sends the client id it keeps in `clientIdFile`.
 * Two panels share the app name `panel` (`app.panel`, `app.panel_2` by connection order); panel 2 presses
 * `companion.page.2.row.1.column.3` with key `take-42`; the bridge stops (SIGTERM or SIGKILL) and starts again,
 * the panels' programs restart too and panel 2 reconnects first, now holding `app.panel`; its retry (a new
 * command id) gets the recorded outcome addressed to it and Companion sees no second press. Another app
 * (`graphics`) reusing the key string runs its own press. Panel 1, now `app.panel_2`: with its own client id
 * (BridgeClient) its `take-42` is its own and runs; with no client id (raw) it shares the name's key and gets
 * panel 2's recorded outcome, as documented. Every client repeating its key once more: no new press.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { tempDir, waitFor } from '@broadcast-ops/core/testing';
import { BridgeClient } from '@broadcast-ops/bridge-client';
import { bridgeProcess, type BridgeProcess } from '../bridge-process.ts';

interface CompanionServer {
  port: number;
  presses: { controlId: string; pressed: boolean; surfaceId: string }[];
  readonly devices: string[];
  close(): Promise<void>;
}

// Imported by path at run time: the vendored code is kept as published, outside the repository's type check.
const HARNESS = fileURLToPath(new URL('../fixtures/companion-satellite/harness.ts', import.meta.url));
const startCompanion = async (): Promise<CompanionServer> => {
  const m = (await import(HARNESS)) as {
    startCompanion(o: { subscriptions: boolean }): Promise<CompanionServer>;
  };
  return m.startCompanion({ subscriptions: true });
};

const DEVICE = 'tb-ns-interop-01';
const LOC = 'companion.page.2.row.1.column.3';
const CONTROL = 'bank:2/1/3';
const KEY = 'take-42';

interface Final {
  status: string;
  commandId: string;
  originalCommandId?: string;
}

/** One panel program: its namespace, and a press of LOC with KEY whose final ack it returns. */
interface Panel {
  namespace: string;
  press(): Promise<{ id: string; final: Final; statuses: string[] }>;
  close(): Promise<void>;
}

type Open = (url: string, dir: string, which: string, name: string) => Promise<Panel>;

/** A raw WebSocket client as the review ran it: handshake with a name, a new command id for every send. */
const rawPanel: Open = async (url, _dir, _which, name) => {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  const msgs: { type: string; namespace?: string; payload?: Record<string, unknown> }[] = [];
  ws.on('message', (d: Buffer) => msgs.push(JSON.parse(d.toString('utf8')) as (typeof msgs)[number]));
  await new Promise<void>((res, rej) => {
    ws.once('open', () => res());
    ws.once('error', rej);
  });
  ws.send(JSON.stringify({ type: 'handshake', name, version: '1' }));
  const hs = await waitFor(() => msgs.find((m) => m.type === 'handshake_response'), { what: 'handshake' });
  let n = 0;
  return {
    namespace: hs.namespace ?? '',
    press: async () => {
      const id = `raw-${name}-${process.pid}-${Date.now()}-${++n}`;
      ws.send(
        JSON.stringify({
          id,
          type: 'command',
          target: 'companion',
          path: LOC,
          payload: { action: 'press' },
          idempotencyKey: KEY,
          timestamp: Date.now(),
        }),
      );
      const acks = (): Final[] =>
        msgs
          .filter((m) => m.type === 'ack' && m.payload?.['commandId'] === id)
          .map((m) => m.payload as unknown as Final);
      const final = await waitFor(() => acks().find((a) => a.status !== 'received'), {
        timeoutMs: 10_000,
        what: `final ack of ${id}`,
      });
      return { id, final, statuses: acks().map((a) => a.status) };
    },
    close: () =>
      new Promise<void>((res) => {
        if (ws.readyState === WebSocket.CLOSED) return res();
        const t = setTimeout(() => ws.terminate(), 1000);
        ws.once('close', () => {
          clearTimeout(t);
          res();
        });
        ws.close(1000, 'bye');
      }),
  };
};

/** The project's client library, its client id kept in a file per panel program. */
const libraryPanel: Open = async (url, dir, which, name) => {
  const c = new BridgeClient({
    url,
    name,
    clientIdFile: join(dir, `${which}.id`),
    reconnect: { enabled: false },
  });
  await c.connect();
  return {
    namespace: c.namespace ?? '',
    press: async () => {
      const h = c.command('companion', LOC, 'press', undefined, { idempotencyKey: KEY });
      const final = (await h.done).payload as unknown as Final;
      return { id: h.id, final, statuses: h.acks.map((a) => a.payload.status) };
    },
    close: () => c.close(),
  };
};

const KINDS = [
  { kind: 'raw WebSocket clients (no client id)', open: rawPanel, ownKeys: false },
  { kind: 'BridgeClient (client id in a file)', open: libraryPanel, ownKeys: true },
] as const;

for (const { kind, open, ownKeys } of KINDS) {
  for (const how of ['SIGTERM', 'SIGKILL'] as const) {
    test(`Companion's SatelliteApi.ts: one press per identity and key across a ${how} restart, ${kind}`, async (t) => {
      const dir = tempDir('tb-ns-interop-');
      const companion = await startCompanion();
      let proc: BridgeProcess | undefined;
      const panels: Panel[] = [];
      try {
        const bp = (proc = await bridgeProcess(dir.path, companion, companion.port, DEVICE, {
          // Companion runs in this test's own process, beside the panels' clients: on a loaded machine its
          // answers to the heartbeat wait behind them, and 400 ms of silence (twice the default 200 ms PING)
          // makes the bridge refuse a press as suspect. This test is about one press per identity and key;
          // the suspicion rule has its own test with Companion in a process of its own
          // (test/io/companion-hung-host.test.ts), so here a link is suspect after 2 s and dead after 4 s.
          companion: { transport: 'tcp', heartbeatInterval: 1000, deadAfter: 4000 },
        }));
        const downs = (): number =>
          companion.presses.filter((p) => p.controlId === CONTROL && p.pressed).length;
        const ups = (): number =>
          companion.presses.filter((p) => p.controlId === CONTROL && !p.pressed).length;
        const panel = async (which: string, name = 'panel'): Promise<Panel> => {
          const p = await open(bp.url, dir.path, which, name);
          panels.push(p);
          return p;
        };
        // A wrongly executed retry would reach Companion within this; only then are the counts read.
        const settle = (): Promise<void> => new Promise((r) => setTimeout(r, 500));

        const first = await bp.start();
        const p1 = await panel('one');
        const p2 = await panel('two');
        assert.equal(p1.namespace, 'app.panel');
        assert.equal(p2.namespace, 'app.panel_2');
        const r1 = await p2.press();
        assert.equal(r1.final.status, 'completed', JSON.stringify(r1.final));
        await waitFor(() => ups() === 1 || undefined, { timeoutMs: 5000, what: 'down and up on Companion' });
        assert.equal(downs(), 1);

        await first.stop(how);
        for (const p of panels.splice(0)) await p.close().catch(() => undefined);
        await waitFor(() => !companion.devices.includes(DEVICE) || undefined, {
          timeoutMs: 10_000,
          what: 'Companion dropped the stopped surface',
        });
        await bp.start();
        // The panels' programs restart too: panel 2 is first back and takes the bare name.
        const p2b = await panel('two');
        assert.equal(p2b.namespace, 'app.panel');
        const r2 = await p2b.press();
        assert.notEqual(r2.id, r1.id, 'a new program: a new command id for the same key');
        assert.equal(r2.final.status, 'completed', 'the recorded outcome');
        assert.equal(r2.final.commandId, r2.id, 'addressed to the retry');
        assert.equal(r2.final.originalCommandId, r1.id);
        assert.deepEqual(r2.statuses, ['received', 'completed']);
        await settle();
        assert.equal(downs(), 1, `exactly one press on Companion for panel 2's ${KEY}`);

        // Another app reusing the key string runs its own press.
        const other = await panel('other', 'graphics');
        assert.equal(other.namespace, 'app.graphics');
        const r3 = await other.press();
        assert.equal(r3.final.status, 'completed');
        assert.equal(r3.final.originalCommandId, undefined, 'its own command, not a replay');
        await waitFor(() => downs() === 2 || undefined, { timeoutMs: 5000, what: "the other app's press" });

        // Panel 1, now app.panel_2.
        const p1b = await panel('one');
        assert.equal(p1b.namespace, 'app.panel_2');
        const r4 = await p1b.press();
        assert.equal(r4.final.status, 'completed');
        if (ownKeys) {
          assert.equal(r4.final.originalCommandId, undefined, 'its own client id: its own key');
          await waitFor(() => downs() === 3 || undefined, { timeoutMs: 5000, what: "panel 1's own press" });
        } else {
          assert.equal(r4.final.originalCommandId, r1.id, 'no client id: the name holds the key');
        }
        const expected = ownKeys ? 3 : 2;

        // Every client repeating its key once more gets its recorded outcome: no new press.
        for (const p of [p2b, other, p1b]) assert.equal((await p.press()).final.status, 'completed');
        await settle();
        assert.equal(downs(), expected, 'one press per identity and key, counted by Companion');
        assert.equal(ups(), expected, 'every press released');
        t.diagnostic(
          `${how}, ${kind}: ${companion.presses.length} pressControl calls on Companion (${downs()} down, ${ups()} up) for 7 presses sent`,
        );
      } finally {
        for (const p of panels) await p.close().catch(() => undefined);
        await proc?.killAll();
        await companion.close();
        dir.remove();
      }
    });
  }
}
