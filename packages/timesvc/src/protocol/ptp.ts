/**
 * PTP message codec, IEEE 1588-2008 §13 (layouts as in linuxptp `msg.h`): the 34-byte common header and
 * the bodies of Sync, Delay_Req, Pdelay_Req, Pdelay_Resp, Follow_Up, Delay_Resp, Pdelay_Resp_Follow_Up and
 * Announce. Pure; decoding never throws and checks messageLength exactly against the PDU (ptp4l rejects any
 * other length, linuxptp `msg.c` `msg_post_recv`). Multi-byte fields are big-endian.
 */
import { decoded, reject, type DecodeError, type Decoded } from '@broadcast-ops/core/decoded';

export const MSG = {
  SYNC: 0x0,
  DELAY_REQ: 0x1,
  PDELAY_REQ: 0x2,
  PDELAY_RESP: 0x3,
  FOLLOW_UP: 0x8,
  DELAY_RESP: 0x9,
  PDELAY_RESP_FOLLOW_UP: 0xa,
  ANNOUNCE: 0xb,
  SIGNALING: 0xc,
  MANAGEMENT: 0xd,
} as const;
export type MessageType = (typeof MSG)[keyof typeof MSG];

/** Exact PDU length per message type (§13.5–13.11), without TLVs. */
export const LENGTH: Record<number, number> = {
  [MSG.SYNC]: 44,
  [MSG.DELAY_REQ]: 44,
  [MSG.PDELAY_REQ]: 54,
  [MSG.PDELAY_RESP]: 54,
  [MSG.FOLLOW_UP]: 44,
  [MSG.DELAY_RESP]: 54,
  [MSG.PDELAY_RESP_FOLLOW_UP]: 54,
  [MSG.ANNOUNCE]: 64,
  // Header + targetPortIdentity, startingBoundaryHops, boundaryHops, actionField, reserved (§15.4.1).
  [MSG.MANAGEMENT]: 48,
};

/** controlField (§13.3.2.10, kept for IEEE 1588-2002 compatibility). */
export const CONTROL: Record<number, number> = {
  [MSG.SYNC]: 0,
  [MSG.DELAY_REQ]: 1,
  [MSG.FOLLOW_UP]: 2,
  [MSG.DELAY_RESP]: 3,
  [MSG.MANAGEMENT]: 4,
};

/** flagField octet 0 and 1 bits (§13.3.2.6; linuxptp msg.h). */
export const FLAG0 = { ALTERNATE_MASTER: 0x01, TWO_STEP: 0x02, UNICAST: 0x04 } as const;
export const FLAG1 = {
  LEAP_61: 0x01,
  LEAP_59: 0x02,
  UTC_OFFSET_VALID: 0x04,
  PTP_TIMESCALE: 0x08,
  TIME_TRACEABLE: 0x10,
  FREQUENCY_TRACEABLE: 0x20,
} as const;

/** timeSource enumeration (§7.6.2.6). */
export const TIME_SOURCE = {
  ATOMIC_CLOCK: 0x10,
  GPS: 0x20,
  TERRESTRIAL_RADIO: 0x30,
  PTP: 0x40,
  NTP: 0x50,
  HAND_SET: 0x60,
  OTHER: 0x90,
  INTERNAL_OSCILLATOR: 0xa0,
} as const;

/** logMessageInterval for messages that have none (§13.3.2.11 Table 24). */
export const LOG_INTERVAL_NONE = 0x7f;

/** UDP/IPv4 mapping (IEEE 1588-2008 Annex D). */
export const PTP_PRIMARY_GROUP = '224.0.1.129';
export const PTP_PDELAY_GROUP = '224.0.0.107';
export const EVENT_PORT = 319;
export const GENERAL_PORT = 320;

export interface PortIdentity {
  /** 8 bytes, as 16 lower-case hex digits. */
  clockIdentity: string;
  portNumber: number;
}

