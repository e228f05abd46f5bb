import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { repoRoot, requireTool, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { SECRET } from '../helpers.ts';
import { IP_B, createNamespaces, inNamespace, sh, type Group } from '../netns.ts';
import type { Msg } from '../ws-helpers.ts';

/**
 * Presence with a half-open peer (README "Presence", "Liveness"): the broker, an admin observer and peer A
 * run in namespace B; peer B runs in namespace A (test/netns.ts). After the match B sends `health`; then
 * namespace A's end of the veth goes down, so B's TCP connection stays open on both sides but nothing
 * passes (no FIN, no RST). Within 35 s the observer and A receive `presence` (B absent) and a `session`
 * with one present peer, and the view no longer shows B's health.
 */
const execAsync = promisify(execFile);
const PORT = 8788;
const BROKER = `http://${IP_B}:${PORT}`;

test('presence: a half-open peer in another namespace is reported absent within 35 s', async () => {
  for (const tool of ['ip', 'curl']) requireTool(tool);
  const tmp = tempDir('punch-halfopen-');
  const ns = createNamespaces('h');
  const groups: Group[] = [];
  const run = (where: string, cmd: string): Group => {
    const g = inNamespace(where, cmd, tmp.path);
    groups.push(g);
    return g;
  };
  const rest = async (method: string, path: string, token?: string, body?: unknown) => {
    const args = ['netns', 'exec', ns.b, 'curl', '-s', '-X', method];
    if (token) args.push('-H', `authorization: Bearer ${token}`);
    if (body !== undefined) args.push('-H', 'content-type: application/json', '-d', JSON.stringify(body));
    const { stdout } = await execAsync('ip', [...args, BROKER + path]);
    return JSON.parse(stdout) as Msg;
  };
  try {
    const broker = run(
      ns.b,
      `PUNCH_SECRET=${SECRET} PUNCH_HOST=0.0.0.0 PUNCH_PORT=${PORT} PUNCH_DB=${join(tmp.path, 'p.db')} ` +
        `LOG_LEVEL=info exec ${process.execPath} ${join(repoRoot, 'packages/punch/bin/punch.mjs')} serve`,
    );
    await waitFor(() => /punch broker listening/.test(broker.output()), {
      timeoutMs: 30_000,
      what: 'broker',
    });
    const created = await rest('POST', '/api/session', undefined, { name: 'ho' });
    const admin = created['token'] as string;
    const tok = async (label: string) =>
      (await rest('POST', '/api/session/ho/token', admin, { label }))['token'] as string;
    const [ta, tb] = [await tok('A'), await tok('B')];
    const fixture = (f: string) => join(repoRoot, 'packages/punch/test/fixtures', f);
    // Observer and A reach the broker over namespace B's loopback: only B's path crosses the veth.
    const local = `http://127.0.0.1:${PORT}`;
    const observer = run(ns.b, `exec ${process.execPath} ${fixture('ws-observer.mjs')} ${local} ho ${admin}`);
    const a = run(ns.b, `exec ${process.execPath} ${fixture('ws-peer.mjs')} ${local} ho ${ta} 9000 A`);
    await waitFor(() => /"peers":1/.test(observer.output()), { timeoutMs: 15_000, what: 'A registered' });
    const health = JSON.stringify({ type: 'health', rtt: 12, retransmit: 0.1, bitrate: 3e6 });
    const b = run(
      ns.a,
      `exec ${process.execPath} ${fixture('ws-peer.mjs')} ${BROKER} ho ${tb} 9000 B '${health}'`,
    );
    await waitFor(() => /"type":"peer"/.test(a.output()) && /"type":"peer"/.test(b.output()), {
      timeoutMs: 15_000,
      what: 'the match',
    });
    await waitFor(
      async () => (await rest('GET', '/api/session/ho', admin))['streams']?.['default']?.['health'] !== null,
      {
        timeoutMs: 15_000,
        what: "B's health in the view",
      },
    );

    // Half-open: namespace A's link goes down; B's socket stays open, nothing passes.
    sh('ip', ['-n', ns.a, 'link', 'set', ns.vethA, 'down']);
    const cut = Date.now();
    const absent = /"type":"presence","stream":"default","slot":"b","present":false/;
    await waitFor(() => absent.test(observer.output()) && absent.test(a.output()), {
      timeoutMs: 35_000,
      intervalMs: 200,
      what: () => `B's absence at the observer and A\n${observer.output()}\n${a.output()}`,
    });
    const after = Date.now() - cut;
    assert.ok(after <= 35_000, `reported after ${after} ms`);
    for (const out of [observer.output(), a.output()]) {
      const tail = out.slice(out.search(absent));
      assert.match(
        tail,
        /"type":"session","state":"WAITING","streams":\{"default":\{"state":"waiting","peers":1\}\}/,
      );
    }
    const view = await rest('GET', '/api/session/ho', admin);
    const stream = view['streams']['default'];
    assert.equal(stream.health, null, "B's health is no longer shown");
    assert.equal(stream.peer_b.present, false);
    assert.equal(view['state'], 'WAITING');
  } finally {
    for (const g of groups) g.signal('SIGKILL');
    ns.remove();
    tmp.remove();
  }
});
