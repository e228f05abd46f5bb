/**
 * Append-only event log on disk (reference R8, adapted): numbered segment files `events-<n>.tblog` of
 * length + CRC framed records (src/protocol/log-record.ts), rotated by size, oldest deleted beyond
 * `maxFiles`. Each segment starts with a meta record carrying the epoch, so the offset stream survives a
 * restart. Every record is written with one synchronous write() before the message is delivered: a
 * SIGKILL cannot lose a record a client has seen, and at most the last record can be torn (power loss),
 * which recovery detects and truncates.
 */
import {
  closeSync,
  existsSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import {
  decodeRecords,
  encodeRecordBody,
  recordBodyText,
  type LogKind,
  type LogRecord,
} from '../protocol/log-record.ts';
import type { EventLogSink, RecoveredLog } from '../domain/hub.ts';

const FILE_RE = /^events-(\d{8})\.tblog$/;

export interface EventLogOptions {
  dir: string;
  maxFileBytes: number;
  maxFiles: number;
  /** Epoch for a fresh log (or when history was lost). */
  newEpoch: () => string;
  now: () => number;
}

export interface RecoveryReport {
  files: number;
  records: number;
  /** Bytes cut from the end of the newest file (a torn last record). */
  truncatedBytes: number;
  /** True when history could not be read back intact and a new epoch was started. */
  historyLost: boolean;
  reason?: string;
}

interface Segment {
  index: number;
  name: string;
}

export function listSegments(dir: string): Segment[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .map((name) => {
      const m = FILE_RE.exec(name);
      return m ? { index: Number(m[1]), name } : undefined;
    })
    .filter((s): s is Segment => s !== undefined)
    .sort((a, b) => a.index - b.index);
}

function metaOf(records: LogRecord[]): { epoch: string; firstOffset: number } | undefined {
  const first = records[0];
  if (first?.k !== 'meta' || first.m === null || typeof first.m !== 'object') return undefined;
  const m = first.m as Record<string, unknown>;
  if (typeof m['epoch'] !== 'string' || typeof m['firstOffset'] !== 'number') return undefined;
  return { epoch: m['epoch'], firstOffset: m['firstOffset'] };
}

/** Read every record of every segment in order (the replay CLI and tests). Stops a file at its first bad record. */
export function readLog(dir: string): { records: LogRecord[]; torn: { file: string; stopReason: string }[] } {
  const records: LogRecord[] = [];
  const torn: { file: string; stopReason: string }[] = [];
  for (const seg of listSegments(dir)) {
    const r = decodeRecords(readFileSync(join(dir, seg.name)));
    records.push(...r.records);
    if (r.stopReason) torn.push({ file: seg.name, stopReason: r.stopReason });
  }
  return { records, torn };
}

export class EventLog implements EventLogSink {
  readonly #opts: EventLogOptions;
  #fd: number | undefined;
  #segment = 0;
  #size = 0;
  #epoch = '';
  #recovered: RecoveredLog | undefined;
  #report: RecoveryReport = { files: 0, records: 0, truncatedBytes: 0, historyLost: false };
  #appended = 0;
  #lastError: Error | undefined;

  constructor(options: EventLogOptions) {
    this.#opts = options;
  }

  get epoch(): string {
    return this.#epoch;
  }
  get report(): RecoveryReport {
    return this.#report;
  }
  get recovered(): RecoveredLog | undefined {
    return this.#recovered;
  }
  get appended(): number {
    return this.#appended;
  }
  get lastError(): Error | undefined {
    return this.#lastError;
  }
  get healthy(): boolean {
    return this.#fd !== undefined && this.#lastError === undefined;
  }

  /** Read back the existing log, cut a torn tail, and open the newest segment for appending. */
  open(): void {
    const { dir } = this.#opts;
    mkdirSync(dir, { recursive: true });
    const segments = listSegments(dir);
    const records: LogRecord[] = [];
    let epoch: string | undefined;
    let floorOffset = 0;
    let lost: string | undefined;
    let truncated = 0;
    let lastOffset = 0;
    for (let i = 0; i < segments.length; i++) {
      const seg = segments[i] as Segment;
      const file = join(dir, seg.name);
      const buf = readFileSync(file);
      const r = decodeRecords(buf);
      const meta = metaOf(r.records);
      if (!meta) {
        if (i === segments.length - 1 && r.records.length === 0 && buf.length < 4096) {
          // A crash right after rotation: the new segment's header itself is torn. Nothing in it was sent.
          unlinkSync(file);
          truncated = buf.length;
          segments.pop();
          continue;
        }
        lost ??= `${seg.name} has no readable header`;
        continue;
      }
      if (epoch === undefined) {
        epoch = meta.epoch;
        floorOffset = meta.firstOffset - 1;
      } else if (meta.epoch !== epoch) {
        lost ??= `${seg.name} belongs to another epoch`;
      }
      if (r.stopReason) {
        const isLast = i === segments.length - 1;
        // One synchronous write per record means a crash tears at most the final record. More garbage than
        // that, or damage in an older file, is corruption: history is not intact.
        const rest = buf.length - r.goodBytes;
        const declared = rest >= 4 ? buf.readUInt32BE(r.goodBytes) + 8 : rest;
        if (
          !isLast ||
          (r.stopReason !== 'short-header' && r.stopReason !== 'short-body' && rest > declared)
        ) {
          lost ??= `${seg.name}: ${r.stopReason} at byte ${r.goodBytes}`;
        }
        if (isLast) {
          const fd = openSync(file, 'r+');
          ftruncateSync(fd, r.goodBytes);
          closeSync(fd);
          truncated = rest;
        }
      }
      for (const rec of r.records) {
        if (rec.k === 'meta') continue;
        if (rec.o <= lastOffset) {
          lost ??= `${seg.name}: offset ${rec.o} out of order`;
          continue;
        }
        lastOffset = rec.o;
        records.push(rec);
      }
    }
    this.#report = {
      files: segments.length,
      records: records.length,
      truncatedBytes: truncated,
      historyLost: lost !== undefined,
      ...(lost === undefined ? {} : { reason: lost }),
    };
    if (lost !== undefined || epoch === undefined) {
      // Offsets restart in a new epoch so no client mistakes new history for the old one (reference §4.1).
      this.#epoch = this.#opts.newEpoch();
      this.#recovered = undefined;
      // Keep damaged files for inspection, out of the way of the new epoch's segments.
      for (const seg of segments)
        renameSync(join(dir, seg.name), join(dir, `${seg.name}.damaged-${this.#opts.now()}`));
      this.#startSegment((segments.at(-1)?.index ?? 0) + 1, 1);
      return;
    }
    this.#epoch = epoch;
    this.#recovered = { epoch, lastOffset, floorOffset, records };
    const last = segments.at(-1) as Segment;
    this.#segment = last.index;
    this.#fd = openSync(join(dir, last.name), 'a');
    this.#size = fstatSync(this.#fd).size;
  }

  #startSegment(index: number, firstOffset: number): void {
    // Records are write()n one by one (safe against a process crash); a finished segment is also flushed
    // to the disk, so a power cut can only cost the current segment's tail. The old file stays open until
    // the new one is: if either step throws, #fd is still a valid descriptor and the next append retries
    // (a closed descriptor number kept here could be reused by another file and written to).
    if (this.#fd !== undefined) fsyncSync(this.#fd);
    const next = openSync(join(this.#opts.dir, `events-${String(index).padStart(8, '0')}.tblog`), 'a');
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = next;
    this.#segment = index;
    this.#size = 0;
    const meta = JSON.stringify({ epoch: this.#epoch, firstOffset, created: this.#opts.now() });
    this.#write(encodeRecordBody(recordBodyText(0, this.#opts.now(), 'meta', meta)));
    const segments = listSegments(this.#opts.dir);
    while (segments.length > this.#opts.maxFiles) {
      const old = segments.shift() as Segment;
      unlinkSync(join(this.#opts.dir, old.name));
    }
  }

  #write(buf: Buffer): void {
    if (this.#fd === undefined) return;
    let done = 0;
    while (done < buf.length) done += writeSync(this.#fd, buf, done, buf.length - done);
    this.#size += buf.length;
  }

  append(offset: number, time: number, kind: LogKind, json: string): void {
    if (this.#fd === undefined) return;
    try {
      if (this.#size >= this.#opts.maxFileBytes) this.#startSegment(this.#segment + 1, offset);
      this.#write(encodeRecordBody(recordBodyText(offset, time, kind, json)));
      this.#appended++;
    } catch (err) {
      // A full disk must not take the hub down; health reports the log as unhealthy instead.
      this.#lastError = err instanceof Error ? err : new Error(String(err));
    }
  }

  close(): void {
    if (this.#fd !== undefined) {
      try {
        fsyncSync(this.#fd);
      } catch {
        // Closing anyway; the data is in the page cache.
      }
      closeSync(this.#fd);
    }
    this.#fd = undefined;
  }
}
