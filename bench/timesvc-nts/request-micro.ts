/**
 * The JavaScript cost of answering one NTS-protected NTP request, in process (no sockets): the plain
 * responder, the NTS check (cookie open, C2S authenticator), the transmit timestamp and the sealed reply
 * (fresh cookies, S2C authenticator). For profiling (`node --cpu-prof --import tsx ...`) and for the
 * per-request figure in docs/performance.md; the socket cost is measured by bench/timesvc-nts/run.ts.
 *
 *   npx tsx bench/timesvc-nts/request-micro.ts [--ms 2000] [--plain [--in-place]] [--node-gcm] [--js-siv]
 */
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { respond, respondInto, OUTCOME, UNSYNCHRONISED_STATE, ServedClock } from '@broadcast-ops/timesvc';
import {
  NtsCookieJar,
  NtsResponder,
  NtsClientSession,
  AEAD_AES_SIV_CMAC_256,
  nativeCookieAead,
  nativeNtsSiv,
} from '@broadcast-ops/timesvc/testing';

const { values } = parseArgs({
  options: {
    ms: { type: 'string', default: '2000' },
    plain: { type: 'boolean', default: false },
    'node-gcm': { type: 'boolean', default: false },
    'in-place': { type: 'boolean', default: false },
    'js-siv': { type: 'boolean', default: false },
  },
});
const MS = Number(values.ms);
const jar = new NtsCookieJar({
  now: () => Date.now(),
  // As the service runs it (io/nts-service.ts): kept-key AES-GCM where the addon is built, unless --node-gcm.
  aead: values['node-gcm'] ? undefined : nativeCookieAead(),
});
const nts = new NtsResponder({
  cookies: jar,
  now: () => performance.now(),
  siv: values['js-siv'] ? undefined : nativeNtsSiv(),
});
const keys = { aead: AEAD_AES_SIV_CMAC_256, c2s: randomBytes(32), s2c: randomBytes(32) };
const POOL = 1024;
const requests: Buffer[] = [];
for (let i = 0; i < POOL; i++) {
  const cookies = Array.from({ length: 8 }, () => jar.seal(keys));
  const s = new NtsClientSession({ ...keys }, cookies);
  const h = Buffer.alloc(48);
  h[0] = 0x23;
  h.writeUInt32BE(i, 44);
  requests.push(values.plain ? h : s.wrap(h)!);
}
const state = { ...UNSYNCHRONISED_STATE, stratum: 8, leap: 0 };
const rx = { seconds: 1, fraction: 2 };
let bytes = 0;
const once = (i: number): void => {
  const msg = requests[i % POOL]!;
  const out = respond(msg, '127.0.1.1', rx, performance.now(), state, {});
  if (out.kind !== 'reply') throw new Error('no reply');
  const c = nts.check(msg);
  out.packet.writeUInt32BE(3, 40);
  if (c.kind === 'authentic') bytes += c.seal(out.packet).length;
  else if (c.kind === 'plain') bytes += out.packet.length;
  else throw new Error(`NTS check failed: ${c.kind}`);
};
// --plain: the batched socket path's per-request work instead (ntp-server.ts): the decision written into a
// preallocated send slot and the receive timestamp written in place, nothing allocated.
const clock = new ServedClock();
const slots = new Uint8Array(64 * 2048);
const records = new Uint8Array(64 * 24);
const inPlace = (i: number): void => {
  const msg = requests[i % POOL]!;
  const off = (i % 64) * 2048;
  const code = respondInto(msg, 0, msg.length, '', 1000, state, {}, slots, off, records, (i % 64) * 24);
  if (code !== OUTCOME.REPLY) throw new Error('no reply');
  clock.write(slots, off + 32, true, 1000);
  bytes += 48;
};
const batched = values.plain && values['in-place'];
for (let i = 0; i < 5000; i++) (batched ? inPlace : once)(i);
// CPU time of this process (user + system), not wall time: the machine is shared, and waiting for a core
// is not a cost of the request.
let n = 0;
const t0 = performance.now();
const cpu0 = process.cpuUsage();
const step = batched ? inPlace : once;
while (performance.now() - t0 < MS) for (let k = 0; k < 100; k++) step(n++);
const cpu = process.cpuUsage(cpu0);
const us = (cpu.user + cpu.system) / n;
console.log(
  `${values.plain ? (batched ? 'plain NTP (in place, batched path)' : 'plain NTP (respond(): new buffers, dgram path)') : `NTS (cookie AES-GCM: ${values['node-gcm'] ? 'node:crypto' : 'native kept-key'}; AES-SIV: ${values['js-siv'] ? 'hand-written' : 'OpenSSL'})`} request in process: ${us.toFixed(2)} µs CPU/request over ${n} ` +
    `(${bytes} reply bytes); load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
);
