/**
 * NTS Key Establishment records (RFC 8915 §4): the record codec and the request/response rules, pure.
 * Wire form of a record: critical bit (1) | record type (15) | body length (u16, excludes the 4-byte
 * header) | body. See docs/nts.md "NTS-KE".
 */
import { decoded, reject, rejected, type DecodeError, type Decoded } from '@broadcast-ops/core/decoded';

export const NTS_KE_PORT = 4460;
export const NTS_KE_ALPN = 'ntske/1';
/** TLS exporter label and the 5-byte context of RFC 8915 §5.1. */
export const NTS_EXPORTER_LABEL = 'EXPORTER-network-time-security';
/** Next Protocol ID of NTPv4 (IANA "Network Time Security Next Protocols"). */
export const NEXT_PROTOCOL_NTPV4 = 0;
/** AEAD_AES_SIV_CMAC_256 (IANA AEAD registry), the one algorithm servers must support. */
export const AEAD_AES_SIV_CMAC_256 = 15;
/** Cookies handed out per NTS-KE response (RFC 8915 §4.1.6: SHOULD be 8). */
export const COOKIES_PER_RESPONSE = 8;
/** Request bytes a server accepts (RFC 8915 §4: at least 1024 must be accepted). */
export const NTS_KE_MAX_REQUEST = 16_384;

export const RECORD = {
  END_OF_MESSAGE: 0,
  NEXT_PROTOCOL: 1,
  ERROR: 2,
  WARNING: 3,
  AEAD: 4,
  NEW_COOKIE: 5,
  SERVER: 6,
  PORT: 7,
} as const;

/** Error codes of the Error record (RFC 8915 §4.1.3). */
export const KE_ERROR = { UNRECOGNIZED_CRITICAL: 0, BAD_REQUEST: 1, INTERNAL: 2 } as const;
export type KeErrorCode = (typeof KE_ERROR)[keyof typeof KE_ERROR];

export interface NtsKeRecord {
  readonly critical: boolean;
  readonly type: number;
  readonly body: Uint8Array;
}

export function encodeRecord(r: NtsKeRecord): Buffer {
  if (r.type < 0 || r.type > 0x7fff) throw new RangeError(`record type ${r.type} out of range`);
  if (r.body.length > 0xffff) throw new RangeError(`record body of ${r.body.length} bytes`);
  const out = Buffer.allocUnsafe(4 + r.body.length);
  out.writeUInt16BE((r.critical ? 0x8000 : 0) | r.type, 0);
  out.writeUInt16BE(r.body.length, 2);
  out.set(r.body, 4);
  return out;
}

export function encodeRecords(records: readonly NtsKeRecord[]): Buffer {
  return Buffer.concat(records.map(encodeRecord));
}

/** The records of one message so far (RFC 8915 §4: a message ends with an End of Message record). */
export type RecordFrame =
  /** End of Message seen: the records up to and including it, and the bytes it ended at. */
  | { complete: true; records: NtsKeRecord[]; length: number }
  /** No End of Message yet: more bytes may complete the message. */
  | { complete: false };

export type RecordScan = Decoded<RecordFrame, DecodeError<'eom-body' | 'after-eom'>>;

/**
 * Split bytes into records up to the End of Message record: a complete message, or not yet (more bytes may
 * complete it), or refused. Strict: EOM must have an empty body and nothing may follow it (a client sends
 * one message and waits, RFC 8915 §4). Never reads outside `buf`.
 */
export function scanRecords(buf: Uint8Array): RecordScan {
  const records: NtsKeRecord[] = [];
  let at = 0;
  while (at + 4 <= buf.length) {
    const word = ((buf[at] ?? 0) << 8) | (buf[at + 1] ?? 0);
    const length = ((buf[at + 2] ?? 0) << 8) | (buf[at + 3] ?? 0);
    if (at + 4 + length > buf.length) return decoded({ complete: false });
    const record = {
      critical: (word & 0x8000) !== 0,
      type: word & 0x7fff,
      body: buf.slice(at + 4, at + 4 + length),
    };
    records.push(record);
    at += 4 + length;
    if (record.type === RECORD.END_OF_MESSAGE) {
      if (length !== 0) return reject('eom-body', 'End of Message record with a body', at - 4 - length);
      if (at !== buf.length) return reject('after-eom', `${buf.length - at} bytes after End of Message`, at);
      return decoded({ complete: true, records, length: at });
    }
  }
  return decoded({ complete: false });
}

function u16List(body: Uint8Array): number[] | undefined {
  if (body.length % 2 !== 0) return undefined;
  const out: number[] = [];
  for (let i = 0; i < body.length; i += 2) out.push(((body[i] ?? 0) << 8) | (body[i + 1] ?? 0));
  return out;
}

export function u16Body(values: readonly number[]): Buffer {
  const out = Buffer.allocUnsafe(values.length * 2);
  values.forEach((v, i) => out.writeUInt16BE(v, i * 2));
  return out;
}

