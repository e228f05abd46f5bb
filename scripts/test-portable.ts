/**
 * The portability set: the integration files that every Node line runs, beside the whole quick tier
 * (README "Node.js versions and the test matrix"). This machine's line runs every test; the other lines run
 * the quick tier and these files, each chosen because what it proves depends on the runtime: a native addon
 * compiled for that Node's ABI, the built-in SQLite driver, OpenSSL and TLS, the `ws`/fastify/undici stack,
 * dgram and TCP sockets, file durability, signals and child processes, and the whole stack started with
 * `npm start`'s launcher. Behaviour that does not change with the runtime (a state machine on real time, a
 * device's recovery, a hostile consumer's bounds) is proven once, on this machine's line.
 *
 * scripts/test/app/test-portable.test.ts fails when an entry names no integration-tier file.
 */
export const PORTABLE: Readonly<Record<string, string>> = {
  // The toolkit as a whole
  'scripts/test/io/start-stack.test.ts': 'the launcher starts every service on this Node (npm start)',
  'scripts/test/io/cli-help.test.ts': "every CLI's --help and --version on this Node",
  'scripts/test/io/http-edge-parity.test.ts': 'the four HTTP apps (fastify) answer bad requests alike',
  'scripts/test/io/tap-summary.test.ts': "this Node's test runner's TAP read back by the matrix",
  'packages/core/test/io/shutdown.test.ts': 'signals and graceful shutdown',
  'packages/status/test/io/status-service.test.ts': 'the status page polling the services (fetch/undici)',
  'packages/simulators/test/io/companion-sim.test.ts': 'the Companion simulator over TCP',
  // punch
  'packages/punch/test/io/sqlite-driver.test.ts':
    'the SQLite driver this Node chooses (node:sqlite from 22.13)',
  'packages/punch/test/io/restart.test.ts': "sessions kept across a restart on this Node's SQLite driver",
  'packages/punch/test/io/durability.test.ts': 'the store on disk',
  'packages/punch/test/io/http-api.test.ts': 'the REST API',
  'packages/punch/test/io/ws-signalling.test.ts': 'signalling over ws',
  'packages/punch/test/io/tls.test.ts': "TLS with this Node's OpenSSL",
  'packages/punch/test/io/ws-tls.test.ts': 'WebSocket over TLS',
  'packages/punch/test/io/relay-udp.test.ts': 'the relay on dgram',
  'packages/punch/test/io/redis-store.test.ts': 'the Redis store (ioredis)',
  // telemetry-bridge
  'packages/telemetry-bridge/test/io/app.test.ts': 'the bridge app',
  'packages/telemetry-bridge/test/io/hub.test.ts': 'the hub over ws',
  'packages/telemetry-bridge/test/io/transport.test.ts': 'the client transport, ping/pong and bounds in ws',
  'packages/telemetry-bridge/test/io/companion-e2e.test.ts': 'the Satellite API link over TCP',
  'packages/telemetry-bridge/test/io/event-log.test.ts': 'the event log on disk (fsync, rename)',
  // playout-monitor
  'packages/playout-monitor/test/io/app.test.ts': 'the playout app',
  'packages/playout-monitor/test/io/hyperdeck.test.ts': 'a device link over TCP',
  'packages/playout-monitor/test/io/vmix.test.ts': 'the vMix poll over HTTP',
  'packages/playout-monitor/test/io/outputs-emberplus.test.ts': 'the Ember+ provider',
  'packages/playout-monitor/test/io/outputs-tsl-umd.test.ts': 'TSL UMD v5 over UDP and TCP',
  // timesvc
  'packages/timesvc/test/io/app.test.ts': 'the timesvc app',
  'packages/timesvc/test/io/ntp-server.test.ts': 'the NTP server on dgram',
  'packages/timesvc/test/io/ntp-batch-socket.test.ts':
    "the batched-socket addon, compiled for this Node's ABI",
  'packages/timesvc/test/io/ntp-native-responder.test.ts': 'the native NTP responder thread',
  'packages/timesvc/test/io/ntp-native-nts.test.ts': 'the native NTS responder (AEAD in C)',
  'packages/timesvc/test/io/kernel-rx-timestamp.test.ts': 'kernel receive timestamps through the addon',
  'packages/timesvc/test/io/kernel-tx-timestamp.test.ts': 'kernel transmit timestamps through the addon',
  'packages/timesvc/test/io/nts-server.test.ts': "NTS-KE: TLS 1.3 key export with this Node's OpenSSL",
  'packages/timesvc/test/io/ptp-listener.test.ts': 'PTP multicast on dgram',
};
