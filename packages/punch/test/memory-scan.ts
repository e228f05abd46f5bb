import { closeSync, openSync, readFileSync, readSync } from 'node:fs';

/**
 * Searches a live process's memory for byte strings (proc(5): `/proc/<pid>/maps` lists the mappings,
 * `/proc/<pid>/mem` reads them at their addresses; the reader needs ptrace access to the process: root, or
 * its parent). Every readable mapping is read in chunks that overlap by a needle's length, so a string
 * across two chunks is found too. Regions the kernel refuses to read (`[vvar]`, a mapping that went away
 * meanwhile) are counted as skipped. The scan is bounded in bytes.
 */
export interface MemoryScan {
  /** Readable mappings read, bytes read, mappings that could not be read. */
  regions: number;
  bytes: number;
  skipped: number;
  /** Per needle, the addresses where it was found (at most 16 each). */
  hits: number[][];
}

const CHUNK = 4 * 1024 * 1024;
const MAX_BYTES = 8 * 1024 * 1024 * 1024;

export function scanMemory(pid: number, needles: readonly Buffer[]): MemoryScan {
  const longest = Math.max(1, ...needles.map((n) => n.length));
  const scan: MemoryScan = { regions: 0, bytes: 0, skipped: 0, hits: needles.map(() => []) };
  const maps = readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n').filter(Boolean);
  const fd = openSync(`/proc/${pid}/mem`, 'r');
  const buf = Buffer.alloc(CHUNK + longest);
  try {
    for (const line of maps) {
      const m = /^([0-9a-f]+)-([0-9a-f]+) (\S{4})/.exec(line);
      if (!m || m[3]?.[0] !== 'r') continue;
      const start = BigInt(`0x${m[1]}`);
      const end = BigInt(`0x${m[2]}`);
      let read = false;
      // `carry` bytes at the head of `buf` are the previous chunk's tail.
      let carry = 0;
      for (let at = start; at < end && scan.bytes < MAX_BYTES;) {
        const want = Number(end - at < BigInt(CHUNK) ? end - at : BigInt(CHUNK));
        let got: number;
        try {
          got = readSync(fd, buf, carry, want, at);
        } catch {
          break;
        }
        if (got <= 0) break;
        read = true;
        scan.bytes += got;
        const view = buf.subarray(0, carry + got);
        needles.forEach((needle, k) => {
          const hits = scan.hits[k] as number[];
          for (let i = view.indexOf(needle); i !== -1 && hits.length < 16; i = view.indexOf(needle, i + 1)) {
            // A short needle inside the carried tail was found in the previous chunk already.
            const address = Number(at) - carry + i;
            if (!hits.includes(address)) hits.push(address);
          }
        });
        carry = Math.min(longest - 1, view.length);
        view.copy(buf, 0, view.length - carry);
        at += BigInt(got);
      }
      if (read) scan.regions++;
      else scan.skipped++;
    }
  } finally {
    closeSync(fd);
  }
  return scan;
}

/** A string as the bytes a process may hold it in: UTF-8 (and V8's one-byte strings) and UTF-16LE. */
export const encodings = (text: string): Buffer[] => [
  Buffer.from(text, 'utf8'),
  Buffer.from(text, 'utf16le'),
];
