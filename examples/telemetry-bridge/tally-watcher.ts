/**
 * Example client app for the telemetry bridge, built on the typed client library.
 *
 * It subscribes to every key (snapshot first), prints each change on one line, marks the values the hub
 * reports stale, publishes its own heartbeat under `app.<name>.custom.heartbeat` every second, and survives a
 * bridge restart or a dropped connection: the library reconnects and re-subscribes from the position it has
 * actually received (the last `snapshot_complete` or message), and the hub replays the gap. When it cannot
 * (the bridge restarted uncleanly, or the gap is older than its replay ring) the app is told
 * `recoveryFailed`: it forgets what it had and rebuilds from the fresh snapshot that follows.
 *
 *   npm start                                   # or: npx telemetry-bridge --config config/telemetry-bridge.demo.json
 *   npx tsx examples/telemetry-bridge/tally-watcher.ts [--url ws://127.0.0.1:8765/] [--name tally] [--token T]
 *                                                      [--pattern '**'] [--press companion.page.1.bank.1]
 */
import { parseArgs } from 'node:util';
import { BridgeClient } from '@broadcast-ops/bridge-client';

const { values } = parseArgs({
  options: {
    url: { type: 'string', default: 'ws://127.0.0.1:8765/' },
    name: { type: 'string', default: 'tally-watcher' },
    token: { type: 'string' },
    pattern: { type: 'string', default: '**' },
    press: { type: 'string' },
    seconds: { type: 'string' },
  },
});

const client = new BridgeClient({
  url: values.url,
  name: values.name,
  version: '1.0.0',
  ...(values.token === undefined ? {} : { authToken: values.token }),
  reconnect: { initialDelayMs: 500, maxDelayMs: 10_000 },
});

const shown = (v: unknown): string => {
  const s = JSON.stringify(v);
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
};

/** The app's view: latest value per key. */
const view = new Map<string, unknown>();

client.on('connected', (i) => {
  const at = client.positions()[0]?.position;
  console.log(
    `connected as ${i.namespace}${i.reconnect ? ` (reconnected; resuming after offset ${at ? String(at.offset) : '-'})` : ''}`,
  );
});
client.on('disconnected', (i) => {
  console.log(
    `disconnected (${i.code}${i.reason ? ' ' + i.reason : ''})${i.willReconnect ? ', reconnecting' : ''}`,
  );
});
client.on('state', (m) => {
  const p = m.payload;
  if (p.value === null) view.delete(m.path);
  else view.set(m.path, p.value);
  console.log(
    `${String(m.offset ?? '-').padStart(6)} ${m.path.padEnd(48)} ${shown(p.value)}${p.stale ? '  [stale]' : ''}`,
  );
});
client.on('event', (m) => {
  if (m.source !== 'hub.core')
    console.log(`${String(m.offset ?? '-').padStart(6)} ${m.path.padEnd(48)} event ${m.payload.event}`);
});
client.on('snapshotComplete', (i) => {
  console.log(
    i.replayed === undefined
      ? `-- snapshot complete (${view.size} keys) --`
      : `-- resumed: ${i.replayed} missed messages replayed (${view.size} keys) --`,
  );
});
client.on('recoveryFailed', (i) => {
  // The view may hold keys deleted meanwhile: start again from the snapshot that follows.
  view.clear();
  console.log(`-- could not resume (${i.reason}); fresh snapshot follows --`);
});
client.on('subscriptionLost', (i) => {
  console.log(`-- the bridge refused ${i.patterns.join(', ')} after a reconnect (${i.code}) --`);
});
client.on('listenerError', (i) => {
  console.log(
    `-- a ${i.event} handler failed: ${i.error instanceof Error ? i.error.message : String(i.error)} --`,
  );
});
client.on('gap', (i) => {
  console.log(`-- the bridge coalesced ${i.dropped} superseded updates (this app was reading too slowly) --`);
});

await client.connect();
await client.subscribe([values.pattern], { snapshot: true });

if (values.press !== undefined) {
  const target = values.press.split('.')[0] ?? 'companion';
  const cmd = client.command(target, values.press, 'press', {}, { ttl: 5000 });
  cmd.done.then(
    (ack) => {
      console.log(`press ${ack.payload.status}${ack.payload.error ? ': ' + ack.payload.error.message : ''}`);
    },
    (err: unknown) => {
      console.log(`press refused: ${err instanceof Error ? err.message : String(err)}`);
    },
  );
}

let beats = 0;
const heartbeat = setInterval(() => {
  if (!client.connected) return;
  client.setState('heartbeat', { beats: ++beats, at: new Date().toISOString() }).catch(() => undefined);
}, 1000);

const stop = (): void => {
  clearInterval(heartbeat);
  void client.close().then(() => process.exit(0));
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
if (values.seconds !== undefined) setTimeout(stop, Number(values.seconds) * 1000);
