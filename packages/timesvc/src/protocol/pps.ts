/**
 * Linux PPS (RFC 2783 API as implemented by the kernel's PPS subsystem). The sysfs attribute
 * `/sys/class/pps/ppsN/assert` holds the last assert edge as `"%lld.%09d#%d\n"`: seconds.nanoseconds of
 * CLOCK_REALTIME at the interrupt, then the edge's sequence number (Linux `drivers/pps/sysfs.c`,
 * `assert_show`). Before the first edge the kernel shows `0.000000000#0`.
 */
import { decoded, reject, type DecodeError, type Decoded } from '@broadcast-ops/core/decoded';

export interface PpsAssert {
  sec: number;
  nsec: number;
  sequence: number;
}

const ASSERT = /^(-?\d{1,15})\.(\d{9})#(\d{1,10})\s*$/;

/** Parse the sysfs assert text, or refuse it when it is not in the kernel's format. */
export function parsePpsAssert(text: string): Decoded<PpsAssert, DecodeError<'too-long' | 'bad-format'>> {
  if (text.length > 64) return reject('too-long', 'assert text longer than 64 characters');
  const m = ASSERT.exec(text);
  if (!m) return reject('bad-format', 'assert text is not seconds.nanoseconds#sequence');
  return decoded({ sec: Number(m[1]), nsec: Number(m[2]), sequence: Number(m[3]) });
}

/** `pps_device: /dev/ppsN` → `/sys/class/pps/ppsN/assert`; any other path is read as is (a test fixture). */
export function ppsSysfsPath(device: string): string {
  const m = /^\/dev\/(pps\d+)$/.exec(device);
  return m ? `/sys/class/pps/${m[1]}/assert` : device;
}

export function formatPpsAssert(a: PpsAssert): string {
  return `${a.sec}.${String(a.nsec).padStart(9, '0')}#${a.sequence}\n`;
}
