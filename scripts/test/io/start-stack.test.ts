import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { freePort, repoRoot, startProcess, tempDir } from '@broadcast-ops/core/testing';

const fixtures = fileURLToPath(new URL('../fixtures/packages', import.meta.url));
const LANDING_PORT = 8600; // scripts/start-stack.ts

function listen(): Promise<Server> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => resolve(srv));
  });
}

/** An offset that puts the landing page on a free port, and the demo port that lands on another free one. */
async function ports(): Promise<{ offset: number; landing: number; demo: number; demoBase: number }> {
  const landing = await freePort();
  const offset = landing - LANDING_PORT;
  let demo = await freePort();
  while (demo === landing || demo - offset < 1 || demo - offset > 65535) demo = await freePort();
  return { offset, landing, demo, demoBase: demo - offset };
}

function launch(env: Record<string, string>, args: string[] = []) {
  return startProcess(
    process.execPath,
    ['--import', 'tsx', join(repoRoot, 'scripts/start-stack.ts'), '--packages', fixtures, ...args],
    { env },
  );
}

interface Fleet {
  notes: { id: string; text: string }[];
  services: { name: string; level: string; links: { label: string; url: string; template?: boolean }[] }[];
}

/**
 * The landing page's /api/fleet (the status service) once `until` holds (bounded: 30 s; with a short
 * --ready-timeout the status service may still be starting when the launcher prints its URLs).
 */
