/**
 * The pure parts of the `npm start` launcher (scripts/stack/): moving a service's declaration by a port
 * offset, the service environment, the landing page's config and the console text. The launcher as a whole
 * (children, readiness, stopping) is walked by start-stack.test.ts and npm-start.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { busyPortsText, runningText } from '../../stack/console-text.ts';
import { landingConfig } from '../../stack/landing.ts';
import { serviceEnv, shiftConfigPorts, shiftService, type StackService } from '../../stack/services.ts';
import { busyPortInLog } from '../../stack/supervisor.ts';

const timesvc: StackService = {
  name: 'timesvc',
  dir: '/repo/packages/timesvc',
  bin: '/repo/packages/timesvc/dist/main.js',
  version: '0.1.0',
  start: {
    title: 'timesvc: time service',
    args: ['serve', '--config', 'config/timesvc.demo.yaml', '--verbose'],
    env: { TIMESVC_WEB_PORT: '8080', TIMESVC_MODE: 'demo' },
    ready: 'http://127.0.0.1:8080/api/health',
    urls: [
      { label: 'Dashboard', url: 'http://127.0.0.1:8080/', page: true },
      { label: 'Client', url: 'http://127.0.0.1:8080/c/<name>', template: true },
    ],
    ports: [
      { label: 'NTP', proto: 'udp', port: 11123, use: 'point NTP clients here' },
      { label: 'PTP', proto: 'udp', port: '319', outbound: true, use: 'sent to' },
    ],
  },
};

test('a declaration moved by an offset: URLs, ports, *_PORT values and config files, nothing else', () => {
  const copies: string[] = [];
  const moved = shiftService(timesvc, 1000, (service, arg) => {
    copies.push(`${service}:${arg}`);
    return arg.endsWith('.yaml') ? `data/stack/${service}-copy.json` : arg;
  });
  assert.deepEqual(moved.start.args, ['serve', '--config', 'data/stack/timesvc-copy.json', '--verbose']);
  assert.deepEqual(copies, [
    'timesvc:serve',
    'timesvc:--config',
    'timesvc:config/timesvc.demo.yaml',
    'timesvc:--verbose',
  ]);
  assert.deepEqual(moved.start.env, { TIMESVC_WEB_PORT: '9080', TIMESVC_MODE: 'demo' });
  assert.equal(moved.start.ready, 'http://127.0.0.1:9080/api/health');
  assert.deepEqual(
    moved.start.urls?.map((u) => u.url),
    ['http://127.0.0.1:9080/', 'http://127.0.0.1:9080/c/<name>'],
  );
  assert.deepEqual(
    moved.start.ports?.map((p) => p.port),
    [12123, 1319],
  );
  // Offset 0 is the declaration itself: no copy is written.
  assert.equal(
    shiftService(timesvc, 0, () => assert.fail('no copy at offset 0')),
    timesvc,
  );
});

test('ports inside a config: port keys, *Ports objects and loopback URLs move; other numbers and hosts stay', () => {
  const config = {
    listen: { host: '0.0.0.0', port: 8600 },
    web: { http_port: 8080, workers: 4 },
    oscPorts: { a: 6250, b: 6251 },
    tslPorts: [4003],
    upstream: 'http://127.0.0.1:8787/api/health',
    remote: 'http://studio.example:8787/',
    devices: [{ tcpPort: 9993, timeoutMs: 5000 }],
    pollIntervalMs: 2000,
  };
  assert.deepEqual(shiftConfigPorts(config, 100), {
    listen: { host: '0.0.0.0', port: 8700 },
    web: { http_port: 8180, workers: 4 },
    oscPorts: { a: 6350, b: 6351 },
    tslPorts: [4103],
    upstream: 'http://127.0.0.1:8887/api/health',
    remote: 'http://studio.example:8787/',
    devices: [{ tcpPort: 10093, timeoutMs: 5000 }],
    pollIntervalMs: 2000,
  });
});

test("a service's environment: the user's variables override toolkit.start's defaults, except *_PORT", () => {
  const env = serviceEnv(
    { PUNCH_HOST: '127.0.0.1', PUNCH_PORT: '8787', PUNCH_MODE: 'demo' },
    { PUNCH_HOST: '0.0.0.0', PUNCH_PORT: '1', PATH: '/usr/bin', PUNCH_MODE: '' },
  );
  assert.equal(env['PUNCH_HOST'], '0.0.0.0');
  assert.equal(env['PUNCH_PORT'], '8787');
  // An empty variable counts as unset.
  assert.equal(env['PUNCH_MODE'], 'demo');
  assert.equal(env['PATH'], '/usr/bin');
});

test("the landing page's config: every other service with a health URL, its page, links, ports and demo figures", () => {
  const status: StackService = {
    ...timesvc,
    name: 'broadcast-ops-status',
    start: { ready: 'http://127.0.0.1:8600/' },
  };
  const noHealth: StackService = { ...timesvc, name: 'library-only', start: {} };
  const config = landingConfig(
    [status, timesvc, noHealth],
    8600,
    new Map([['timesvc', { metrics: 'http://127.0.0.1:8080/metrics' }]]),
  );
  assert.deepEqual(config['listen'], { host: '127.0.0.1', port: 8600 });
  const services = config['services'] as Record<string, unknown>[];
  assert.deepEqual(
    services.map((s) => s['name']),
    ['timesvc'],
  );
  const t = services[0] ?? {};
  assert.equal(t['kind'], 'timesvc');
  assert.equal(t['health'], 'http://127.0.0.1:8080/api/health');
  assert.equal(t['page'], 'http://127.0.0.1:8080/');
  assert.equal(t['metrics'], 'http://127.0.0.1:8080/metrics');
  assert.deepEqual(t['links'], [
    { label: 'Dashboard', url: 'http://127.0.0.1:8080/', page: true },
    { label: 'Client', url: 'http://127.0.0.1:8080/c/<name>', template: true },
  ]);
  assert.deepEqual(t['ports'], [
    { label: 'NTP', proto: 'udp', port: 11123, use: 'point NTP clients here' },
    { label: 'PTP', proto: 'udp', port: 319, outbound: true, use: 'sent to' },
  ]);
  assert.ok(Array.isArray(config['notes']) && config['notes'].length > 0);
});

test('console text: busy ports aligned with their service and the way out; the running list, templates left out', () => {
  const busy = busyPortsText(
    [
      { service: 'timesvc', label: 'Dashboard', proto: 'tcp', port: 8080 },
      { service: 'playout-monitor', label: 'OSC', proto: 'udp', port: 6250 },
    ],
    'Move every demo port: npm start -- --port-offset 1000',
  );
  assert.equal(
    busy,
    [
      'start-stack: ports in use by another program:',
      '  8080/tcp  timesvc          Dashboard',
      '  6250/udp  playout-monitor  OSC',
      'Move every demo port: npm start -- --port-offset 1000',
    ].join('\n'),
  );
  const text = runningText([{ service: timesvc, pid: 42, up: false }], 'http://127.0.0.1:8600/', 0, (u) =>
    u.label === 'Dashboard' ? `${u.url}#token=t` : u.url,
  );
  const lines = text.split('\n');
  assert.ok(
    lines.findIndex((l) => l.includes('Landing page')) < lines.findIndex((l) => l.includes('timesvc')),
  );
  assert.match(text, /^ {2}timesvc {2}NOT READY yet {2}\(pid 42, log data\/logs\/timesvc\.log\)$/m);
  assert.match(text, /^ {4}Dashboard +http:\/\/127\.0\.0\.1:8080\/#token=t$/m);
  assert.doesNotMatch(text, /<name>/);
  assert.match(text, /^ {4}NTP +udp 11123$/m);
  assert.match(text, /^ {4}PTP +udp 319 \(sent to\)$/m);
  assert.match(text, /Press Ctrl-C to stop\.$/);
});

test("the busy port named in a service's EADDRINUSE log line", () => {
  assert.equal(
    busyPortInLog('{"level":50,"msg":"listen EADDRINUSE: address already in use 127.0.0.1:8787"}\n'),
    '8787',
  );
  assert.equal(busyPortInLog('{"msg":"listening"}'), undefined);
});
