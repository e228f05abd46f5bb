/**
 * Event-log record framing: `[u32 BE body length][u32 BE CRC-32 of body][body]`, body = UTF-8 JSON.
 * A crash can leave the last record short or with a wrong CRC; `scanRecords` stops there and reports the
 * byte offset of the last good record so the writer can truncate the tail and append cleanly.
 * Pure: bytes in, typed values out.
 */
import { crc32 } from 'node:zlib';

export const RECORD_HEADER_BYTES = 8;
/** A record body larger than this is treated as corruption, not allocated (bounds every read). */
export const MAX_RECORD_BODY_BYTES = 16 * 1024 * 1024;

export type LogKind = 'meta' | 'checkpoint' | 'state' | 'event' | 'command' | 'ack' | 'error';

/** One logged item. `m` is the envelope exactly as sent (kept as raw JSON text on the hot path). */
export interface LogRecord {
  /** Hub-wide offset (log sequence number); 0 for meta records. */
  o: number;
  /** Wall time of logging, Unix ms. */
  t: number;
  k: LogKind;
  m: unknown;
}

export function encodeRecordBody(body: string): Buffer {
  const bytes = Buffer.from(body, 'utf8');
  const out = Buffer.allocUnsafe(RECORD_HEADER_BYTES + bytes.length);
  out.writeUInt32BE(bytes.length, 0);
  out.writeUInt32BE(crc32(bytes), 4);
  bytes.copy(out, RECORD_HEADER_BYTES);
  return out;
}

/** Build the body text without re-serialising the envelope: it is spliced in as already-serialised JSON. */
export function recordBodyText(offset: number, time: number, kind: LogKind, envelopeJson: string): string {
  return `{"o":${offset},"t":${time},"k":"${kind}","m":${envelopeJson}}`;
}

export function encodeRecord(record: LogRecord): Buffer {
  return encodeRecordBody(recordBodyText(record.o, record.t, record.k, JSON.stringify(record.m)));
}

export interface DecodeResult {
  records: LogRecord[];
  /** Bytes of `buf` covered by complete, valid records. */
  goodBytes: number;
  /** Why decoding stopped before the end of `buf`, if it did. */
  stopReason?:
    | 'short-header'
    | 'short-body'
    | 'too-large'
    | 'crc-mismatch'
    | 'bad-json'
    | 'rejected'
    /** Only zero bytes from here to the end: preallocated space, no record was ever written there. */
    | 'zero-fill';
}

/** Compared a chunk at a time (`Buffer.compare`, a memcmp): allocated once, on the first zero tail. */
let zeroChunk: Buffer | undefined;

/**
 * Only zeros from `pos` to the end. A segment a crash left open ends in up to one preallocation step of
 * zeros (4 MiB, io/event-log.ts); read a byte at a time by the start's unoptimised code, that tail cost
 * about 75 ms of every restart after a crash (docs/performance.md "Event log").
 */
function zerosFrom(buf: Buffer, pos: number): boolean {
  zeroChunk ??= Buffer.alloc(64 * 1024);
  for (let at = pos; at < buf.length; at += zeroChunk.length) {
    const end = Math.min(buf.length, at + zeroChunk.length);
    if (buf.compare(zeroChunk, 0, end - at, at, end) !== 0) return false;
  }
  return true;
}

function isLogRecord(v: unknown): v is LogRecord {
  if (v === null || typeof v !== 'object') return false;
  const r = v as Record<string, unknown>;
  return typeof r['o'] === 'number' && typeof r['t'] === 'number' && typeof r['k'] === 'string' && 'm' in r;
}

/**
 * Scan records from the start of `buf`, stopping at the first one that is torn, damaged, or refused by
 * `accept` (called with each valid record and its index; the caller's own consistency rules).
 */
export function scanRecords(
  buf: Buffer,
  accept?: (record: LogRecord, index: number) => boolean,
): DecodeResult {
  const records: LogRecord[] = [];
  let pos = 0;
  while (pos < buf.length) {
    if (buf.length - pos < RECORD_HEADER_BYTES)
      return { records, goodBytes: pos, stopReason: zerosFrom(buf, pos) ? 'zero-fill' : 'short-header' };
    const len = buf.readUInt32BE(pos);
    const crc = buf.readUInt32BE(pos + 4);
    // No record has an empty body, so a zero header starts unused space, if only zeros follow.
    if (len === 0 && crc === 0 && zerosFrom(buf, pos))
      return { records, goodBytes: pos, stopReason: 'zero-fill' };
    if (len > MAX_RECORD_BODY_BYTES) return { records, goodBytes: pos, stopReason: 'too-large' };
    if (buf.length - pos - RECORD_HEADER_BYTES < len)
      return { records, goodBytes: pos, stopReason: 'short-body' };
    const body = buf.subarray(pos + RECORD_HEADER_BYTES, pos + RECORD_HEADER_BYTES + len);
    if (crc32(body) !== crc) return { records, goodBytes: pos, stopReason: 'crc-mismatch' };
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      return { records, goodBytes: pos, stopReason: 'bad-json' };
    }
    if (!isLogRecord(parsed)) return { records, goodBytes: pos, stopReason: 'bad-json' };
    if (accept && !accept(parsed, records.length)) return { records, goodBytes: pos, stopReason: 'rejected' };
    records.push(parsed);
    pos += RECORD_HEADER_BYTES + len;
  }
  return { records, goodBytes: pos };
}
