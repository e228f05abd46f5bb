/**
 * docs/guides/companion-bridge.md, walked step by step on what a clone builds: the config keys, commands and
 * client calls are taken from the guide's text; the bridge runs as `npx telemetry-bridge --config <file>` on
 * plain node, "your Companion" is the bridge's Satellite API simulator (`telemetry-bridge companion-sim`,
 * the real protocol over TCP and WebSocket), and the app is written with the client library as the guide
 * says. Ports are ephemeral (0 in the config, read back from the start-up log lines).
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { repoRoot, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { BridgeClient, type AckMessage } from '@broadcast-ops/bridge-client';
import { configSchema, DEFAULT_CONFIG } from '@broadcast-ops/telemetry-bridge';
import {
  argv,
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

const guide = readGuide('companion-bridge.md');

interface Bridge {
  service: Service;
  clients: string;
  health: string;
}

interface Health {
  status: string;
  dependencies: { name: string; status: string }[];
}

/** `npx telemetry-bridge …`; its URLs from the start-up log line. */
async function startBridge(
  args: string[],
  services: Service[],
  env: NodeJS.ProcessEnv = {},
): Promise<Bridge> {
  const service = startCommand(args, env);
  services.push(service);
  const l = await logLine(service, /telemetry bridge listening/);
  return { service, clients: String(l['clients']), health: String(l['health']) };
}

/** The bridge's own Satellite API simulator on ephemeral ports, printing every line it receives. */
async function startCompanion(services: Service[]): Promise<{ sim: Service; tcp: number; ws: number }> {
  const sim = startCommand([
    'npx',
    'telemetry-bridge',
    'companion-sim',
    '--tcp-port',
    '0',
    '--ws-port',
    '0',
    '--log-lines',
  ]);
  services.push(sim);
  const m = await sim.waitForOutput(/companion-sim: ApiVersion \S+, tcp (\d+), ws (\d+)/, 60_000);
  return { sim, tcp: Number(m[1]), ws: Number(m[2]) };
}

async function health(b: Bridge): Promise<Health> {
  return (await getJson(`${b.health}/health`)).body as Health;
}

const satellite = (h: Health): string | undefined =>
  h.dependencies.find((d) => d.name === 'companion.satellite')?.status;

/** Sets `a.b.c` in a config object: the guide's dotted key names, as a user types them into the file. */
function set(obj: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split('.');
  let o = obj;
  for (const k of keys.slice(0, -1)) o = (o[k] ??= {}) as Record<string, unknown>;
  o[keys[keys.length - 1] ?? ''] = value;
}

/** `key: value` as the guide writes it (`companion.enabled: true`, `transport: "ws"`). */
function keyValue(code: string): [string, unknown] {
  const [k = '', v = ''] = code.split(/:\s+/);
  return [k, JSON.parse(v) as unknown];
}

const TOKEN = 'guide-walk-token-0123456789abcdef';