/** A PTP timestamp: 48-bit seconds and nanoseconds. */
export interface PtpTimestamp {
  seconds: number;
  nanoseconds: number;
}

export interface PtpHeader {
  transportSpecific: number;
  messageType: number;
  versionPtp: number;
  messageLength: number;
  domainNumber: number;
  flags: [number, number];
  /** Nanoseconds × 2^16, signed 64-bit. */
  correction: bigint;
  sourcePortIdentity: PortIdentity;
  sequenceId: number;
  controlField: number;
  logMessageInterval: number;
}

export interface AnnounceBody {
  originTimestamp: PtpTimestamp;
  currentUtcOffset: number;
  grandmasterPriority1: number;
  clockClass: number;
  clockAccuracy: number;
  offsetScaledLogVariance: number;
  grandmasterPriority2: number;
  grandmasterIdentity: string;
  stepsRemoved: number;
  timeSource: number;
}

export type PtpMessage =
  | { header: PtpHeader; type: 'sync' | 'delay_req' | 'follow_up' | 'pdelay_req'; timestamp: PtpTimestamp }
  | {
      header: PtpHeader;
      type: 'delay_resp' | 'pdelay_resp' | 'pdelay_resp_follow_up';
      timestamp: PtpTimestamp;
      requestingPortIdentity: PortIdentity;
    }
  | { header: PtpHeader; type: 'announce'; announce: AnnounceBody }
  | { header: PtpHeader; type: 'management'; management: ManagementBody };

/** actionField (IEEE 1588-2008 §15.4.1.6 Table 38). */
export const ACTION = { GET: 0, SET: 1, RESPONSE: 2, COMMAND: 3, ACKNOWLEDGE: 4 } as const;

/** tlvType (§14.1.1 Table 34). */
export const TLV = {
  MANAGEMENT: 0x0001,
  MANAGEMENT_ERROR_STATUS: 0x0002,
  ORGANIZATION_EXTENSION: 0x0003,
} as const;

/** A Management message (§15.4.1): its one TLV kept as type and raw value (the octets after lengthField). */
export interface ManagementBody {
  targetPortIdentity: PortIdentity;
  startingBoundaryHops: number;
  boundaryHops: number;
  /** Low nibble of octet 46 (ACTION). */
  actionField: number;
  tlvType: number;
  tlvValue: Buffer;
}

/** targetPortIdentity for all clocks and all ports (§15.3.1: all ones). */
export const ALL_PORTS: PortIdentity = { clockIdentity: 'ffffffffffffffff', portNumber: 0xffff };

/** Why a datagram was refused (each is counted as an rx error). */
export type PtpErrorCode = 'short' | 'version' | 'length' | 'unsupported' | 'bad_field';

const PTP_ERROR_TEXT: Record<PtpErrorCode, string> = {
  short: 'shorter than the 34-byte common header (IEEE 1588-2019 §13.3)',
  version: 'versionPTP is not 2',
  length: 'messageLength does not match the datagram, the PDU or its TLVs',
  unsupported: 'message type this port does not handle',
  bad_field: 'timestamp nanoseconds of 10^9 or more',
};

export type PtpDecoded = Decoded<PtpMessage, DecodeError<PtpErrorCode>>;

function refuse(code: PtpErrorCode): { ok: false; error: DecodeError<PtpErrorCode> } {
  return reject(code, PTP_ERROR_TEXT[code]);
}

const NAMES: Record<number, PtpMessage['type']> = {
  [MSG.SYNC]: 'sync',
  [MSG.DELAY_REQ]: 'delay_req',
  [MSG.FOLLOW_UP]: 'follow_up',
  [MSG.PDELAY_REQ]: 'pdelay_req',
  [MSG.DELAY_RESP]: 'delay_resp',
  [MSG.PDELAY_RESP]: 'pdelay_resp',
  [MSG.PDELAY_RESP_FOLLOW_UP]: 'pdelay_resp_follow_up',
  [MSG.ANNOUNCE]: 'announce',
  [MSG.MANAGEMENT]: 'management',
};
const TYPES: Record<PtpMessage['type'], number> = Object.fromEntries(
  Object.entries(NAMES).map(([k, v]) => [v, Number(k)]),
) as Record<PtpMessage['type'], number>;

