/**
 * docs/guides/two-encoders-through-punch.md, walked step by step on what a clone builds: the broker is
 * started with the guide's own command line (through sh, as typed), the session is created by running the
 * guide's curl block with the test's broker in place of `https://punch.example`, and the two sides register
 * over the WebSocket signalling with the peer tokens the guide's calls issue, from two public addresses
 * told to the broker through X-Forwarded-For (PUNCH_TRUST_PROXY, as behind the guide's reverse proxy).
 * The broker's port is ephemeral (PUNCH_PORT=0, read back from its start-up log line).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import WebSocket from 'ws';
import { repoRoot, requireTool, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { launchChromium, watchPage } from '@broadcast-ops/core/testing/browser';
import {
  endAll,
  ensureBuilt,
  getJson,
  inlineMatching,
  notInClone,
  logLine,
  readGuide,
  repoPaths,
  runCommand,
  startCommand,
  type Service,
} from '../guides/helpers.ts';

const guide = readGuide('two-encoders-through-punch.md');
const SHOTS = join(repoRoot, '.tmp/test-output/guides');

/** A page in Debian's chromium that records every console error, warning and CSP violation. */
async function openPage(browser: Browser, url: string, errors: string[]): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 390, height: 844 } });
  await watchPage(page, errors, { label: url, warnings: true });
  await page.goto(url);
  return page;
}

/** A signalling peer: a WebSocket to /api/ws/<session> with its token, every message it receives kept. */
interface Peer {
  ws: WebSocket;
  messages: { type: string; [k: string]: unknown }[];
  /** The next message of this type (after the last one returned) that passes `test`. */
  next: (
    type: string,
    test?: (m: { type: string; [k: string]: unknown }) => boolean,
  ) => Promise<{ type: string; [k: string]: unknown }>;
}

async function peer(url: string, token: string, forwardedFor: string): Promise<Peer> {
  const ws = new WebSocket(url, {
    headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': forwardedFor },
  });
  const messages: Peer['messages'] = [];
  ws.on('message', (d: Buffer) => messages.push(JSON.parse(d.toString()) as Peer['messages'][number]));
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  let seen = 0;
  return {
    ws,
    messages,
    next: (type, test = () => true) =>
      waitFor(
        () => {
          const i = messages.findIndex((m, k) => k >= seen && m.type === type && test(m));
          if (i < 0) return undefined;
          seen = i + 1;
          return messages[i];
        },
        { timeoutMs: 30_000, what: `a ${type} message` },
      ),
  };
}

