/**
 * Append-only event log on disk (README "Durability"). Numbered segment files `events-<n>.tblog` of length +
 * CRC framed records (protocol/log-record.ts). Each segment starts with a meta record (epoch, first offset)
 * and a checkpoint of the whole state store, so deleting old segments at rotation never loses a live key.
 *
 * Durability, in one sentence: every record is write()n before the message it carries is delivered and is
 * fsynced within `syncIntervalMs` (default 50 ms) or sooner when an ack waits for it (`whenDurable`, group
 * commit), the directory is fsynced when segments are created, removed or quarantined, and only a start
 * that finds the clean-shutdown marker keeps the epoch; any other start opens a new epoch, so an offset a
 * client holds never names a different record.
 *
 * Recovery keeps every readable record of each segment up to its first damage (bad CRC, torn record, offset
 * out of order, missing header), copies a damaged segment whole to `<name>.quarantine-<ms>` before cutting
 * it at the damage, and reports what was lost. Intact later segments are kept: their checkpoint restores the
 * state the lost stretch led to.
 */
import {
  closeSync,
  copyFileSync,
  existsSync,
  fdatasync,
  fdatasyncSync,
  fsyncSync,
  fstatSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
  unlinkSync,
  writeFileSync,
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
import type { EventLogSink } from '../domain/journal.ts';
import type { RecoveredLog } from '../domain/recovery.ts';

const FILE_RE = /^events-(\d{8})\.tblog$/;
export const CLEAN_MARKER = 'clean-shutdown.json';
/** Checkpoint entries per record: keeps each record far below the decoder's size bound. */
const CHECKPOINT_CHUNK_BYTES = 1024 * 1024;
/**
 * Segments grow in zero-filled steps of this size ahead of the writes. Overwriting blocks that already
 * exist lets fdatasync skip the file-size metadata update, which measured 2.5-3x more syncs per second on
 * ext4 here. A zero tail is unused space; a clean close trims it.
 */
const PREALLOCATE_MAX_BYTES = 4 * 1024 * 1024;
const ZEROS = Buffer.alloc(64 * 1024);

export interface EventLogOptions {
  dir: string;
  maxFileBytes: number;
  maxFiles: number;
  /** Epoch for a fresh log, or after any start that was not clean. */
  newEpoch: () => string;
  now: () => number;
  /** fsync records at least this often (ms). */
  syncIntervalMs?: number;
  /** false: never fsync (benchmarks only; a power cut can then lose acknowledged records). */
  sync?: boolean;
}

export interface RecoveryReport {
  files: number;
  records: number;
  lastOffset: number;
  /** The clean-shutdown marker matched the log: the epoch is kept and resumes can replay. */
  clean: boolean;
  newEpoch: boolean;
  reason?: string;
  /** The first damage found (each damaged segment is cut there; its whole original is quarantined). */
  damage?: { file: string; byte: number; reason: string };
  /** Untruncated copies of damaged segments, `<name>.quarantine-<ms>`. */
  quarantined: string[];
  /** Bytes past the damage, not read back (kept in the quarantine copies). */
  lostBytes: number;
  /**
   * Each damaged stretch: the last offset read before it and, when a later segment was intact, the first
   * offset read after it (records in between are lost; a missing `nextOffset` means up to the end).
   */
  lost: { file: string; byte: number; reason: string; afterOffset: number; nextOffset?: number }[];
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

function metaOf(r: LogRecord | undefined): { epoch: string; firstOffset: number } | undefined {
  if (r?.k !== 'meta' || r.m === null || typeof r.m !== 'object') return undefined;
  const m = r.m as Record<string, unknown>;
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
    if (r.stopReason && r.stopReason !== 'zero-fill') torn.push({ file: seg.name, stopReason: r.stopReason });
  }
  return { records, torn };
}

function syncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export class EventLog implements EventLogSink {
  readonly #opts: EventLogOptions;
  readonly #sync: boolean;
  readonly #syncIntervalMs: number;
  #fd: number | undefined;
  #segment = 0;
  /** Bytes of records in the current segment after its header and checkpoint (the rotation measure). */
  #size = 0;
  /** Write position in the current segment, and how far it is allocated (zero-filled). */
  #pos = 0;
  #allocated = 0;
  #epoch = '';
  #lastOffset = 0;
  #recovered: RecoveredLog | undefined;
  #report: RecoveryReport = {
    files: 0,
    records: 0,
    lastOffset: 0,
    clean: false,
    newEpoch: true,
    quarantined: [],
    lostBytes: 0,
    lost: [],
  };
  #appended = 0;
  #syncs = 0;
  #lastError: Error | undefined;
  #dirty = false;
  #timer: NodeJS.Timeout | undefined;
  #immediate: NodeJS.Immediate | undefined;
  #waiters: ((err?: Error) => void)[] = [];
  /** Callbacks satisfied by the fdatasync in flight. */
  #inflight: ((err?: Error) => void)[] = [];
  #syncing = false;
  #closeAfterSync: number | undefined;
  #checkpoint: () => Iterable<string> = () => [];
  #startNew: { index: number; firstOffset: number } | undefined;

  constructor(options: EventLogOptions) {
    this.#opts = options;
    this.#sync = options.sync ?? true;
    this.#syncIntervalMs = options.syncIntervalMs ?? 50;
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
  /** fsync calls made (group commits), for the durability benchmark. */
  get syncs(): number {
    return this.#syncs;
  }
  get lastError(): Error | undefined {
    return this.#lastError;
  }
  get healthy(): boolean {
    return this.#fd !== undefined && this.#lastError === undefined;
  }

  /**
   * Read back the existing log: keep every record up to the first damage, quarantine the rest, decide the
   * epoch. Call `start()` next, once the state built from `recovered` can provide a checkpoint.
   */
  open(): void {
    const { dir } = this.#opts;
    mkdirSync(dir, { recursive: true });
    const marker = this.#takeMarker();
    const segments = listSegments(dir);
    let records: LogRecord[] = [];
    const quarantined: string[] = [];
    let damage: RecoveryReport['damage'];
    let damagedBefore = false;
    const lost: RecoveryReport['lost'] = [];
    let lostBytes = 0;
    let lastOffset = 0;
    let epoch: string | undefined;
    let epochFirstOffset = 1;
    let haveBase = false;
    for (const seg of segments) {
      const file = join(dir, seg.name);
      const buf = readFileSync(file);
      let order = lastOffset;
      let reject: string | undefined;
      const r = decodeRecords(buf, (rec, n) => {
        if (n === 0) {
          if (metaOf(rec)) return true;
          reject = 'no readable segment header';
          return false;
        }
        if (rec.k === 'meta' || rec.k === 'checkpoint') return true;
        if (rec.o <= order) {
          reject = `offset ${rec.o} out of order`;
          return false;
        }
        order = rec.o;
        return true;
      });
      const meta = metaOf(r.records[0]);
      let stop: string | undefined =
        reject ?? (r.records.length === 0 ? 'no readable segment header' : r.stopReason);
      if (stop === 'zero-fill' && seg === segments.at(-1)) {
        // Preallocated space after the last record of the newest segment: not damage, nothing lost.
        const fd = openSync(file, 'r+');
        ftruncateSync(fd, r.goodBytes);
        fsyncSync(fd);
        closeSync(fd);
        stop = undefined;
      }
      if (meta) {
        if (meta.epoch !== epoch) epochFirstOffset = meta.firstOffset;
        const open = lost.at(-1);
        if (open && open.nextOffset === undefined) open.nextOffset = meta.firstOffset;
        epoch = meta.epoch;
        for (const rec of r.records) {
          if (rec.k === 'meta') continue;
          if (rec.k === 'checkpoint') {
            // The checkpoint is the whole state at the segment start. After a damaged stretch it replaces
            // everything read before (some deletions may be in the lost part); otherwise the oldest one is
            // the base and later ones repeat what the records built.
            if (damagedBefore && rec.o >= lastOffset) {
              records = records.filter((x) => x.k !== 'checkpoint' && x.k !== 'state');
              damagedBefore = false;
            } else if (haveBase) continue;
            haveBase = true;
            records.push(rec);
            continue;
          }
          lastOffset = rec.o;
          records.push(rec);
        }
        haveBase = true;
      }
      if (stop === undefined) continue;
      // Damage: keep the readable records, copy the file whole to quarantine, cut the original there.
      damage ??= { file: seg.name, byte: r.goodBytes, reason: stop };
      lost.push({ file: seg.name, byte: r.goodBytes, reason: stop, afterOffset: order });
      damagedBefore = true;
      lostBytes += buf.length - r.goodBytes;
      const copy = `${seg.name}.quarantine-${this.#opts.now()}`;
      copyFileSync(file, join(dir, copy));
      quarantined.push(copy);
      if (meta) {
        const fd = openSync(file, 'r+');
        ftruncateSync(fd, r.goodBytes);
        fsyncSync(fd);
        closeSync(fd);
      } else {
        unlinkSync(file);
      }
      syncDir(dir);
    }
    const remaining = listSegments(dir);
    const clean =
      damage === undefined &&
      epoch !== undefined &&
      marker !== undefined &&
      marker.epoch === epoch &&
      marker.lastOffset === lastOffset &&
      remaining.at(-1)?.name === marker.segment;
    this.#lastOffset = lastOffset;
    let reason: string | undefined;
    if (!clean) {
      reason =
        damage !== undefined
          ? `damage in ${damage.file} at byte ${damage.byte}: ${damage.reason}`
          : epoch === undefined
            ? 'empty log'
            : marker === undefined
              ? 'no clean-shutdown marker (crash or power loss)'
              : 'clean-shutdown marker does not match the log';
    }
    this.#epoch = clean ? (epoch as string) : this.#opts.newEpoch();
    this.#report = {
      files: remaining.length,
      records: records.filter((x) => x.k !== 'checkpoint').length,
      lastOffset,
      clean,
      newEpoch: !clean,
      ...(reason === undefined ? {} : { reason }),
      ...(damage === undefined ? {} : { damage }),
      quarantined,
      lostBytes,
      lost,
    };
    this.#recovered = {
      epoch: this.#epoch,
      lastOffset,
      // A clean start can replay from the start of its epoch; a new epoch from nothing older than itself.
      floorOffset: clean ? epochFirstOffset - 1 : lastOffset,
      records,
    };
    const last = remaining.at(-1);
    if (clean && last) {
      this.#segment = last.index;
      this.#startNew = undefined;
    } else {
      this.#startNew = {
        index: (last?.index ?? segments.at(-1)?.index ?? 0) + 1,
        firstOffset: lastOffset + 1,
      };
    }
  }

  /** Read and remove the clean-shutdown marker (durably, before anything new is written). */
  #takeMarker(): { epoch: string; lastOffset: number; segment: string } | undefined {
    const path = join(this.#opts.dir, CLEAN_MARKER);
    if (!existsSync(path)) return undefined;
    let marker: { epoch: string; lastOffset: number; segment: string } | undefined;
    try {
      const m = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
      if (
        typeof m['epoch'] === 'string' &&
        typeof m['lastOffset'] === 'number' &&
        typeof m['segment'] === 'string'
      )
        marker = { epoch: m['epoch'], lastOffset: m['lastOffset'], segment: m['segment'] };
    } catch {
      marker = undefined;
    }
    unlinkSync(path);
    syncDir(this.#opts.dir);
    return marker;
  }

  /**
   * Open for appending. `checkpoint` yields every live state entry as JSON; it is written at the start of
   * each new segment (now, when this run opened a new epoch, and at every rotation).
   */
  start(checkpoint: () => Iterable<string>): void {
    this.#checkpoint = checkpoint;
    if (this.#startNew) {
      this.#startSegment(this.#startNew.index, this.#startNew.firstOffset);
      this.#startNew = undefined;
      this.flush();
      return;
    }
    const name = `events-${String(this.#segment).padStart(8, '0')}.tblog`;
    this.#fd = openSync(join(this.#opts.dir, name), 'r+');
    this.#pos = this.#allocated = fstatSync(this.#fd).size;
    // Measured from the file start (the checkpoint's size is not known here): rotates a little early.
    this.#size = this.#pos;
  }

  #segmentName(index: number): string {
    return `events-${String(index).padStart(8, '0')}.tblog`;
  }

  #startSegment(index: number, firstOffset: number): void {
    // The old file stays open until the new one is: if a step throws, #fd is still a valid descriptor and
    // the next append retries (a closed descriptor number kept here could be reused by another file).
    if (this.#fd !== undefined) {
      // Only the newest segment may end in unused zeros.
      ftruncateSync(this.#fd, this.#pos);
      fdatasyncSync(this.#fd);
      this.#syncs++;
    }
    const next = openSync(join(this.#opts.dir, this.#segmentName(index)), 'w+');
    if (this.#fd !== undefined) this.#release(this.#fd);
    this.#fd = next;
    this.#pos = this.#allocated = 0;
    this.#segment = index;
    const now = this.#opts.now();
    const meta = JSON.stringify({ epoch: this.#epoch, firstOffset, created: now });
    this.#write(encodeRecordBody(recordBodyText(0, now, 'meta', meta)));
    // Compaction: the whole state at the segment start, in chunks, so older segments may go.
    let chunk: string[] = [];
    let bytes = 0;
    const flush = (): void => {
      if (chunk.length === 0) return;
      const body = `{"entries":[${chunk.join(',')}]}`;
      this.#write(encodeRecordBody(recordBodyText(firstOffset - 1, now, 'checkpoint', body)));
      chunk = [];
      bytes = 0;
    };
    for (const e of this.#checkpoint()) {
      chunk.push(e);
      bytes += e.length;
      if (bytes >= CHECKPOINT_CHUNK_BYTES) flush();
    }
    flush();
    this.#size = 0;
    // The checkpoint must be on disk before any older segment goes: together they hold the live keys.
    fdatasyncSync(next);
    this.#syncs++;
    const segments = listSegments(this.#opts.dir);
    while (segments.length > this.#opts.maxFiles) {
      const old = segments.shift() as Segment;
      unlinkSync(join(this.#opts.dir, old.name));
    }
    // The new file's name (and any removal) must survive a power cut as well as its contents.
    syncDir(this.#opts.dir);
  }

  /** Close a descriptor, or leave it to the sync in flight on it. */
  #release(fd: number): void {
    if (this.#syncing) this.#closeAfterSync = fd;
    else closeSync(fd);
  }

  #write(buf: Buffer): void {
    const fd = this.#fd;
    if (fd === undefined) return;
    if (this.#pos + buf.length > this.#allocated) {
      // A quarter segment at a time (64 KiB to 4 MiB), so small test segments stay small.
      const step = Math.min(PREALLOCATE_MAX_BYTES, Math.max(64 * 1024, this.#opts.maxFileBytes >> 2));
      const target = this.#pos + buf.length + step;
      let at = this.#allocated;
      while (at < target) at += writeSync(fd, ZEROS, 0, Math.min(ZEROS.length, target - at), at);
      this.#allocated = at;
    }
    let done = 0;
    while (done < buf.length) done += writeSync(fd, buf, done, buf.length - done, this.#pos + done);
    this.#pos += buf.length;
    this.#size += buf.length;
  }

  append(offset: number, time: number, kind: LogKind, json: string): void {
    if (this.#fd === undefined) return;
    try {
      if (this.#size >= this.#opts.maxFileBytes) this.#startSegment(this.#segment + 1, offset);
      this.#write(encodeRecordBody(recordBodyText(offset, time, kind, json)));
      this.#lastOffset = offset;
      this.#appended++;
      this.#dirty = true;
      this.#armTimer();
    } catch (err) {
      // A full disk must not take the hub down; health reports the log as degraded, acks wait in vain.
      this.#lastError = err instanceof Error ? err : new Error(String(err));
    }
  }

  whenDurable(done: (err?: Error) => void): void {
    if (this.#lastError) {
      done(this.#lastError);
      return;
    }
    if (!this.#sync) {
      done();
      return;
    }
    if (!this.#dirty) {
      // Everything written is either synced or inside the sync in flight.
      if (this.#syncing) this.#inflight.push(done);
      else done();
      return;
    }
    this.#waiters.push(done);
    // Group commit: every ack asked for in this turn of the event loop shares one fsync.
    this.#immediate ??= setImmediate(() => {
      this.#immediate = undefined;
      this.#startSync();
    });
  }

  /**
   * Start an fdatasync off the event loop (libuv's thread pool), so delivery to clients never waits for
   * the disk. Records written meanwhile wait for the next one.
   */
  #startSync(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#syncing) return;
    const fd = this.#fd;
    if (!this.#dirty || fd === undefined || this.#lastError) {
      const waiters = this.#waiters;
      this.#waiters = [];
      for (const w of waiters) w(this.#lastError);
      return;
    }
    this.#syncing = true;
    this.#dirty = false;
    this.#inflight = this.#waiters;
    this.#waiters = [];
    fdatasync(fd, (err) => {
      this.#syncing = false;
      this.#syncs++;
      if (err && this.#fd === fd) this.#lastError = err;
      const done = this.#inflight;
      this.#inflight = [];
      for (const w of done) w(this.#lastError);
      if (this.#closeAfterSync === fd) {
        this.#closeAfterSync = undefined;
        closeSync(fd);
      }
      if (this.#waiters.length > 0) this.#startSync();
      else if (this.#dirty && this.#fd !== undefined) this.#armTimer();
    });
  }

  #armTimer(): void {
    if (this.#timer !== undefined || !this.#sync) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#startSync();
    }, this.#syncIntervalMs);
    this.#timer.unref();
  }

  /** Sync now, on this thread, and run the waiting callbacks (benchmarks; shutdown). */
  flush(): void {
    if (this.#immediate) clearImmediate(this.#immediate);
    this.#immediate = undefined;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#dirty && this.#fd !== undefined && this.#sync && !this.#lastError) {
      try {
        fdatasyncSync(this.#fd);
        this.#syncs++;
        this.#dirty = false;
      } catch (err) {
        this.#lastError = err instanceof Error ? err : new Error(String(err));
      }
    }
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w(this.#lastError);
  }

  /** Clean shutdown: sync, close, then the marker that lets the next start keep the epoch. */
  close(): void {
    if (this.#immediate) clearImmediate(this.#immediate);
    this.#immediate = undefined;
    const fd = this.#fd;
    if (fd === undefined) return;
    let ok = this.#lastError === undefined;
    try {
      ftruncateSync(fd, this.#pos);
      fsyncSync(fd);
    } catch {
      ok = false;
    }
    this.#dirty = false;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w(ok ? undefined : (this.#lastError ?? new Error('event log close failed')));
    this.#fd = undefined;
    this.#release(fd);
    if (!ok) return;
    const dir = this.#opts.dir;
    const tmp = join(dir, `${CLEAN_MARKER}.tmp`);
    writeFileSync(
      tmp,
      JSON.stringify({
        epoch: this.#epoch,
        lastOffset: this.#lastOffset,
        segment: this.#segmentName(this.#segment),
      }),
    );
    const mfd = openSync(tmp, 'r');
    fsyncSync(mfd);
    closeSync(mfd);
    renameSync(tmp, join(dir, CLEAN_MARKER));
    syncDir(dir);
  }
}
