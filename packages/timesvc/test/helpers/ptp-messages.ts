// One PTP message of every type as timesvc encodes it, with its length and controlField (IEEE 1588-2019
// 13.3.2.3, 13.3.2.13): shared by the codec tests and the tshark cross-check.
import { FLAG0, FLAG1, type PtpMessageInput } from '../../src/protocol/ptp.ts';

const port = { clockIdentity: '020000fffe000001', portNumber: 1 };
const req = { clockIdentity: '9eab8ffffe336da6', portNumber: 1 };
const ts = { seconds: 0x1_0000_0005, nanoseconds: 999_999_999 };
const hdr = (flags0: number, seq: number, log: number, correction = 0n): PtpMessageInput['header'] => ({
  domainNumber: 0,
  flags: [flags0, FLAG1.PTP_TIMESCALE | FLAG1.UTC_OFFSET_VALID],
  correction,
  sourcePortIdentity: port,
  sequenceId: seq,
  logMessageInterval: log,
});
export const ours: { msg: PtpMessageInput; port: number; len: number; control: number }[] = [
  { msg: { type: 'sync', header: hdr(FLAG0.TWO_STEP, 1, 0), timestamp: ts }, port: 319, len: 44, control: 0 },
  { msg: { type: 'delay_req', header: hdr(0, 2, 0x7f), timestamp: ts }, port: 319, len: 44, control: 1 },
  { msg: { type: 'pdelay_req', header: hdr(0, 3, 0x7f), timestamp: ts }, port: 319, len: 54, control: 5 },
  {
    msg: {
      type: 'pdelay_resp',
      header: hdr(FLAG0.TWO_STEP, 4, 0x7f),
      timestamp: ts,
      requestingPortIdentity: req,
    },
    port: 319,
    len: 54,
    control: 5,
  },
  { msg: { type: 'follow_up', header: hdr(0, 1, 0), timestamp: ts }, port: 320, len: 44, control: 2 },
  {
    msg: {
      type: 'delay_resp',
      header: hdr(0, 2, 0, -123456789n),
      timestamp: ts,
      requestingPortIdentity: req,
    },
    port: 320,
    len: 54,
    control: 3,
  },
  {
    msg: {
      type: 'pdelay_resp_follow_up',
      header: hdr(0, 4, 0x7f, 65536n),
      timestamp: ts,
      requestingPortIdentity: req,
    },
    port: 320,
    len: 54,
    control: 5,
  },
  {
    msg: {
      type: 'announce',
      header: hdr(0, 5, 1),
      announce: {
        originTimestamp: ts,
        currentUtcOffset: 37,
        grandmasterPriority1: 128,
        clockClass: 6,
        clockAccuracy: 0x28,
        offsetScaledLogVariance: 0xffff,
        grandmasterPriority2: 128,
        grandmasterIdentity: port.clockIdentity,
        stepsRemoved: 0,
        timeSource: 0x20,
      },
    },
    port: 320,
    len: 64,
    control: 5,
  },
];
