import { randomBytes } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { isIP } from 'node:net';
import { lookup } from 'node:dns/promises';
import {
  MODE,
  decodeNtpPacket,
  kissCode,
  refIdToAscii,
  refIdToIpv4,
  shortToSeconds,
  timestampDiffSeconds,
  timestampsEqual,
  unixToNtp,
  type NtpPacket,
  type NtpTimestamp,
} from '../protocol/ntp-packet.ts';

export interface QueryResult {
  offsetS: number;
  delayS: number;
  stratum: number;
  leap: number;
  version: number;
  poll: number;
  precision: number;
  refId: string;
  rootDelayS: number;
  rootDispersionS: number;
  kiss?: string;
  packet: NtpPacket;
}

/**
 * One SNTP exchange (RFC 4330 style) for the CLI and tests: random transmit timestamp as a nonce, reply
 * accepted only if its origin matches it bit for bit. Local time is Date.now()-based (ms), adequate for a
 * diagnostic; the server itself uses the high-resolution clock.
 */
export async function queryServer(
  host: string,
  port: number,
  timeoutMs = 2000,
  options: { version?: number; poll?: number; localAddress?: string } = {},
): Promise<QueryResult> {
  const address = isIP(host) ? host : (await lookup(host)).address;
  const socket = createSocket(isIP(address) === 6 ? 'udp6' : 'udp4');
  try {
    // A socket 'error' without a listener would be thrown out of the event loop and end the process: bind
    // and exchange errors fail this query instead.
    if (options.localAddress) {
      await new Promise<void>((resolve, reject) => {
        socket.once('error', reject);
        socket.bind(0, options.localAddress, () => {
          socket.removeListener('error', reject);
          resolve();
        });
      });
    }
    const req = Buffer.alloc(48);
    req[0] = ((options.version ?? 4) << 3) | MODE.CLIENT;
    req[2] = options.poll ?? 6;
    const nonce = randomBytes(8);
    req.set(nonce, 40);
    const xmt: NtpTimestamp = { seconds: nonce.readUInt32BE(0), fraction: nonce.readUInt32BE(4) };
    const t1Ms = performance.timeOrigin + performance.now();
    const reply = await new Promise<{ packet: NtpPacket; t4Ms: number }>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no reply from ${address}:${port} in ${timeoutMs} ms`)),
        timeoutMs,
      );
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      socket.on('message', (msg) => {
        const t4Ms = performance.timeOrigin + performance.now();
        const d = decodeNtpPacket(msg);
        // Anything that does not decode, or answers another request, is not ours.
        if (d.ok && timestampsEqual(d.value.originTimestamp, xmt)) {
          clearTimeout(timer);
          resolve({ packet: d.value, t4Ms });
        }
      });
      socket.send(req, port, address, (err) => {
        if (err) {
          clearTimeout(timer);
          reject(err);
        }
      });
    });
    const p = reply.packet;
    const t1 = toNtp(t1Ms);
    const t4 = toNtp(reply.t4Ms);
    const t21 = timestampDiffSeconds(p.receiveTimestamp, t1);
    const t34 = timestampDiffSeconds(p.transmitTimestamp, t4);
    const kiss = kissCode(p);
    const result: QueryResult = {
      offsetS: (t21 + t34) / 2,
      delayS: t21 - t34,
      stratum: p.stratum,
      leap: p.leap,
      version: p.version,
      poll: p.poll,
      precision: p.precision,
      refId: p.stratum <= 1 ? refIdToAscii(p.referenceId) : refIdToIpv4(p.referenceId),
      rootDelayS: shortToSeconds(p.rootDelay),
      rootDispersionS: shortToSeconds(p.rootDispersion),
      packet: p,
    };
    return kiss === undefined ? result : { ...result, kiss };
  } finally {
    socket.close();
  }
}

function toNtp(unixMs: number): NtpTimestamp {
  const s = Math.floor(unixMs / 1000);
  return unixToNtp(s, (unixMs - s * 1000) * 1e6);
}
