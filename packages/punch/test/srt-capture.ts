import { execFileSync } from 'node:child_process';

/**
 * What a capture through the relay shows of an encrypted SRT link: every UDP payload to or from the given
 * ports in a pcap file (read with tshark), sorted into control and data packets by the SRT header's F bit,
 * data packets checked for their encryption flags and for plaintext MPEG-TS.
 */
export interface SrtCapture {
  datagrams: number;
  /** SRT data packets, those with the KK encryption flags set, those whose payload is plaintext TS. */
  data: number;
  encrypted: number;
  plaintextTs: number;
}

/** Whole 188-byte MPEG-TS packets, each starting with the sync byte 0x47 (ISO/IEC 13818-1, 2.4.3.2). */
export const looksLikeTs = (p: Buffer): boolean =>
  p.length >= 188 && p.length % 188 === 0 && p.every((_, i) => i % 188 !== 0 || p[i] === 0x47);

export function readSrtCapture(pcap: string, ports: readonly number[]): SrtCapture {
  const lines = execFileSync(
    'tshark',
    [
      ...['-r', pcap, '-Y', ports.map((p) => `udp.port == ${p}`).join(' || ')],
      ...['-T', 'fields', '-e', 'udp.payload'],
    ],
    { encoding: 'utf8', maxBuffer: 128 * 1024 * 1024, stdio: ['ignore', 'pipe', 'pipe'] },
  )
    .split('\n')
    .filter(Boolean);
  const result: SrtCapture = { datagrams: lines.length, data: 0, encrypted: 0, plaintextTs: 0 };
  for (const hex of lines) {
    const pkt = Buffer.from(hex.replace(/:/g, ''), 'hex');
    if (pkt.length < 16 || (pkt[0] ?? 0) & 0x80) continue; // a control packet (handshake, ACK, NAK, keepalive)
    result.data++;
    // SRT data packet header (draft-sharabayko-srt, section 3.1): word 1 = PP(2) O(1) KK(2) R(1) msgno(26).
    const kk = ((pkt[4] ?? 0) >> 3) & 0x3;
    if (kk !== 0) result.encrypted++;
    if (looksLikeTs(pkt.subarray(16))) result.plaintextTs++;
  }
  return result;
}
