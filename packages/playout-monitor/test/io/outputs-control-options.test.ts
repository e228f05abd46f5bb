// Control page, the operator's missing controls: every input option set through the control API with strict
// validation, a second device on an address already in use refused (409), and a failed connection test that
// names its cause, each against a real socket on 127.0.0.1:0 (refused, silent, HTTP 401, TLS).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createTcpServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { createServer as createTlsServer } from 'node:tls';
import { after, before, test } from 'node:test';
import { loadMonitorConfig } from '../../src/config.ts';
import { startRig, until, type Rig } from '../outputs/helpers.ts';

const TOKEN = 'test-admin-token-0123456789';
// Test-only pair committed with punch (its README names how it was made).
const TLS_DIR = join(import.meta.dirname, '../../../punch/test/fixtures/tls');
let rig: Rig;
const servers: Server[] = [];
const sockets = new Set<Socket>();

async function listen(server: Server): Promise<number> {
  servers.push(server);
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  assert.ok(address && typeof address === 'object');
  return address.port;
}

before(async () => {
  rig = await startRig(1, {}, { adminToken: TOKEN });
  await until(() => rig.service.view.get(1)?.connected || undefined, 5000, 'deck 1 connected');
});
after(async () => {
  for (const s of sockets) s.destroy();
  for (const s of servers) s.close();
  await rig?.close();
});