test('guide "The bridge between Companion and your app": every step walked against telemetry-bridge', async (t) => {
  await ensureBuilt();
  const tmp = tempDir('guide-companion-');
  const services: Service[] = [];
  const clients: BridgeClient[] = [];
  try {
    await t.test('the files the guide names are in a fresh clone (tracked by git)', () => {
      const paths = repoPaths(guide);
      assert.ok(paths.length > 0, 'the guide names files');
      assert.deepEqual(notInClone(paths), []);
    });

    await t.test(
      'step 1: the demo bridge talks to its Companion simulator; the tally watcher prints tally changes',
      async () => {
        const step = guide.step(1);
        const port = /\(ws:\/\/127\.0\.0\.1:(\d+)\/\)/.exec(step)?.[1];
        const pkg = JSON.parse(
          readFileSync(join(repoRoot, 'packages/telemetry-bridge/package.json'), 'utf8'),
        ) as {
          toolkit: { start: { args: string[] } };
        };
        const args = pkg.toolkit.start.args;
        assert.ok(args.includes('--companion-sim'), 'npm start runs the built-in simulator');
        const demoFile = args[args.indexOf('--config') + 1] ?? '';
        const demo = JSON.parse(readFileSync(join(repoRoot, demoFile), 'utf8')) as {
          clientTransport: { port: number };
        };
        assert.equal(String(demo.clientTransport.port), port, `${demoFile} client port vs the guide`);
        // The demo as npm start runs it, ports moved by the bridge's environment overrides, log in tmp.
        const bridge = await startBridge(['npx', 'telemetry-bridge', ...args], services, {
          BRIDGE_CLIENT_TRANSPORT_PORT: '0',
          BRIDGE_METRICS_PORT: '0',
          BRIDGE_HEALTH_PORT: '0',
          BRIDGE_EVENT_LOG_PATH: join(tmp.path, 'demo-events'),
        });
        const watcherCmd = inlineMatching(
          guide,
          step,
          /^npx tsx examples\/telemetry-bridge\/tally-watcher\.ts$/,
        );
        const watcher = startCommand([...argv(watcherCmd), '--url', bridge.clients]);
        services.push(watcher);
        // The simulator's programme tally (a Companion output the demo maps) changes: two values printed.
        const values = await waitFor(
          () => {
            const seen = new Set(
              [...watcher.output().matchAll(/companion\.variables\.custom\.tally_pgm\s+("[^"]*")/g)].map(
                (m) => m[1],
              ),
            );
            return seen.size >= 2 ? [...seen] : undefined;
          },
          { timeoutMs: 60_000, what: 'two tally values printed' },
        );
        assert.ok(values.length >= 2, 'two tally values');
        await watcher.end();
        await bridge.service.end();
      },
    );

    // The user's studio.json, built from the key names the guide gives in steps 2 and 3.
    const studio: Record<string, unknown> = {};
    let companion: { sim: Service; tcp: number; ws: number } | undefined;
    let bridge: Bridge | undefined;
    const studioFile = join(tmp.path, 'studio.json');

    await t.test(
      'step 2: companion.enabled, host, port (WebSocket by default, TCP with transport) connect to Companion',
      async () => {
        const step = guide.step(2);
        const [enabledKey, enabled] = keyValue(inlineMatching(guide, step, /^companion\.enabled: /));
        assert.ok(
          guide.inline(step).includes('host') && guide.inline(step).includes('port'),
          'step 2 names host and port',
        );
        const [transportKey, transport] = keyValue(inlineMatching(guide, step, /^transport: /));
        const ports = {
          ws: Number(/WebSocket (\d+)/.exec(step)?.[1]),
          tcp: Number(/TCP (\d+)/.exec(step)?.[1]),
        };
        const help = await runCommand(['npx', 'telemetry-bridge', '--help']);
        assert.match(help.stdout, new RegExp(`TCP port \\(default ${ports.tcp};`));
        assert.match(help.stdout, new RegExp(`WebSocket port \\(default ${ports.ws};`));
        // The guide gives `transport` for one of the two; the other is what a config without it uses.
        assert.ok(transport === 'ws' || transport === 'tcp', String(transport));
        const keyed = transport;
        const plain = keyed === 'tcp' ? 'ws' : 'tcp';

        companion = await startCompanion(services);
        const c = companion;
        set(studio, enabledKey, enabled);
        set(studio, 'companion.host', '127.0.0.1');
        set(studio, 'companion.port', c[plain]);
        Object.assign(studio, {
          name: 'studio',
          clientTransport: { host: '127.0.0.1', port: 0 },
          metrics: { host: '127.0.0.1', port: 0 },
          health: { host: '127.0.0.1', port: 0 },
          eventLog: { path: join(tmp.path, 'studio-events') },
        });
        assert.ok(configSchema.safeParse(studio).success, 'the config schema accepts the keys');
        writeFileSync(studioFile, JSON.stringify(studio, null, 2));
        const start = inlineMatching(guide, step, /^npx telemetry-bridge --config /);
        // Step 3's client-port protection is added below before this bridge is used by an app; first the link.
        bridge = await startBridge(argv(start, { 'studio.json': studioFile }), services);
        const b = bridge;
        await waitFor(async () => satellite(await health(b)) === 'healthy', {
          timeoutMs: 30_000,
          what: `companion.satellite healthy over ${plain} without \`transport\``,
        });
        // It registered as a Satellite surface (what makes it appear under Companion's Surfaces: prose there).
        await c.sim.waitForOutput(/ADD-DEVICE /);
        await b.service.end();

        // The other transport: its port with the `transport` the guide gives for it.
        const keyedConfig = structuredClone(studio);
        set(keyedConfig, 'companion.port', c[keyed]);
        set(keyedConfig, `companion.${transportKey}`, transport);
        const keyedFile = join(tmp.path, 'studio-keyed.json');
        writeFileSync(keyedFile, JSON.stringify(keyedConfig));
        const other = await startBridge(argv(start, { 'studio.json': keyedFile }), services);
        await waitFor(async () => satellite(await health(other)) === 'healthy', {
          timeoutMs: 30_000,
          what: `companion.satellite healthy over ${keyed} with ${transportKey}: "${keyed}"`,
        });
        await other.service.end();
        // And a config without `port` uses the port the guide gives for the transport that needs no key.
        assert.equal(DEFAULT_CONFIG.companion.port, ports[plain], 'the port a config without `port` uses');
        // The unit the guide offers runs the same service on /etc/broadcast-ops/telemetry-bridge-<instance>.json.
        const unit = readFileSync(join(repoRoot, 'deploy/systemd/telemetry-bridge@.service'), 'utf8');
        assert.match(guide.step(2), /`telemetry-bridge@studio` unit/);
        assert.match(unit, /^ExecStart=\S+ \S+\/packages\/telemetry-bridge\/dist\/start\.cjs run$/m);
        assert.match(
          unit,
          /^Environment=BRIDGE_CONFIG_PATH=\/etc\/broadcast-ops\/telemetry-bridge-%i\.json$/m,
        );
      },
    );

    await t.test(
      'step 3: requireAuth with a token per app: without a token an app is refused, with one it connects',
      async () => {
        const step = guide.step(3);
        assert.ok(companion, 'the Companion of step 2');
        const [requireKey, required] = keyValue(
          inlineMatching(guide, step, /^clientTransport\.requireAuth: /),
        );
        const tokensKey = inlineMatching(guide, step, /^clientTransport\.authTokens$/);
        set(studio, requireKey, required);
        // requireAuth alone is refused at start (exit 2, naming the key), so the token list is not forgotten.
        writeFileSync(studioFile, JSON.stringify(studio));
        const refused = await runCommand(['npx', 'telemetry-bridge', '--config', studioFile]);
        assert.equal(refused.code, 2, refused.stdout + refused.stderr);
        assert.match(refused.stdout + refused.stderr, /authTokens/);
        set(studio, tokensKey, [TOKEN]);
        assert.ok(configSchema.safeParse(studio).success, 'the config schema accepts the keys');
        writeFileSync(studioFile, JSON.stringify(studio, null, 2));
        bridge = await startBridge(['npx', 'telemetry-bridge', '--config', studioFile], services);
        const b = bridge;
        await waitFor(async () => satellite(await health(b)) === 'healthy', {
          timeoutMs: 30_000,
          what: 'linked',
        });
        const anonymous = new BridgeClient({
          url: b.clients,
          name: 'anonymous',
          reconnect: { enabled: false },
        });
        clients.push(anonymous);
        await assert.rejects(anonymous.connect());
        // The example app with its --token option connects.
        const watcher = startCommand([
          'npx',
          'tsx',
          'examples/telemetry-bridge/tally-watcher.ts',
          '--url',
          b.clients,
          '--token',
          TOKEN,
          '--pattern',
          'companion.**',
        ]);
        services.push(watcher);
        // The name is normalised in the namespace: `-` becomes `_` (docs/protocol.md "Handshake and namespaces").
        await watcher.waitForOutput(/^connected as app\.tally_watcher$/m, 60_000);
        await watcher.end();
      },
    );

    await t.test(
      'step 4: an app on the client library subscribes to companion.** and presses a key, acknowledged',
      async () => {
        const step = guide.step(4);
        assert.ok(bridge && companion, 'the bridge of step 3 and the Companion of step 2');
        const b = bridge;
        const c = companion;
        const lib = inlineMatching(guide, step, /^@broadcast-ops\/bridge-client$/);
        const pkg = JSON.parse(
          readFileSync(join(repoRoot, 'packages/bridge-client/package.json'), 'utf8'),
        ) as {
          name: string;
          exports: Record<string, unknown>;
        };
        assert.equal(pkg.name, lib, 'the guide names the client package');
        assert.ok(pkg.exports['.'], `${lib} is exported`);
        const pattern =
          /^subscribe\('([^']+)'\)$/.exec(inlineMatching(guide, step, /^subscribe\(/))?.[1] ?? '';
        const target =
          /^command\('([^']+)', path, action, params\)$/.exec(
            inlineMatching(guide, step, /^command\(/),
          )?.[1] ?? '';
        const statuses = ['received', 'completed', 'failed', 'timeout'].filter((s) =>
          guide.inline(step).includes(s),
        );
        assert.deepEqual(statuses, ['received', 'completed', 'failed', 'timeout'], 'the ack statuses named');

        const app = new BridgeClient({
          url: b.clients,
          name: 'myapp',
          authToken: TOKEN,
          reconnect: { enabled: false },
        });
        clients.push(app);
        const states = new Map<string, unknown>();
        app.on('state', (m) => states.set(m.path, m.payload.value));
        await app.connect();
        const ns = inlineMatching(guide, step, /^\w+\.<name>$/);
        assert.equal(app.namespace, ns.replace('<name>', 'myapp'), 'the app name becomes its namespace');
        await app.subscribe([pattern], { snapshot: true });
        await waitFor(() => states.get('companion.connection.state') === 'connected', {
          timeoutMs: 30_000,
          what: "Companion's state through the subscription",
        });
        const key = [...states.keys()].find((p) => /^companion\.device\.[a-z0-9_]+\.key\.0$/.test(p));
        assert.ok(key, `a key of the surface among ${[...states.keys()].join(', ')}`);
        const acks: AckMessage[] = [];
        const cmd = app.command(target, key, 'press', {}, { ttl: 10_000 });
        const final = await cmd.done;
        acks.push(...cmd.acks);
        assert.deepEqual(
          acks.map((a) => a.payload.status),
          ['received', 'completed'],
        );
        assert.equal(final.payload.status, 'completed');
        // Companion received the key press (the simulator prints every line it gets).
        await c.sim.waitForOutput(/KEY-PRESS [^\n]*KEY=0\b/);
        // A command Companion cannot take is acknowledged `failed`/`rejected` too, never left hanging.
        const bad = app.command(target, 'companion.device.nobody.key.999', 'press', {}, { ttl: 10_000 });
        const badFinal = await bad.done;
        assert.notEqual(badFinal.payload.status, 'completed');
      },
    );

    await t.test(
      'step 5: :9091/health shows companion.satellite healthy; replay --type command lists what the app sent',
      async () => {
        const step = guide.step(5);
        assert.ok(bridge && companion, 'the bridge of step 3 and the Companion of step 2');
        const b = bridge;
        const healthCode = inlineMatching(guide, step, /^GET :\d+\/health$/);
        const [, port = '', path = ''] = /^GET :(\d+)(\/health)$/.exec(healthCode) ?? [];
        assert.equal(String(DEFAULT_CONFIG.health.port), port, 'the health port by default');
        const dep = inlineMatching(guide, step, /^companion\.satellite$/);
        const state = inlineMatching(guide, step, /^healthy$/);
        const h = (await getJson(`${b.health}${path}`)).body as Health;
        assert.equal(h.dependencies.find((d) => d.name === dep)?.status, state);
        const replay = inlineMatching(guide, step, /^telemetry-bridge replay /);
        const r = await runCommand(['npx', ...argv(replay), '--config', studioFile]);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        const records = r.stdout
          .trim()
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.stringify(JSON.parse(l)));
        assert.ok(
          records.some((l) => l.includes('app.myapp') && l.includes('"press"')),
          r.stdout,
        );
        assert.ok(
          records.every((l) => l.includes('"command"')),
          'only commands',
        );
        // Companion gone: the dependency is no longer healthy (what the check is for).
        await companion.sim.end();
        await waitFor(async () => satellite(await health(b)) !== 'healthy', {
          timeoutMs: 30_000,
          what: 'companion.satellite not healthy without Companion',
        });
      },
    );
  } finally {
    for (const c of clients) await c.close().catch(() => undefined);
    await endAll(services);
    tmp.remove();
  }
});