export interface KeRequest {
  readonly nextProtocols: readonly number[];
  readonly aeads: readonly number[];
  /** The client's preferred NTP server and port, if it sent them (informational). */
  readonly server?: string;
  readonly port?: number;
}

/**
 * Why a request was refused: `code` names the refusal (the server's failure counter label), `keError` is
 * the Error record's code the server answers with (RFC 8915 §4.1.3).
 */
export interface KeRequestError extends DecodeError<'unrecognized_critical' | 'bad_request'> {
  keError: KeErrorCode;
}

export type KeRequestResult = Decoded<KeRequest, KeRequestError>;

const KNOWN_TYPES = new Set<number>(Object.values(RECORD));

/**
 * Validate a client's request records (RFC 8915 §4.1). An unknown record with the critical bit set →
 * Error 0; a malformed, duplicated or forbidden record, or a missing Next Protocol → Error 1. Unknown
 * non-critical records are ignored. The critical bit of known records is not enforced (NTPsec sends the
 * AEAD record without it).
 */
export function parseKeRequest(records: readonly NtsKeRecord[]): KeRequestResult {
  const bad = (message: string): KeRequestResult =>
    rejected({ code: 'bad_request', message, keError: KE_ERROR.BAD_REQUEST });
  const seen = new Set<number>();
  let nextProtocols: number[] | undefined;
  let aeads: number[] | undefined;
  let server: string | undefined;
  let port: number | undefined;
  for (const [i, r] of records.entries()) {
    if (!KNOWN_TYPES.has(r.type)) {
      if (r.critical) {
        return rejected({
          code: 'unrecognized_critical',
          message: `unrecognised critical record ${r.type}`,
          keError: KE_ERROR.UNRECOGNIZED_CRITICAL,
        });
      }
      continue;
    }
    if (seen.has(r.type)) return bad(`record ${r.type} sent twice`);
    seen.add(r.type);
    switch (r.type) {
      case RECORD.END_OF_MESSAGE:
        if (i !== records.length - 1) return bad('End of Message is not the last record');
        break;
      case RECORD.NEXT_PROTOCOL:
        nextProtocols = u16List(r.body);
        if (nextProtocols === undefined) return bad('Next Protocol body of odd length');
        break;
      case RECORD.AEAD:
        aeads = u16List(r.body);
        if (aeads === undefined) return bad('AEAD Algorithm body of odd length');
        break;
      case RECORD.ERROR:
      case RECORD.WARNING:
        return bad('a request must not carry Error or Warning records');
      case RECORD.NEW_COOKIE:
        return bad('a request must not carry New Cookie records');
      case RECORD.SERVER:
        server = Buffer.from(r.body).toString('latin1');
        if (!/^[\x21-\x7e]{1,255}$/.test(server)) return bad('Server record is not an ASCII name or address');
        break;
      case RECORD.PORT:
        if (r.body.length !== 2) return bad('Port record body is not 2 bytes');
        port = ((r.body[0] ?? 0) << 8) | (r.body[1] ?? 0);
        break;
    }
  }
  if (!seen.has(RECORD.END_OF_MESSAGE)) return bad('no End of Message record');
  if (nextProtocols === undefined) return bad('no Next Protocol Negotiation record');
  if (nextProtocols.includes(NEXT_PROTOCOL_NTPV4) && aeads === undefined) {
    // RFC 8915 §4.1.5: with NTPv4 offered, the AEAD record must be present exactly once.
    return bad('NTPv4 offered without an AEAD Algorithm Negotiation record');
  }
  const request: KeRequest = { nextProtocols, aeads: aeads ?? [] };
  return decoded({
    ...request,
    ...(server === undefined ? {} : { server }),
    ...(port === undefined ? {} : { port }),
  });
}

export interface KeResponsePlan {
  readonly nextProtocols: readonly number[];
  /** The chosen AEAD, or undefined (then the AEAD record is sent empty and no cookies follow). */
  readonly aead: number | undefined;
}

/** The server's choice for a valid request: NTPv4 if offered, AEAD 15 if offered (RFC 8915 §4.1.2, §4.1.5). */
export function planKeResponse(request: KeRequest, supportedAeads: readonly number[]): KeResponsePlan {
  const ntp = request.nextProtocols.includes(NEXT_PROTOCOL_NTPV4);
  const aead = ntp ? request.aeads.find((a) => supportedAeads.includes(a)) : undefined;
  return { nextProtocols: ntp ? [NEXT_PROTOCOL_NTPV4] : [], aead };
}