function writePortIdentity(buf: Buffer, off: number, p: PortIdentity): void {
  Buffer.from(p.clockIdentity, 'hex').copy(buf, off, 0, 8);
  buf.writeUInt16BE(p.portNumber, off + 8);
}

function readPortIdentity(buf: Buffer, off: number): PortIdentity {
  return { clockIdentity: buf.toString('hex', off, off + 8), portNumber: buf.readUInt16BE(off + 8) };
}

function writeTimestamp(buf: Buffer, off: number, t: PtpTimestamp): void {
  const hi = Math.floor(t.seconds / 2 ** 32);
  buf.writeUInt16BE(hi & 0xffff, off);
  buf.writeUInt32BE(t.seconds - hi * 2 ** 32, off + 2);
  buf.writeUInt32BE(t.nanoseconds, off + 6);
}

function readTimestamp(buf: Buffer, off: number): PtpTimestamp {
  return {
    seconds: buf.readUInt16BE(off) * 2 ** 32 + buf.readUInt32BE(off + 2),
    nanoseconds: buf.readUInt32BE(off + 6),
  };
}

/** Split ns since the PTP epoch into a PTP timestamp. */
export function toPtpTimestamp(ns: bigint): PtpTimestamp {
  return { seconds: Number(ns / 1_000_000_000n), nanoseconds: Number(ns % 1_000_000_000n) };
}

export function fromPtpTimestamp(t: PtpTimestamp): bigint {
  return BigInt(t.seconds) * 1_000_000_000n + BigInt(t.nanoseconds);
}

/** Clock identity in linuxptp notation: `020000.fffe.000001`. */
export function clockIdentityText(hex: string): string {
  return `${hex.slice(0, 6)}.${hex.slice(6, 10)}.${hex.slice(10, 16)}`;
}

/**
 * EUI-64 clock identity from a 48-bit MAC: mac[0..2] FF FE mac[3..5], without flipping the U/L bit (what
 * linuxptp `util.c` `generate_clock_identity` does, so the identity matches ptp4l on the same interface).
 */
export function clockIdentityFromMac(mac: string): string {
  const b = mac.split(':').map((x) => parseInt(x, 16));
  if (b.length !== 6 || b.some((x) => !Number.isInteger(x) || x < 0 || x > 255)) {
    throw new RangeError(`not a MAC address: ${mac}`);
  }
  const hex = (x: number | undefined): string => (x ?? 0).toString(16).padStart(2, '0');
  return `${hex(b[0])}${hex(b[1])}${hex(b[2])}fffe${hex(b[3])}${hex(b[4])}${hex(b[5])}`;
}

export type HeaderInput = Omit<
  PtpHeader,
  'messageType' | 'messageLength' | 'controlField' | 'versionPtp' | 'transportSpecific'
> & {
  transportSpecific?: number;
};

type DistOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
export type PtpMessageInput = DistOmit<PtpMessage, 'header'> & { header: HeaderInput };

