import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { silentLogger } from '@broadcast-ops/core';
import pkg from '../../package.json' with { type: 'json' };
import { AgentBundle, AgentBundleError, agentFileName } from '../../src/io/agent-bundle.ts';
import { injectBroker, type InjectedBroker } from '../inject-harness.ts';
import { joinStepsOf } from '../join-page.ts';

/**
 * The single-file agent's routes (docs/agent.md "Without a checkout") and the join page's commands for it,
 * through `inject` on a `ManualClock` (quick tier): documented without security, another version a 404
 * naming the file served, no token in any download URL; the note that links point at a loopback address
 * (README "Your first link"), which names PUNCH_BASE_URL, on every page that hands out links, gone once the
 * setting is made; and a missing esbuild. The bundle itself (built by esbuild) is served in
 * test/io/agent-download.test.ts.
 */
const version = pkg.version;
const file = agentFileName(version);

async function session(t: InjectedBroker, name: string): Promise<{ admin: string; peer: string }> {
  const created = await t.call('POST', '/api/session', { body: { name } });
  assert.equal(created.status, 201, created.text);
  const admin = created.json.token as string;
  const issued = await t.call('POST', `/api/session/${name}/token`, { token: admin, body: { label: 'cam' } });
  assert.equal(issued.status, 201, issued.text);
  return { admin, peer: issued.json.token as string };
}

describe('the agent routes and the join steps, links under 127.0.0.1', () => {
  let t: InjectedBroker;
  before(async () => {
    // What a broker on 127.0.0.1 without PUNCH_BASE_URL builds its links on.
    t = await injectBroker({ config: { baseUrl: 'http://127.0.0.1:8080' } });
  });
  after(async () => {
    await t.close();
  });

  test('the OpenAPI document lists both agent routes, without security', async () => {
    const doc = (await t.call('GET', '/api/openapi.json')).json;
    assert.deepEqual(doc.paths['/agent/'].get.security, []);
    assert.deepEqual(doc.paths['/agent/{file}'].get.security, []);
    assert.equal(doc.paths['/agent/{file}'].get.operationId, 'agentDownload');
  });

  test('another version is a 404 that names the file this broker serves', async () => {
    const r = await t.call('GET', '/agent/punch-agent-0.0.1.mjs');
    assert.equal(r.status, 404);
    assert.equal(r.json.code, 'NOT_FOUND');
    assert.ok(r.json.message.includes(`/agent/${file}`), r.json.message);
  });

  test("a peer's join page: per-OS steps, download from this broker without the token, run with node", async () => {
    const { peer } = await session(t, 'dl1');
    const page = await t.call('GET', `/s/dl1?t=${peer}`);
    assert.equal(page.status, 200);
    // The page holds the peer's own join link: never cached, never sent on as a Referer.
    assert.equal(page.headers.get('cache-control'), 'no-store');
    assert.equal(page.headers.get('referrer-policy'), 'no-referrer');
    // The token is never written into the HTML: the commands hold a placeholder the page script fills in.
    assert.ok(!page.text.includes(peer), 'no token in the HTML');
    const steps = joinStepsOf(page.text);
    for (const os of ['Linux', 'macOS', 'Windows']) assert.ok(steps.html.includes(`<b>${os}</b>`), os);
    assert.equal(steps.download['linux macos'], `curl -fsSLo punch-agent.mjs '${t.url}/agent/${file}'`);
    assert.equal(steps.download['windows'], `curl.exe -fsSLo punch-agent.mjs '${t.url}/agent/${file}'`);
    for (const cmd of Object.values(steps.download))
      assert.ok(!cmd.includes(peer), 'no token in a download URL');
    const link = '<join link>';
    assert.equal(
      steps.send,
      `node punch-agent.mjs --link '${link}' --role sender --port 9000 --input udp://127.0.0.1:5000`,
    );
    assert.equal(
      steps.receive,
      `node punch-agent.mjs --link '${link}' --role receiver --port 9000 --output udp://127.0.0.1:5001`,
    );
    assert.ok(!/npx punch/.test(page.text), 'no npx: it would resolve to an unrelated registry package');
  });

  test('links under 127.0.0.1: the create page, the console and the join page say so and name PUNCH_BASE_URL', async () => {
    const { admin, peer } = await session(t, 'dl2');
    const note = /only this machine reaches[^<]*PUNCH_BASE_URL/;
    const create = await t.call('GET', '/');
    assert.match(create.text, note);
    assert.ok(create.text.includes(`point at ${t.url}`), 'names the address the links use');
    assert.match((await t.call('GET', `/s/dl2?t=${admin}`)).text, note);
    assert.match((await t.call('GET', `/s/dl2?t=${peer}`)).text, note);
  });
});

describe('links under a public base URL', () => {
  let t: InjectedBroker;
  before(async () => {
    t = await injectBroker({ config: { baseUrl: 'https://punch.example.com' } });
  });
  after(async () => {
    await t.close();
  });

  test('no loopback note; the commands name the configured origin', async () => {
    const { admin, peer } = await session(t, 'pub');
    for (const path of ['/', `/s/pub?t=${admin}`, `/s/pub?t=${peer}`]) {
      const r = await t.call('GET', path);
      assert.equal(r.status, 200, path);
      assert.doesNotMatch(r.text, /only this machine reaches/, path);
    }
    const steps = joinStepsOf((await t.call('GET', `/s/pub?t=${peer}`)).text, 'L');
    assert.equal(
      steps.download['linux macos'],
      `curl -fsSLo punch-agent.mjs 'https://punch.example.com/agent/${file}'`,
    );
    assert.ok(steps.send.startsWith("node punch-agent.mjs --link 'L' --role sender"));
  });
});

describe('the quick start (npm start: PUNCH_HOST=127.0.0.1, no PUNCH_BASE_URL)', () => {
  test("the npm start landing entry of the console says the same (this package's toolkit.start)", () => {
    const consoleEntry = pkg.toolkit.start.urls.find((u) => u.label.startsWith('Console'));
    assert.match(consoleEntry?.note ?? '', /PUNCH_BASE_URL.*only this machine reaches/);
  });
});

test('without esbuild the bundle fails with a message that says what to do, and is tried again next time', async () => {
  let tries = 0;
  const bundle = new AgentBundle(silentLogger(), '9.9.9', () => {
    tries++;
    return Promise.reject(new Error("Cannot find package 'esbuild'"));
  });
  assert.equal(bundle.file, 'punch-agent-9.9.9.mjs');
  for (let i = 1; i <= 2; i++) {
    await assert.rejects(bundle.get(), (err: unknown) => {
      assert.ok(err instanceof AgentBundleError);
      assert.match(err.message, /esbuild is not installed.*npm ci/);
      return true;
    });
    assert.equal(tries, i, 'a failed build is not cached');
  }
});