/** The response records: Next Protocol, AEAD, Server/Port when given, cookies, End of Message. */
export function buildKeResponse(
  plan: KeResponsePlan,
  options: { cookies: readonly Uint8Array[]; server?: string | undefined; port?: number | undefined },
): Buffer {
  const records: NtsKeRecord[] = [
    { critical: true, type: RECORD.NEXT_PROTOCOL, body: u16Body(plan.nextProtocols) },
  ];
  if (plan.nextProtocols.includes(NEXT_PROTOCOL_NTPV4)) {
    records.push({
      critical: true,
      type: RECORD.AEAD,
      body: u16Body(plan.aead === undefined ? [] : [plan.aead]),
    });
    if (plan.aead !== undefined) {
      if (options.server !== undefined) {
        records.push({ critical: true, type: RECORD.SERVER, body: Buffer.from(options.server, 'latin1') });
      }
      if (options.port !== undefined) {
        records.push({ critical: true, type: RECORD.PORT, body: u16Body([options.port]) });
      }
      for (const c of options.cookies) records.push({ critical: false, type: RECORD.NEW_COOKIE, body: c });
    }
  }
  records.push({ critical: true, type: RECORD.END_OF_MESSAGE, body: new Uint8Array(0) });
  return encodeRecords(records);
}

/** An Error response: the Error record and End of Message (RFC 8915 §4.1.3). */
export function buildKeError(code: KeErrorCode): Buffer {
  return encodeRecords([
    { critical: true, type: RECORD.ERROR, body: u16Body([code]) },
    { critical: true, type: RECORD.END_OF_MESSAGE, body: new Uint8Array(0) },
  ]);
}

/** The client's request: NTPv4 and AEAD 15 (the form chrony and NTPsec send). */
export function buildKeRequest(aeads: readonly number[] = [AEAD_AES_SIV_CMAC_256]): Buffer {
  return encodeRecords([
    { critical: true, type: RECORD.NEXT_PROTOCOL, body: u16Body([NEXT_PROTOCOL_NTPV4]) },
    { critical: true, type: RECORD.AEAD, body: u16Body(aeads) },
    { critical: true, type: RECORD.END_OF_MESSAGE, body: new Uint8Array(0) },
  ]);
}

/** What a client takes from the server's response (RFC 8915 §4.1). */
export interface KeResponse {
  aead: number;
  cookies: Uint8Array[];
  server?: string;
  port?: number;
}

/** `server_error`/`server_warning`: the server sent an Error or Warning record; `bad_response`: any other fault. */
export type KeResponseResult = Decoded<
  KeResponse,
  DecodeError<'server_error' | 'server_warning' | 'bad_response'>
>;

/** A client's reading of the server's response (RFC 8915 §4.1). */
export function parseKeResponse(
  records: readonly NtsKeRecord[],
  offeredAeads: readonly number[],
): KeResponseResult {
  const fail = (message: string): KeResponseResult => reject('bad_response', message);
  const cookies: Uint8Array[] = [];
  let next: number[] | undefined;
  let aeads: number[] | undefined;
  let server: string | undefined;
  let port: number | undefined;
  for (const r of records) {
    switch (r.type) {
      case RECORD.END_OF_MESSAGE:
        break;
      case RECORD.NEXT_PROTOCOL:
        if (next !== undefined) return fail('Next Protocol twice');
        next = u16List(r.body);
        break;
      case RECORD.AEAD:
        if (aeads !== undefined) return fail('AEAD twice');
        aeads = u16List(r.body);
        break;
      case RECORD.ERROR:
        return reject('server_error', `server sent Error ${u16List(r.body)?.[0] ?? '?'}`);
      case RECORD.WARNING:
        return reject('server_warning', `server sent Warning ${u16List(r.body)?.[0] ?? '?'}`);
      case RECORD.NEW_COOKIE:
        if (r.body.length > 0) cookies.push(r.body);
        break;
      case RECORD.SERVER:
        server = Buffer.from(r.body).toString('latin1');
        break;
      case RECORD.PORT:
        if (r.body.length !== 2) return fail('Port record body is not 2 bytes');
        port = ((r.body[0] ?? 0) << 8) | (r.body[1] ?? 0);
        break;
      default:
        if (r.critical) return fail(`unrecognised critical record ${r.type}`);
    }
  }
  if (next?.length !== 1 || next[0] !== NEXT_PROTOCOL_NTPV4) return fail('server did not accept NTPv4');
  const aead = aeads?.[0];
  if (aeads?.length !== 1 || aead === undefined || !offeredAeads.includes(aead)) {
    return fail('server chose no AEAD algorithm that was offered');
  }
  if (cookies.length === 0) return fail('server sent no cookies');
  return decoded({
    aead,
    cookies,
    ...(server === undefined ? {} : { server }),
    ...(port === undefined ? {} : { port }),
  });
}

/** The 5-byte exporter context (RFC 8915 §5.1): protocol ID, AEAD ID, 0 = C2S / 1 = S2C. */
export function exporterContext(aead: number, direction: 'c2s' | 's2c'): Buffer {
  const ctx = Buffer.alloc(5);
  ctx.writeUInt16BE(NEXT_PROTOCOL_NTPV4, 0);
  ctx.writeUInt16BE(aead, 2);
  ctx[4] = direction === 'c2s' ? 0 : 1;
  return ctx;
}

/** Key length in bytes of the AEAD algorithms we implement (15, 16, 17: RFC 5297 §6). */
export function aeadKeyLength(aead: number): number | undefined {
  return aead === 15 ? 32 : aead === 16 ? 48 : aead === 17 ? 64 : undefined;
}
