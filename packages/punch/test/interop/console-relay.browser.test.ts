import { createSocket, type Socket } from 'node:dgram';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '@broadcast-ops/core/testing';
import { launchChromium, watchPage } from '@broadcast-ops/core/testing/browser';
import { srtAck, srtAckAck, srtData } from '../fixtures/srt-packets.ts';
import { LOOPBACK_RELAY, startTestServer } from '../helpers.ts';
import { connect, type WsClient } from '../ws-helpers.ts';

/**
 * The relay's figures on the operator console (docs/relay.md "What the operator sees"), in Debian's chromium:
 * a stream moved to the broker's own relay (two signalling peers from 127.0.0.1 and 127.0.0.2 that never
 * report `connected` until the relay is up), SRT headers sent through the relay's real ports (data packets
 * with a gap of two, a retransmission, ACK 1 with an RTT of 5 ms, ACKACK 1), and the peers' health reports:
 * the card shows the end-to-end RTT, its legs and the loss before the relay; once no ACK has crossed for 10 s
 * the line turns grey and says how old it is. A console error or CSP violation fails the test. Screenshots
 * in .tmp/punch-console/ of the repository.
 */
const OUT = join(repoRoot, '.tmp/punch-console');

test('console: a relayed stream shows the relay RTT and loss, grey with its age once stale', async () => {
  mkdirSync(OUT, { recursive: true });
  const t = await startTestServer({
    config: { relay: LOOPBACK_RELAY },
    signalling: { healthReportMs: 0 },
  });
  const browser = await launchChromium();
  const sockets: Socket[] = [];
  const peers: WsClient[] = [];
  let health: NodeJS.Timeout | undefined;
  try {
    const created = await t.call('POST', '/api/session', { body: { name: 'relayed-1', ttl: 600 } });
    const admin = created.json.token as string;
    for (const [i, ip] of ['127.0.0.1', '127.0.0.2'].entries()) {
      const token = (
        await t.call('POST', '/api/session/relayed-1/token', { token: admin, body: { label: `peer ${i}` } })
      ).json.token as string;
      const c = await connect(t.url, 'relayed-1', { token, localAddress: ip });
      peers.push(c);
      c.send({ type: 'register', port: 9000, role: i === 0 ? 'sender' : 'receiver' });
      await c.next('session');
    }
    const [a, b] = peers as [WsClient, WsClient];
    for (const c of peers) await c.next('peer');
    for (const c of peers) c.send({ type: 'ready' });
    for (const c of peers) await c.next('start');
    for (const c of peers) c.send({ type: 'status', srt: 'connecting' });
    const [portA, portB] = [
      (await a.next('peer', 20_000))['port'] as number,
      (await b.next('peer', 20_000))['port'] as number,
    ];
    b.send({ type: 'status', srt: 'connected' });

    const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const page = await context.newPage();
    const problems: string[] = [];
    await watchPage(page, problems);
    await page.goto(`${t.url}/s/relayed-1#t=${encodeURIComponent(admin)}`);
    await page.locator('[data-testid=stream-state]', { hasText: 'connected · relayed' }).waitFor();

    const udp = async (address: string): Promise<Socket & { got: number }> => {
      const s = createSocket('udp4') as Socket & { got: number };
      s.got = 0;
      s.on('message', () => s.got++);
      await new Promise<void>((resolve) => s.bind(0, address, resolve));
      sockets.push(s);
      return s;
    };
    const sa = await udp('127.0.0.1');
    const sb = await udp('127.0.0.2');
    const until = async (what: string, ok: () => boolean) => {
      for (let i = 0; !ok(); i++) {
        if (i > 200) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    // B latches first (a keepalive-sized datagram), then A's data: 100, 101, 104, and 102 again flagged R.
    sb.send(Buffer.alloc(16, 0x80), portB, '127.0.0.1');
    await new Promise((r) => setTimeout(r, 200));
    for (const seq of [100, 101, 104]) sa.send(srtData(seq), portA, '127.0.0.1');
    sa.send(srtData(102, true), portA, '127.0.0.1');
    await until('the data at B', () => sb.got >= 4);
    sb.send(srtAck(1, 5_000), portB, '127.0.0.1');
    await until('the ACK at A', () => sa.got >= 1);
    sa.send(srtAckAck(1), portA, '127.0.0.1');
    await until('the ACKACK at B', () => sb.got >= 5);

    // The receiver reports its health every second, as `punch agent` does: health_report carries the relay.
    const report = () => b.send({ type: 'health', rtt: 5, retransmit: 0, bitrate: 4e6 });
    report();
    health = setInterval(report, 1000);
    const line = page.locator('[data-testid=relay-figures]');
    await line
      .filter({ hasText: /Relay: RTT 5\.0 ms \(relay↔sender [\d.]+ ms, relay↔receiver [\d.]+ ms\)/ })
      .waitFor({ timeout: 10_000 });
    await line.filter({ hasText: 'lost before the relay 2 of 4 packets · 1 retransmitted' }).waitFor();
    await page.screenshot({ path: join(OUT, 'console-relay-live.png'), fullPage: true });
    if ((await line.getAttribute('class')) !== 'relay-figures')
      throw new Error('fresh figures shown as stale');

    // No ACK for 10 s (the link stopped acknowledging): the figures grey, with their age.
    await page
      .locator('[data-testid=relay-figures].stale', { hasText: /stale, measured (1\d|[2-9]\d) s ago/ })
      .waitFor({
        timeout: 25_000,
      });
    const colour = String(
      await page.evaluate("getComputedStyle(document.querySelector('[data-testid=relay-figures]')).color"),
    );
    if (colour !== 'rgb(153, 153, 153)') throw new Error(`stale colour ${colour}`);
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: join(OUT, 'console-relay-stale-phone.png'), fullPage: true });
    if (problems.length > 0) throw new Error(`console errors or CSP violations:\n${problems.join('\n')}`);
  } finally {
    clearInterval(health);
    for (const s of sockets) s.close();
    for (const c of peers) c.close();
    await browser.close();
    await t.close();
  }
});