/** Encode a message; messageLength, messageType, versionPTP 2 and controlField are set here. */
export function encodePtp(m: PtpMessageInput): Buffer {
  const type = TYPES[m.type];
  const length = (LENGTH[type] ?? 0) + (m.type === 'management' ? 4 + m.management.tlvValue.length : 0);
  const buf = Buffer.alloc(length);
  const h = m.header;
  buf[0] = ((h.transportSpecific ?? 0) << 4) | type;
  // versionPTP = 2; the high nibble is reserved in IEEE 1588-2008 (minorVersionPTP only from 2019).
  buf[1] = 2;
  buf.writeUInt16BE(length, 2);
  buf[4] = h.domainNumber;
  buf[6] = h.flags[0];
  buf[7] = h.flags[1];
  buf.writeBigInt64BE(h.correction, 8);
  writePortIdentity(buf, 20, h.sourcePortIdentity);
  buf.writeUInt16BE(h.sequenceId, 30);
  buf[32] = CONTROL[type] ?? 5;
  buf.writeInt8(h.logMessageInterval > 127 ? h.logMessageInterval - 256 : h.logMessageInterval, 33);
  switch (m.type) {
    case 'sync':
    case 'delay_req':
    case 'follow_up':
    case 'pdelay_req':
      writeTimestamp(buf, 34, m.timestamp);
      break; // Pdelay_Req: 10 reserved bytes follow, left zero
    case 'delay_resp':
    case 'pdelay_resp':
    case 'pdelay_resp_follow_up':
      writeTimestamp(buf, 34, m.timestamp);
      writePortIdentity(buf, 44, m.requestingPortIdentity);
      break;
    case 'announce': {
      const a = m.announce;
      writeTimestamp(buf, 34, a.originTimestamp);
      buf.writeInt16BE(a.currentUtcOffset, 44);
      buf[47] = a.grandmasterPriority1;
      buf[48] = a.clockClass;
      buf[49] = a.clockAccuracy;
      buf.writeUInt16BE(a.offsetScaledLogVariance, 50);
      buf[52] = a.grandmasterPriority2;
      Buffer.from(a.grandmasterIdentity, 'hex').copy(buf, 53, 0, 8);
      buf.writeUInt16BE(a.stepsRemoved, 61);
      buf[63] = a.timeSource;
      break;
    }
    case 'management': {
      const g = m.management;
      writePortIdentity(buf, 34, g.targetPortIdentity);
      buf[44] = g.startingBoundaryHops;
      buf[45] = g.boundaryHops;
      buf[46] = g.actionField & 0x0f;
      buf.writeUInt16BE(g.tlvType, 48);
      buf.writeUInt16BE(g.tlvValue.length, 50);
      g.tlvValue.copy(buf, 52);
      break;
    }
  }
  return buf;
}

/** Decode one datagram. TLVs after an Announce/Sync/… are accepted only when messageLength covers them. */
export function decodePtp(buf: Buffer): PtpDecoded {
  if (buf.length < 34) return refuse('short');
  // ptp4l checks only the low nibble (versionPTP); the high one is minorVersionPTP in IEEE 1588-2019.
  if (((buf[1] ?? 0) & 0x0f) !== 2) return refuse('version');
  const type = (buf[0] ?? 0) & 0x0f;
  const name = NAMES[type];
  if (!name) return refuse('unsupported');
  const length = buf.readUInt16BE(2);
  const pdu = LENGTH[type] ?? 0;
  // The datagram must hold messageLength; messageLength must be the PDU plus whole TLVs (4-byte headers).
  if (length > buf.length || length < pdu || (length > pdu && length - pdu < 4)) {
    return refuse('length');
  }
  const header: PtpHeader = {
    transportSpecific: (buf[0] ?? 0) >> 4,
    messageType: type,
    versionPtp: (buf[1] ?? 0) & 0x0f,
    messageLength: length,
    domainNumber: buf[4] ?? 0,
    flags: [buf[6] ?? 0, buf[7] ?? 0],
    correction: buf.readBigInt64BE(8),
    sourcePortIdentity: readPortIdentity(buf, 20),
    sequenceId: buf.readUInt16BE(30),
    controlField: buf[32] ?? 0,
    logMessageInterval: buf.readInt8(33),
  };
  if (name === 'management') return decodeManagement(buf, header);
  const ts = readTimestamp(buf, 34);
  if (ts.nanoseconds >= 1e9) return refuse('bad_field');
  switch (name) {
    case 'sync':
    case 'delay_req':
    case 'follow_up':
    case 'pdelay_req':
      return decoded({ header, type: name, timestamp: ts });
    case 'delay_resp':
    case 'pdelay_resp':
    case 'pdelay_resp_follow_up':
      return decoded({
        header,
        type: name,
        timestamp: ts,
        requestingPortIdentity: readPortIdentity(buf, 44),
      });
    case 'announce':
      return decoded({
        header,
        type: 'announce',
        announce: {
          originTimestamp: ts,
          currentUtcOffset: buf.readInt16BE(44),
          grandmasterPriority1: buf[47] ?? 0,
          clockClass: buf[48] ?? 0,
          clockAccuracy: buf[49] ?? 0,
          offsetScaledLogVariance: buf.readUInt16BE(50),
          grandmasterPriority2: buf[52] ?? 0,
          grandmasterIdentity: buf.toString('hex', 53, 61),
          stepsRemoved: buf.readUInt16BE(61),
          timeSource: buf[63] ?? 0,
        },
      });
  }
}