test('guide "Two encoders through punch": every step walked against punch', async (t) => {
  await ensureBuilt();
  requireTool('openssl');
  requireTool('curl');
  const tmp = tempDir('guide-punch-');
  const services: Service[] = [];
  const peers: Peer[] = [];
  const pageErrors: string[] = [];
  let browser: Browser | undefined;
  let base = '';
  const session: { name: string; admin: string; streams: string[]; latency: number } = {
    name: '',
    admin: '',
    streams: [],
    latency: 0,
  };
  try {
    await t.test('the files the guide names are in a fresh clone (tracked by git)', () => {
      const paths = repoPaths(guide);
      assert.ok(paths.length > 0, 'the guide names files');
      assert.deepEqual(notInClone(paths), []);
    });

    await t.test(
      'step 1: the broker starts with the guide command line, behind a proxy base URL',
      async () => {
        const step = guide.step(1);
        const serve = inlineMatching(guide, step, /^PUNCH_SECRET=.* npx punch serve$/);
        for (const v of ['PUNCH_BASE_URL', 'PUNCH_TRUST_PROXY'])
          assert.ok(guide.inline(step).includes(v), `${v} named`);
        const readme = readFileSync(join(repoRoot, 'packages/punch/README.md'), 'utf8');
        for (const v of ['PUNCH_BASE_URL', 'PUNCH_TRUST_PROXY'])
          assert.match(readme, new RegExp(`\\| \`${v}\``));
        const broker = startCommand(['sh', '-c', serve], {
          PUNCH_HOST: '127.0.0.1',
          PUNCH_PORT: '0',
          PUNCH_DB: join(tmp.path, 'punch.db'),
          PUNCH_BASE_URL: 'https://punch.example',
          PUNCH_TRUST_PROXY: '1',
        });
        services.push(broker);
        base = String((await logLine(broker, /punch broker listening/))['url']);
        // The try-out: npm start runs punch on the port the guide names, with a demo secret (--demo).
        const [, port] =
          /`npm start` runs it on http:\/\/127\.0\.0\.1:(\d+)\/ with a demo secret/.exec(step) ?? [];
        const pkg = JSON.parse(readFileSync(join(repoRoot, 'packages/punch/package.json'), 'utf8')) as {
          toolkit: { start: { args: string[]; env: Record<string, string> } };
        };
        assert.equal(pkg.toolkit.start.env['PUNCH_PORT'], port);
        assert.ok(pkg.toolkit.start.args.includes('--demo'), 'npm start runs punch serve --demo');
        // Without the secret the broker refuses to start (what the command's first half is for).
        const refused = await runCommand(['npx', 'punch', 'serve'], {
          env: {
            PUNCH_SECRET: '',
            PUNCH_HOST: '127.0.0.1',
            PUNCH_PORT: '0',
            PUNCH_DB: join(tmp.path, 'x.db'),
          },
          timeoutMs: 60_000,
        });
        assert.notEqual(refused.code, 0, refused.stdout + refused.stderr);
        assert.match(refused.stdout + refused.stderr, /PUNCH_SECRET/);
      },
    );

    await t.test(
      'step 2: the curl block creates the session; the answer carries the admin token and the page',
      async () => {
        const step = guide.step(2);
        const block = guide.fenced(step).find((b) => b.lang === 'sh');
        assert.ok(block, 'step 2 has a sh block');
        assert.match(block.code, /https:\/\/punch\.example\//);
        const r = await runCommand(['sh', '-c', block.code.replaceAll('https://punch.example/', `${base}/`)]);
        assert.equal(r.code, 0, r.stderr);
        const body = JSON.parse(r.stdout) as {
          session: string;
          token: string;
          url: string;
          streams: string[];
          latency: number;
        };
        const sent = JSON.parse(/-d '([^']+)'/.exec(block.code)?.[1] ?? '{}') as {
          name: string;
          streams: string[];
          latency: number;
        };
        assert.equal(body.session, sent.name);
        assert.deepEqual(body.streams, sent.streams);
        assert.equal(body.latency, sent.latency);
        assert.match(body.token, /^p_/);
        const page = /the session page `…(\/s\/\S+)`/.exec(step)?.[1];
        assert.equal(page, `/s/${sent.name}`);
        assert.equal(body.url, `https://punch.example${page}`, 'PUNCH_BASE_URL is the origin of the links');
        Object.assign(session, {
          name: sent.name,
          admin: body.token,
          streams: sent.streams,
          latency: sent.latency,
        });
        // The token is given once: a second create of the name is refused, not answered with it again.
        const again = await runCommand([
          'sh',
          '-c',
          block.code.replaceAll('https://punch.example/', `${base}/`),
        ]);
        assert.doesNotMatch(again.stdout, /"token"/);
      },
    );

    const tokens: string[] = [];
    await t.test('step 3: a peer token per side; its link opens the join page and its QR', async () => {
      const step = guide.step(3);
      const call = inlineMatching(guide, step, /^POST \/api\/session\/\S+\/token$/);
      const path = call.slice(5).replace('venue1', session.name);
      for (const label of ['venue', 'studio']) {
        const r = await getJson(`${base}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${session.admin}`, 'content-type': 'application/json' },
          body: JSON.stringify({ label }),
        });
        assert.equal(r.status, 201, JSON.stringify(r.body));
        tokens.push((r.body as { token: string }).token);
      }
      // A peer token cannot issue tokens (the admin token is the credential for it).
      const denied = await getJson(`${base}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokens[0] ?? ''}` },
      });
      assert.equal(denied.status, 403);
      const link = inlineMatching(guide, step, /^…\/s\/[^/\s]+\?t=<peer token>$/);
      const url = `${base}${link.slice(1).replace('<peer token>', tokens[0] ?? '')}`;
      const res = await fetch(url);
      assert.equal(res.status, 200);
      const html = await res.text();
      assert.match(html, /<body data-role="peer">/, 'the peer join page');
      assert.match(step, /join page/);
      // The steps the page shows a peer (packages/punch/README.md "Pages"): the agent downloaded from this
      // broker, run with node and the link.
      assert.match(html, /node punch-agent\.mjs --link/);
      const qr = inlineMatching(guide, step, /^…\/s\/\S+\/qr\?t=<peer token>$/);
      const svg = await fetch(`${base}${qr.slice(1).replace('<peer token>', tokens[0] ?? '')}`);
      assert.equal(svg.status, 200);
      assert.match(svg.headers.get('content-type') ?? '', /^image\/svg\+xml/);
      assert.match(await svg.text(), /<svg/);
      // The link in a browser, as the side holding it sees it: the stream's state and the agent's steps.
      mkdirSync(SHOTS, { recursive: true });
      browser = await launchChromium();
      const joinPage = await openPage(browser, url, pageErrors);
      await joinPage.getByText('Join this stream').waitFor({ timeout: 30_000 });
      const shown = await joinPage.locator('main').innerText();
      assert.match(shown, /node punch-agent\.mjs --link '[^']+\?t=p_/);
      assert.match(shown, /^waiting$/im, 'the stream state');
      await joinPage.screenshot({ path: join(SHOTS, 'punch-join-page-phone.png'), fullPage: true });
      await joinPage.close();
      assert.deepEqual(pageErrors, []);
    });

    await t.test(
      'step 4: both sides register over the WebSocket signalling; the session is READY',
      async () => {
        const step = guide.step(4);
        const wsPath = inlineMatching(guide, step, /^\/api\/ws\/\S+$/).replace('venue1', session.name);
        const wsBase = base.replace(/^http/, 'ws');
        const state = /the session is (\w+)/.exec(step)?.[1];
        // Each side behind its own NAT: the proxy in front of the broker says which public address it saw.
        const a = await peer(`${wsBase}${wsPath}`, tokens[0] ?? '', '198.51.100.10');
        const b = await peer(`${wsBase}${wsPath}`, tokens[1] ?? '', '203.0.113.20');
        peers.push(a, b);
        a.ws.send(JSON.stringify({ type: 'register', port: 9000, role: 'sender' }));
        // Registered: a `session` with one peer on the stream (every connection first gets the state as it is).
        await a.next('session', (m) =>
          Object.values(m['streams'] as Record<string, { peers: number }>).some((st) => st.peers === 1),
        );
        b.ws.send(JSON.stringify({ type: 'register', port: 9000, role: 'receiver' }));
        const toA = (await a.next('peer')) as { ip?: string; port?: number };
        const toB = (await b.next('peer')) as { ip?: string; port?: number };
        assert.equal(toA.ip, '203.0.113.20', 'A learns the public address the broker saw for B');
        assert.equal(toB.ip, '198.51.100.10');
        const view = await getJson(`${base}/api/session/${session.name}`, {
          headers: { authorization: `Bearer ${session.admin}` },
        });
        assert.equal((view.body as { state: string }).state, state);
      },
    );

    await t.test(
      'step 5: the connect call gives every tool its string, with the passphrase and latency',
      async () => {
        const step = guide.step(5);
        const call = inlineMatching(guide, step, /^GET \/api\/session\/\S+\/connect\?/);
        const path = call.slice(4).replace('venue1', session.name);
        const [, stream] = /stream=([^&]+)/.exec(path) ?? [];
        assert.ok(session.streams.includes(stream ?? ''), 'the stream of the session created in step 2');
        const denied = await getJson(`${base}${path}`, {
          headers: { authorization: `Bearer ${tokens[0] ?? ''}` },
        });
        assert.equal(denied.status, 403, 'a peer token does not get the strings');
        const r = await getJson(`${base}${path}`, { headers: { authorization: `Bearer ${session.admin}` } });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        const body = r.body as {
          passphrase?: string;
          for_peer_a: Record<string, string>;
          for_peer_b: Record<string, string>;
        };
        // The tools the guide lists, by the format names of packages/punch/docs/connection-strings.md.
        const formats: Record<string, string> = {
          'srt-live-transmit': 'live-transmit',
          FFmpeg: 'transcoder',
          GStreamer: 'pipeline',
          OBS: 'studio-app',
          vMix: 'mixer',
        };
        for (const [tool, format] of Object.entries(formats)) {
          assert.match(step, new RegExp(`\\b${tool}\\b`), tool);
          assert.ok(body.for_peer_a[format] && body.for_peer_b[format], `${tool} (${format})`);
        }
        const uri = body.for_peer_a['live-transmit'] ?? '';
        assert.match(uri, /srt:\/\/203\.0\.113\.20:9000\?mode=rendezvous/);
        assert.match(uri, new RegExp(`latency=${session.latency}\\b`));
        const passphrase = /passphrase=([^&"]+)/.exec(uri)?.[1] ?? '';
        assert.ok(passphrase.length >= 10, 'SRT passphrases are 10-79 characters');
        assert.match(body.for_peer_b['mixer'] ?? '', new RegExp(`Passphrase: ${passphrase}`));
        assert.ok(
          existsSync(join(repoRoot, 'packages/punch/docs/connection-strings.md')),
          'connection-strings.md',
        );
        // "the console shows them too": the admin console, in the browser, once both sides are in.
        assert.ok(browser, 'the browser of step 3');
        // The admin token in the fragment, as the create page links it: it never reaches a server.
        const console_ = await openPage(browser, `${base}/s/${session.name}#t=${session.admin}`, pageErrors);
        const summary = console_.getByText('Connection strings for peer A');
        await summary.waitFor({ timeout: 30_000 });
        await summary.click(); // a closed <details>, opened as an operator opens it
        assert.match(await console_.locator('main').innerText(), new RegExp(`passphrase=${passphrase}`));
        await console_.screenshot({ path: join(SHOTS, 'punch-console-strings-phone.png'), fullPage: true });
        await console_.close();
        assert.deepEqual(pageErrors, []);
      },
    );

    await t.test(
      'step 6: a side reporting SRT up makes the session CONNECTED; its health shows',
      async () => {
        // The SRT link itself needs two hosts (both ends bind the stream's port): it is walked with live video
        // between two network namespaces by packages/punch/test/interop/interop-video.test.ts, which the guide names.
        // Here the two sides report what their tools see, as `punch agent` does, and the session page's data
        // (the session view its script renders) follows.
        const step = guide.step(6);
        const [a, b] = peers;
        assert.ok(a && b, 'the two peers of step 4');
        a.ws.send(JSON.stringify({ type: 'ready' }));
        b.ws.send(JSON.stringify({ type: 'ready' }));
        await a.next('start');
        a.ws.send(JSON.stringify({ type: 'status', srt: 'connected' }));
        b.ws.send(JSON.stringify({ type: 'health', rtt: 42, retransmit: 0.5, bitrate: 5_000_000 }));
        const state = /the state goes (\w+)/.exec(step)?.[1];
        const view = await waitFor(
          async () => {
            const v = (
              await getJson(`${base}/api/session/${session.name}`, {
                headers: { authorization: `Bearer ${session.admin}` },
              })
            ).body as { state: string; streams: Record<string, { health: { rtt: number } | null }> };
            return v.state === state && Object.values(v.streams)[0]?.health ? v : undefined;
          },
          { timeoutMs: 30_000, what: `session ${String(state)} with health` },
        );
        assert.equal(Object.values(view.streams)[0]?.health?.rtt, 42);
        assert.match(step, /"NAT caveat"/);
        assert.match(readFileSync(join(repoRoot, 'packages/punch/README.md'), 'utf8'), /^## NAT caveat$/m);
        const proof = /`(packages\/punch\/test\/[\w-]+\.test\.ts)`/.exec(guide.text)?.[1] ?? '';
        assert.ok(existsSync(join(repoRoot, proof)), proof);
      },
    );
  } finally {
    for (const p of peers) p.ws.close();
    await browser?.close();
    await endAll(services);
    tmp.remove();
  }
});