async function waitForFleet(port: number, until: (f: Fleet) => boolean): Promise<Fleet> {
  let last: Fleet | string | undefined;
  for (const t0 = Date.now(); Date.now() - t0 < 30_000;) {
    try {
      const fleet = (await (await fetch(`http://127.0.0.1:${port}/api/fleet`)).json()) as Fleet;
      if (until(fleet)) return fleet;
      last = fleet;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.fail(`fleet never matched: ${JSON.stringify(last)}`);
}

test('launcher starts declared services, serves the landing page first, and stops them all on SIGINT with exit 0', async () => {
  const p = await ports();
  const tmp = tempDir();
  const marker = join(tmp.path, 'marker');
  // The offset comes from the environment here and moves the declared port, the URLs and the landing page.
  const launcher = launch({
    DEMO_PORT: String(p.demoBase),
    DEMO_MARKER: marker,
    BROADCAST_OPS_PORT_OFFSET: String(p.offset),
  });
  try {
    await launcher.waitForOutput(/Press Ctrl-C to stop/, 60_000);
    const out = launcher.output();
    const firstUrl = /http:\/\/\S+/.exec(out)?.[0];
    assert.equal(firstUrl, `http://127.0.0.1:${p.landing}/`, out);
    assert.match(out, /demo-service\s+up/);
    assert.match(out, new RegExp(`^ {4}Demo page {2,}http://127\\.0\\.0\\.1:${p.demo}/$`, 'm'));
    assert.doesNotMatch(out, /<id>/); // a template URL is for the landing page, not the console
    assert.doesNotMatch(out, /library-only/);
    const body = await (await fetch(`http://127.0.0.1:${p.demo}/`)).text();
    assert.equal(body, 'hello serve'); // env and args from toolkit.start reached the service
    const landing = await fetch(`http://127.0.0.1:${p.landing}/`);
    assert.equal(landing.status, 200);
    assert.match(landing.headers.get('content-security-policy') ?? '', /default-src 'self'/);
    assert.match(await landing.text(), /src="\/status\.js"/); // the status service's page
    for (const asset of ['/status.js', '/status.css'])
      assert.equal((await fetch(`http://127.0.0.1:${p.landing}${asset}`)).status, 200, asset);
    // The page draws what /api/fleet says: each service's health, links (a template one as text) and the notes.
    const fleet = await waitForFleet(p.landing, (f) => f.services.every((s) => s.level === 'green'));
    assert.deepEqual(
      fleet.services.map((s) => [s.name, s.level]),
      [['demo-service', 'green']],
    );
    const demo = fleet.services[0];
    assert.deepEqual(
      demo?.links.map((l) => [l.label, l.url, l.template ?? false]),
      [
        ['Demo page', `http://127.0.0.1:${p.demo}/`, false],
        ['Demo item', `http://127.0.0.1:${p.demo}/item/<id>`, true],
      ],
    );
    assert.deepEqual(
      fleet.notes.map((n) => n.id),
      ['credential', 'base-url'],
    );
    const missing = await fetch(`http://127.0.0.1:${p.landing}/nope`);
    assert.equal(missing.status, 404);
    launcher.child.kill('SIGINT');
    const exit = await launcher.exited;
    assert.equal(exit.code, 0, launcher.output());
    assert.match(readFileSync(marker, 'utf8'), /^stopped \d+\n$/);
    await assert.rejects(fetch(`http://127.0.0.1:${p.demo}/`)); // the port is closed
    await assert.rejects(fetch(`http://127.0.0.1:${p.landing}/`));
  } finally {
    await launcher.stop('SIGKILL');
    tmp.remove();
  }
});

test('a busy port is named on the console with the way to move it, and nothing starts', async () => {
  const holder = await listen();
  const held = (holder.address() as { port: number }).port;
  // The held port is where the offset moves the demo's declared port 20000.
  const p = { offset: held - 20_000 };
  const tmp = tempDir();
  const marker = join(tmp.path, 'marker');
  try {
    const launcher = launch({ DEMO_PORT: String(held - p.offset), DEMO_MARKER: marker }, [
      '--port-offset',
      String(p.offset),
    ]);
    const exit = await launcher.exited;
    const out = launcher.output();
    assert.equal(exit.code, 1, out);
    assert.match(out, new RegExp(`^ +${held}/tcp +demo-service +Demo page$`, 'm'));
    assert.match(out, /npm start -- --port-offset \d+ +\(or BROADCAST_OPS_PORT_OFFSET=\d+ npm start\)/);
    assert.doesNotMatch(out, /Press Ctrl-C/);
    assert.throws(() => readFileSync(marker)); // the service never ran
  } finally {
    await new Promise((r) => holder.close(r));
    tmp.remove();
  }
});

test('launcher reports a service that dies at start and exits non-zero', async () => {
  const p = await ports();
  // The demo dies by itself; its port stays a port, so the status service's configuration (its URLs come
  // from the demo's) stays valid and the status service does not die first of a refused one.
  const launcher = launch(
    { DEMO_PORT: String(p.demoBase), DEMO_MARKER: '/dev/null', DEMO_FAIL_AT_START: '1' },
    ['--port-offset', String(p.offset)],
  );
  const exit = await launcher.exited;
  assert.equal(exit.code, 1);
  assert.match(launcher.output(), /demo-service exited unexpectedly with 1/);
});

test('a service killed by a signal is reported with the signal name', async () => {
  const p = await ports();
  const launcher = launch({ DEMO_PORT: String(p.demoBase), DEMO_MARKER: '/dev/null' }, [
    '--port-offset',
    String(p.offset),
  ]);
  try {
    await launcher.waitForOutput(/Press Ctrl-C to stop/, 60_000);
    const pid = Number(/demo-service\s+up\s+\(pid (\d+), log/.exec(launcher.output())?.[1]);
    assert.ok(pid > 0);
    process.kill(pid, 'SIGKILL');
    const exit = await launcher.exited;
    assert.equal(exit.code, 1);
    assert.match(launcher.output(), /demo-service exited unexpectedly with signal SIGKILL/);
  } finally {
    await launcher.stop('SIGKILL');
  }
});

test('the launcher killed by SIGKILL leaves no service behind: the supervised pipe closes and the service stops', async () => {
  const p = await ports();
  const tmp = tempDir();
  const marker = join(tmp.path, 'marker');
  const launcher = launch({ DEMO_PORT: String(p.demoBase), DEMO_MARKER: marker }, [
    '--port-offset',
    String(p.offset),
  ]);
  let pid = 0;
  let pids: number[] = [];
  try {
    await launcher.waitForOutput(/Press Ctrl-C to stop/, 60_000);
    pid = Number(/demo-service\s+up\s+\(pid (\d+), log/.exec(launcher.output())?.[1]);
    assert.ok(pid > 0);
    // Every service: the fixture and the real status service (core's runService), each in its own group.
    pids = [...launcher.output().matchAll(/\s+up\s+\(pid (\d+), log/g)].map((m) => Number(m[1]));
    assert.equal(pids.length, 2, launcher.output());
    launcher.child.kill('SIGKILL'); // no signal reaches the services' own process groups
    await launcher.exited;
    const gone = await waitUntil(() => !pids.some(alive), 15_000);
    assert.ok(gone, `still running after their launcher was killed: ${pids.filter(alive).join(', ')}`);
    assert.match(readFileSync(marker, 'utf8'), new RegExp(`^supervisor gone ${pid}\n$`));
    await assert.rejects(fetch(`http://127.0.0.1:${p.demo}/`)); // its port is free for the next npm start
  } finally {
    for (const p of pids.filter(alive)) process.kill(p, 'SIGKILL');
    await launcher.stop('SIGKILL');
    tmp.remove();
  }
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitUntil(check: () => boolean, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return check();
}

test('a port plan that lands on a browser-refused port is refused before anything starts, with a working offset', async () => {
  const tmp = tempDir();
  const marker = join(tmp.path, 'marker');
  try {
    // The demo's port 10000 moved by 80 is 10080, on the Fetch standard's bad-port list.
    const launcher = launch({ DEMO_PORT: '10000', DEMO_MARKER: marker }, ['--port-offset', '80']);
    const exit = await launcher.exited;
    const out = launcher.output();
    assert.equal(exit.code, 2, out);
    assert.match(out, /^ +10080\/tcp +demo-service +Demo page: refused by browsers and fetch/m);
    assert.match(out, /npm start -- --port-offset 100 +\(or BROADCAST_OPS_PORT_OFFSET=100 npm start\)/);
    assert.match(out, /nothing was started/);
    assert.doesNotMatch(out, /Press Ctrl-C/);
    assert.throws(() => readFileSync(marker)); // the service never ran
  } finally {
    tmp.remove();
  }
});

test('a slow service is reported without stopping the others, and announced once it answers', async () => {
  const p = await ports();
  let slow = await freePort();
  while (slow === p.landing || slow === p.demo || slow - p.offset < 1) slow = await freePort();
  const launcher = startProcess(
    process.execPath,
    [
      '--import',
      'tsx',
      join(repoRoot, 'scripts/start-stack.ts'),
      '--packages',
      fileURLToPath(new URL('../fixtures/slow-stack', import.meta.url)),
      '--ready-timeout',
      '2000',
    ],
    {
      env: {
        DEMO_PORT: String(p.demoBase),
        DEMO_MARKER: '/dev/null',
        SLOW_PORT: String(slow - p.offset),
        SLOW_DELAY_MS: '12000',
        BROADCAST_OPS_PORT_OFFSET: String(p.offset),
      },
    },
  );
  try {
    await launcher.waitForOutput(/Press Ctrl-C to stop/, 60_000);
    await launcher.waitForOutput(/slow-service did not become ready/, 10_000);
    const out = launcher.output();
    assert.match(out, /demo-service\s+up/);
    assert.match(out, /slow-service\s+NOT READY yet/);
    assert.match(out, /it keeps running \(the others are not stopped\)/);
    assert.doesNotMatch(out, /stopping/);
    // The others serve meanwhile, and the landing page says the slow one is not answering.
    assert.equal(await (await fetch(`http://127.0.0.1:${p.demo}/`)).text(), 'hello serve');
    const before = await waitForFleet(p.landing, (f) =>
      f.services.some((s) => s.name === 'slow-service' && s.level === 'red'),
    );
    assert.deepEqual(
      before.services.map((s) => [s.name, s.level]),
      [
        ['demo-service', 'green'],
        ['slow-service', 'red'],
      ],
    );
    await launcher.waitForOutput(/start-stack: slow-service is up/, 60_000);
    assert.equal(await (await fetch(`http://127.0.0.1:${slow}/`)).text(), 'slow but here');
    launcher.child.kill('SIGINT');
    const exit = await launcher.exited;
    assert.equal(exit.code, 0, launcher.output());
  } finally {
    await launcher.stop('SIGKILL');
  }
});