/**
 * Management (§15.4.1): one TLV, whose lengthField is even (§14.1.3) and ends exactly at messageLength;
 * anything after it (another TLV) is refused as a length error.
 */
function decodeManagement(buf: Buffer, header: PtpHeader): PtpDecoded {
  if (header.messageLength < 52) return refuse('length');
  const tlvLength = buf.readUInt16BE(50);
  if (52 + tlvLength !== header.messageLength || tlvLength % 2 !== 0) return refuse('length');
  return decoded({
    header,
    type: 'management',
    management: {
      targetPortIdentity: readPortIdentity(buf, 34),
      startingBoundaryHops: buf[44] ?? 0,
      boundaryHops: buf[45] ?? 0,
      actionField: (buf[46] ?? 0) & 0x0f,
      tlvType: buf.readUInt16BE(48),
      tlvValue: Buffer.from(buf.subarray(52, 52 + tlvLength)),
    },
  });
}

/**
 * SMPTE ST 2059-2 synchronization metadata (SM) TLV: an ORGANIZATION_EXTENSION TLV (§14.3) with the SMPTE
 * OUI 68-97-E8 and organizationSubType 1, carried by a Management message with actionField COMMAND to all
 * ports. Layout as Wireshark's PTP dissector (epan/dissectors/packet-ptp.c, `OUI_SMPTE`,
 * `PTP_V2_OE_ORG_SMPTE_SUBTYPE_VERSION_TLV`) and libptpmgmt (`SMPTE_ORGANIZATION_EXTENSION_t`) decode it;
 * docs/ptp-profiles.md "Synchronization metadata" gives the table. Multi-octet fields big-endian.
 */
export const SMPTE_OUI = '6897e8';
export const SMPTE_SM_SUBTYPE = 1;
/** The TLV's value (organizationId … leapSecondJump): 3 + 3 + 42 octets. */
export const SMPTE_SM_LENGTH = 48;

/** masterLockingStatus (the dissector's value names). */
export const LOCKING = { NOT_IN_USE: 0, FREE_RUN: 1, COLD_LOCKING: 2, WARM_LOCKING: 3, LOCKED: 4 } as const;
/** timeAddressFlags bits (SMPTE ST 12-1): drop frame, color frame identification. */
export const TIME_ADDRESS = { DROP_FRAME: 0x01, COLOR_FRAME: 0x02 } as const;
/** daylightSaving bits: current, next, previous. */
export const DAYLIGHT = { CURRENT: 0x01, NEXT: 0x02, PREVIOUS: 0x04 } as const;
/** leapSecondJump bit: the next jump of currentLocalOffset is a leap second. */
export const LEAP_SECOND_JUMP = 0x01;

export interface SmpteSyncMetadata {
  defaultSystemFrameRate: { numerator: number; denominator: number };
  masterLockingStatus: number;
  timeAddressFlags: number;
  /** Seconds from grandmaster PTP time to local time. */
  currentLocalOffset: number;
  /** Size in seconds of the next discontinuity of local time. */
  jumpSeconds: number;
  /** PTP seconds (48 bits) at that discontinuity; 0 when none is scheduled. */
  timeOfNextJump: number;
  timeOfNextJam: number;
  timeOfPreviousJam: number;
  previousJamLocalOffset: number;
  daylightSaving: number;
  leapSecondJump: number;
}