async function call(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown> | undefined }> {
  const res = await fetch(rig.url + path, {
    method,
    headers: {
      authorization: `Bearer ${TOKEN}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
}

test('every CasparCG input option is set, saved and strictly validated', async () => {
  const r = await call('POST', '/api/devices', {
    name: 'Caspar 2',
    type: 'osc_player',
    ip: '127.0.0.1',
    port: 0,
    channel: 2,
    layer: 20,
    videoFormat: '1080i5000',
  });
  assert.equal(r.status, 201, JSON.stringify(r.json));
  const id = r.json?.['id'] as number;
  const saved = loadMonitorConfig({ file: rig.configPath }).servers.find((s) => s.id === id);
  assert.equal(saved?.type, 'osc_player');
  assert.ok(saved?.type === 'osc_player');
  assert.equal(saved.channel, 2);
  assert.equal(saved.layer, 20);
  assert.equal(saved.videoFormat, '1080i5000');
  for (const [patch, field] of [
    [{ videoFormat: '1080x50' }, 'videoFormat'],
    [{ channel: 0 }, 'channel'],
    [{ layer: 'ten' }, 'layer'],
    [{ layerz: 1 }, 'layerz'],
  ] as const) {
    const bad = await call('PATCH', `/api/devices/${id}`, patch);
    assert.equal(bad.status, 400, JSON.stringify(patch));
    assert.match(JSON.stringify(bad.json), new RegExp(field));
  }
  const ok = await call('PATCH', `/api/devices/${id}`, { layer: 30, videoFormat: '720p5994' });
  assert.equal(ok.status, 200, JSON.stringify(ok.json));
  assert.equal(ok.json?.['layer'], 30);
  assert.equal((await call('DELETE', `/api/devices/${id}`)).status, 204);
});

test('vMix credentials are set, never echoed, and kept on a partial change', async () => {
  const r = await call('POST', '/api/devices', {
    name: 'Mixer',
    type: 'http_mixer',
    ip: '127.0.0.1',
    port: 1,
    username: 'operator',
    password: 'pa55-secret',
  });
  assert.equal(r.status, 201, JSON.stringify(r.json));
  const id = r.json?.['id'] as number;
  assert.ok(!JSON.stringify(r.json).includes('pa55-secret'), 'the password is not echoed');
  assert.ok(!JSON.stringify((await call('GET', '/api/config')).json).includes('pa55-secret'));
  assert.equal((await call('PATCH', `/api/devices/${id}`, { name: 'Mixer A' })).status, 200);
  const saved = loadMonitorConfig({ file: rig.configPath }).servers.find((s) => s.id === id);
  assert.ok(saved?.type === 'http_mixer');
  assert.equal(saved.username, 'operator');
  assert.equal(saved.password, 'pa55-secret', 'kept on a change that does not name it');
  const bad = await call('PATCH', `/api/devices/${id}`, { password: 'x'.repeat(257) });
  assert.equal(bad.status, 400);
  assert.equal((await call('DELETE', `/api/devices/${id}`)).status, 204);
});

test('a second device on an address already used is refused with the address and the device named', async () => {
  const deck = rig.service.config.servers[0];
  assert.ok(deck);
  const before = readFileSync(rig.configPath, 'utf8');
  const r = await call('POST', '/api/devices', {
    name: 'Same deck',
    type: 'tcp_recorder',
    ip: '127.0.0.1',
    port: deck.port,
  });
  assert.equal(r.status, 409, JSON.stringify(r.json));
  assert.equal(r.json?.['error'], 'DEVICE_CONFLICT');
  assert.match(String(r.json?.['message']), new RegExp(`127\\.0\\.0\\.1:${deck.port}.*device 1`));
  assert.equal(readFileSync(rig.configPath, 'utf8'), before, 'nothing saved');
  assert.equal(rig.service.config.servers.length, 1, 'nothing applied');
  // Moving another device onto it is refused too; a vMix on the same host but another port is fine.
  const other = await call('POST', '/api/devices', {
    name: 'Mixer',
    type: 'http_mixer',
    ip: '127.0.0.1',
    port: 2,
  });
  assert.equal(other.status, 201);
  const moved = await call('PATCH', `/api/devices/${String(other.json?.['id'])}`, { port: deck.port });
  assert.equal(moved.status, 409);
  assert.equal((await call('DELETE', `/api/devices/${String(other.json?.['id'])}`)).status, 204);
  // Two channels of one CasparCG server are two devices; the same channel and layer twice is not.
  const c1 = await call('POST', '/api/devices', {
    name: 'C1',
    type: 'osc_player',
    ip: '10.0.0.9',
    channel: 1,
  });
  const c2 = await call('POST', '/api/devices', {
    name: 'C2',
    type: 'osc_player',
    ip: '10.0.0.9',
    channel: 2,
  });
  const c3 = await call('POST', '/api/devices', {
    name: 'C3',
    type: 'osc_player',
    ip: '10.0.0.9',
    channel: 2,
  });
  assert.deepEqual([c1.status, c2.status, c3.status], [201, 201, 409], JSON.stringify([c1.json, c2.json]));
  assert.match(String(c3.json?.['message']), /channel 2, layer 10/);
  for (const c of [c1, c2])
    assert.equal((await call('DELETE', `/api/devices/${String(c.json?.['id'])}`)).status, 204);
  // The configuration file is held to the same rule.
  assert.throws(
    () =>
      loadMonitorConfig({
        data: {
          settings: {},
          servers: [
            { id: 1, name: 'A', type: 'http_mixer', ip: 'Mixer.local' },
            { id: 2, name: 'B', type: 'http_mixer', ip: 'mixer.local', port: 8088 },
          ],
        },
      }),
    /already used by device 1/,
  );
});

interface Outcome {
  ok: boolean;
  cause?: string;
  detail: string;
}

async function probe(type: string, port: number, extra: Record<string, unknown> = {}): Promise<Outcome> {
  const r = await call('POST', '/api/test', { type, ip: '127.0.0.1', port, ...extra });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  return r.json as unknown as Outcome;
}

test('a failed connection test names the cause: refused, timeout, 401, TLS', async () => {
  // Refused: a port that was just free (listened on, then closed).
  const gone = createTcpServer();
  const refusedPort = await listen(gone);
  await new Promise<void>((resolve) => gone.close(() => resolve()));
  for (const type of ['http_mixer', 'tcp_recorder']) {
    const r = await probe(type, refusedPort);
    assert.equal(r.ok, false);
    assert.equal(r.cause, 'refused', `${type}: ${r.detail}`);
    assert.match(r.detail, new RegExp(`refused.*127\\.0\\.0\\.1:${refusedPort}`));
  }

  // Timeout: a TCP listener that accepts and never says anything.
  const silentPort = await listen(createTcpServer(() => undefined));
  for (const type of ['http_mixer', 'tcp_recorder']) {
    const r = await probe(type, silentPort);
    assert.equal(r.cause, 'timeout', `${type}: ${r.detail}`);
    assert.match(r.detail, /timeout/);
  }

  // 401: an HTTP server that wants Basic credentials; without them, and with wrong ones.
  const http = createHttpServer((_req, res) => {
    res.writeHead(401, { 'www-authenticate': 'Basic realm="vMix"' }).end('Unauthorized');
  });
  servers.push(http);
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const httpPort = (http.address() as { port: number }).port;
  const anonymous = await probe('http_mixer', httpPort);
  assert.equal(anonymous.cause, 'unauthorized');
  assert.match(anonymous.detail, /401.*username and password/);
  const wrong = await probe('http_mixer', httpPort, { username: 'op', password: 'nope' });
  assert.equal(wrong.cause, 'unauthorized');
  assert.match(wrong.detail, /401.*refused the username "op"/);
  assert.ok(!wrong.detail.includes('nope'), 'the password is never shown');
  http.closeAllConnections();

  // TLS: a TLS server where plain HTTP (vMix) or plain TCP (HyperDeck) is expected.
  const tlsPort = await listen(
    createTlsServer({
      key: readFileSync(join(TLS_DIR, 'key.pem')),
      cert: readFileSync(join(TLS_DIR, 'cert.pem')),
    }),
  );
  for (const type of ['http_mixer', 'tcp_recorder']) {
    const r = await probe(type, tlsPort);
    assert.equal(r.cause, 'tls', `${type}: ${r.detail}`);
    assert.match(r.detail, /TLS mismatch/);
  }
});