function writeUint48(buf: Buffer, off: number, v: number): void {
  buf.writeUInt16BE(Math.floor(v / 2 ** 32) & 0xffff, off);
  buf.writeUInt32BE(v % 2 ** 32, off + 2);
}

function readUint48(buf: Buffer, off: number): number {
  return buf.readUInt16BE(off) * 2 ** 32 + buf.readUInt32BE(off + 2);
}

/** The SM TLV's value (what follows tlvType and lengthField). */
export function encodeSmpteSyncMetadata(sm: SmpteSyncMetadata): Buffer {
  const b = Buffer.alloc(SMPTE_SM_LENGTH);
  Buffer.from(SMPTE_OUI, 'hex').copy(b, 0);
  b.writeUIntBE(SMPTE_SM_SUBTYPE, 3, 3);
  b.writeUInt32BE(sm.defaultSystemFrameRate.numerator, 6);
  b.writeUInt32BE(sm.defaultSystemFrameRate.denominator, 10);
  b[14] = sm.masterLockingStatus;
  b[15] = sm.timeAddressFlags;
  b.writeInt32BE(sm.currentLocalOffset, 16);
  b.writeInt32BE(sm.jumpSeconds, 20);
  writeUint48(b, 24, sm.timeOfNextJump);
  writeUint48(b, 30, sm.timeOfNextJam);
  writeUint48(b, 36, sm.timeOfPreviousJam);
  b.writeInt32BE(sm.previousJamLocalOffset, 42);
  b[46] = sm.daylightSaving;
  b[47] = sm.leapSecondJump;
  return b;
}

/** The SM fields of an ORGANIZATION_EXTENSION TLV value, or why it is not one. */
export function decodeSmpteSyncMetadata(
  value: Buffer,
): Decoded<SmpteSyncMetadata, DecodeError<'not_smpte' | 'length'>> {
  if (
    value.length < 6 ||
    value.toString('hex', 0, 3) !== SMPTE_OUI ||
    value.readUIntBE(3, 3) !== SMPTE_SM_SUBTYPE
  )
    return reject('not_smpte', 'not the SMPTE ST 2059-2 metadata TLV (OUI 68-97-E8, subtype 1)');
  if (value.length !== SMPTE_SM_LENGTH)
    return reject('length', `SM TLV value is not ${SMPTE_SM_LENGTH} bytes`);
  return decoded({
    defaultSystemFrameRate: { numerator: value.readUInt32BE(6), denominator: value.readUInt32BE(10) },
    masterLockingStatus: value[14] ?? 0,
    timeAddressFlags: value[15] ?? 0,
    currentLocalOffset: value.readInt32BE(16),
    jumpSeconds: value.readInt32BE(20),
    timeOfNextJump: readUint48(value, 24),
    timeOfNextJam: readUint48(value, 30),
    timeOfPreviousJam: readUint48(value, 36),
    previousJamLocalOffset: value.readInt32BE(42),
    daylightSaving: value[46] ?? 0,
    leapSecondJump: value[47] ?? 0,
  });
}

/**
 * The Management message that carries the SM TLV: COMMAND to all clocks and ports, one TLV. Boundary hops
 * 3 (a boundary clock forwards a management message while boundaryHops > 0, §15.3.3), so the metadata
 * crosses up to three boundary clocks that only forward it.
 */
export function syncMetadataMessage(header: HeaderInput, sm: SmpteSyncMetadata): PtpMessageInput {
  return {
    type: 'management',
    header,
    management: {
      targetPortIdentity: ALL_PORTS,
      startingBoundaryHops: 3,
      boundaryHops: 3,
      actionField: ACTION.COMMAND,
      tlvType: TLV.ORGANIZATION_EXTENSION,
      tlvValue: encodeSmpteSyncMetadata(sm),
    },
  };
}
