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
  fdatasync,
  fdatasyncSync,
  fsyncSync,
  fstatSync,
  ftruncateSync,
  openSync,
  renameSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { encodeRecordBody, recordBodyText, type LogKind } from '../protocol/log-record.ts';
import type { EventLogSink } from '../domain/journal.ts';
import type { RecoveredLog } from '../domain/recovery.ts';
import { CLEAN_MARKER, listSegments, recoverLog, syncDir, type RecoveryReport } from './log-recovery.ts';

export { CLEAN_MARKER, listSegments, readLog, type RecoveryReport } from './log-recovery.ts';
/** Checkpoint entries per record: keeps each record far below the decoder's size bound. */
const CHECKPOINT_CHUNK_BYTES = 1024 * 1024;
/**
 * Segments grow in zero-filled steps of this size ahead of the writes. Overwriting blocks that already
 * exist lets fdatasync skip the file-size metadata update, which measured 2.5-3x more syncs per second on
 * ext4 here. A zero tail is unused space; a clean close trims it.
 */
const PREALLOCATE_MAX_BYTES = 4 * 1024 * 1024;
const ZEROS = Buffer.alloc(64 * 1024);
/**
 * Records held for one write (#pending) at most: a job that appends more (a client leaving with a large
 * state marks it stale in turns of about 1 MiB) writes them in pieces of about this size.
 */
const MAX_PENDING_BYTES = 256 * 1024;
/** After a write error, how often an append may try to reopen the log in a new segment. */
const REOPEN_RETRY_MS = 1000;

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
  /** Monotonic milliseconds for the sync deadline (injected by tests); default `performance.now`. */
  monotonicMs?: () => number;
}

export class EventLog implements EventLogSink {
  readonly #opts: EventLogOptions;
  readonly #sync: boolean;
  readonly #syncIntervalMs: number;
  #fd: number | undefined;
  #segment = 0;
  /** Bytes of the current segment: header, checkpoint and records (the rotation measure). */
  #size = 0;
  /** Bytes of the current segment's header and checkpoint, and of the records appended after them. */
  #checkpointBytes = 0;
  #recordBytes = 0;
  /** Records appended to the current segment since its header and checkpoint. */
  #recordsInSegment = 0;
  /** Segments started since this log was opened (each one writes a checkpoint of the whole state). */
  #rotations = 0;
  /** The current segment's checkpoint is not synced yet: older segments stay until it is. */
  #pruneAfterSync = false;
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
  /** Wall time of the last completed sync (0 before the first). */
  #lastSyncAt = 0;
  #lastError: Error | undefined;
  /** A write or sync failed in this run: no clean-shutdown marker (the next start opens a new epoch). */
  #failedThisRun = false;
  #retryAt = 0;
  #dirty = false;
  /** Monotonic time of the oldest record not yet inside a sync: the interval counts from it. */
  #dirtySince = 0;
  #timer: NodeJS.Timeout | undefined;
  #immediate: NodeJS.Immediate | undefined;
  #waiters: ((err?: Error) => void)[] = [];
  /** Callbacks satisfied by the fdatasync in flight. */
  #inflight: ((err?: Error) => void)[] = [];
  #syncing = false;
  #closeAfterSync: number | undefined;
  #checkpoint: () => Iterable<string> = () => [];
  #startNew: { index: number; firstOffset: number } | undefined;
  /**
   * Records appended in the current job (synchronous run of the event loop), not yet written: they are
   * written together, with one write(), by `writePending()`, which runs before any socket write that could
   * deliver them (the client transport calls it, io/ws-transport.ts `beforeWrite`), before any sync,
   * rotation or close, and at the latest when the job ends (process.nextTick). Nothing leaves the process
   * in between, so "written before the message it carries is delivered" holds as with one write per
   * record (docs/performance.md "Event log writes").
   */
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #pendingScheduled = false;
  readonly #writePendingTick = (): void => {
    this.#pendingScheduled = false;
    this.writePending();
  };

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
  get lastSyncAt(): number {
    return this.#lastSyncAt;
  }
  get dir(): string {
    return this.#opts.dir;
  }
  get syncs(): number {
    return this.#syncs;
  }
  /** Segments started (checkpoints of the whole state written) since open: the rotation cost. */
  get rotations(): number {
    return this.#rotations;
  }
  /** Bytes appended to the current segment (its used size; the file itself is preallocated ahead). */
  get segmentBytes(): number {
    return this.#pos + this.#pendingBytes;
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
    const r = recoverLog(this.#opts.dir, this.#opts.now, this.#opts.newEpoch);
    this.#report = r.report;
    this.#recovered = r.recovered;
    this.#epoch = r.recovered.epoch;
    this.#lastOffset = r.recovered.lastOffset;
    this.#startNew = r.startNew;
    if (r.append !== undefined) this.#segment = r.append;
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
    this.#size = this.#pos;
    // The segment's checkpoint was the state at its start; today's state is the estimate of its size, so
    // the rotation rule (#shouldRotate) does not rewrite a large state right after a restart.
    let cp = 0;
    for (const e of checkpoint()) cp += e.length + 1;
    this.#checkpointBytes = Math.min(cp, this.#pos);
    this.#recordBytes = this.#pos - this.#checkpointBytes;
    this.#recordsInSegment = 1;
  }

  /**
   * Rotate before a record that would take the segment past maxFileSize, but only once the records since
   * the checkpoint are at least as large as the checkpoint: a new segment rewrites the whole state, so this
   * bounds that cost to what was appended (at most one byte of checkpoint per byte of records, amortised),
   * whatever the state's size. With a state smaller than half a segment the first condition decides (no
   * segment over maxFileSize by more than one record); with a larger one, segments grow to about twice the
   * state (docs/performance.md "Event log"). A segment always takes at least one record.
   */
  #shouldRotate(recordLength: number): boolean {
    return (
      this.#recordsInSegment > 0 &&
      this.#size + recordLength > this.#opts.maxFileBytes &&
      this.#recordBytes + recordLength > this.#checkpointBytes
    );
  }

  #segmentName(index: number): string {
    return `events-${String(index).padStart(8, '0')}.tblog`;
  }

  #startSegment(index: number, firstOffset: number): void {
    // The records appended before the rotation belong to the finished segment.
    if (this.#fd !== undefined) this.#writePendingOrThrow();
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
      this.#write(encodeRecordBody(recordBodyText(firstOffset - 1, now, 'checkpoint', body)), false);
      chunk = [];
      bytes = 0;
    };
    for (const e of this.#checkpoint()) {
      chunk.push(e);
      bytes += e.length;
      if (bytes >= CHECKPOINT_CHUNK_BYTES) flush();
    }
    flush();
    // The segment's size counts its header and checkpoint too (maxFileSize is a file size).
    this.#size = this.#pos;
    this.#checkpointBytes = this.#pos;
    this.#recordBytes = 0;
    this.#recordsInSegment = 0;
    this.#rotations++;
    // The new file's name must survive a power cut before any older segment goes.
    syncDir(this.#opts.dir);
    // The checkpoint must be on disk before any older segment goes (together they hold the live keys). Its
    // fdatasync is the next group commit, off the event loop (#startSync): the older segments are removed
    // when that sync completes (#prune), and every ack of a record after the checkpoint waits for it.
    this.#pruneAfterSync = true;
    if (!this.#dirty) this.#dirtySince = this.#mono();
    this.#dirty = true;
    this.#armTimer();
  }

  /** #prune from a sync callback: a failure there is a log failure, never an exception on the loop. */
  #pruneSafely(): void {
    try {
      this.#prune();
    } catch (err) {
      this.#fail(err);
    }
  }

  /** Remove segments beyond maxFiles, once the newest one's checkpoint is synced; then sync the directory. */
  #prune(): void {
    if (!this.#pruneAfterSync) return;
    this.#pruneAfterSync = false;
    const segments = listSegments(this.#opts.dir);
    if (segments.length <= this.#opts.maxFiles) return;
    while (segments.length > this.#opts.maxFiles) {
      const old = segments.shift() as { name: string };
      unlinkSync(join(this.#opts.dir, old.name));
    }
    syncDir(this.#opts.dir);
  }

  /** Close a descriptor, or leave it to the sync in flight on it. */
  #release(fd: number): void {
    if (this.#syncing) this.#closeAfterSync = fd;
    else closeSync(fd);
  }

  /**
   * Write the records appended in this job (#pending) with one write(). Public for the client transport,
   * which calls it before writing to any socket; a failure is a log failure (#fail), as in append.
   */
  writePending(): void {
    if (this.#pendingBytes === 0) return;
    try {
      this.#writePendingOrThrow();
    } catch (err) {
      this.#fail(err);
    }
  }

  #writePendingOrThrow(): void {
    if (this.#pendingBytes === 0) return;
    const list = this.#pending;
    const bytes = this.#pendingBytes;
    this.#pending = [];
    this.#pendingBytes = 0;
    // Counted in the segment's size and record bytes when appended (#shouldRotate sees them at once).
    this.#size -= bytes;
    this.#recordBytes -= bytes;
    this.#write(list.length === 1 ? (list[0] as Buffer) : Buffer.concat(list, bytes));
  }

  /** Write at the end; `preallocate` false for checkpoint chunks (the file grows as written, no zeros first). */
  #write(buf: Buffer, preallocate = true): void {
    const fd = this.#fd;
    if (fd === undefined) return;
    if (preallocate && this.#pos + buf.length > this.#allocated) {
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
    if (this.#pos > this.#allocated) this.#allocated = this.#pos;
    this.#size += buf.length;
    this.#recordBytes += buf.length;
  }

  append(offset: number, time: number, kind: LogKind, json: string): void {
    if (this.#fd === undefined) return;
    if (this.#lastError && !this.#reopen(offset)) return;
    try {
      const buf = encodeRecordBody(recordBodyText(offset, time, kind, json));
      if (this.#shouldRotate(buf.length)) this.#startSegment(this.#segment + 1, offset);
      this.#pending.push(buf);
      this.#pendingBytes += buf.length;
      this.#size += buf.length;
      this.#recordBytes += buf.length;
      if (this.#pendingBytes >= MAX_PENDING_BYTES) this.#writePendingOrThrow();
      else if (!this.#pendingScheduled) {
        this.#pendingScheduled = true;
        process.nextTick(this.#writePendingTick);
      }
      this.#recordsInSegment++;
      this.#lastOffset = offset;
      this.#appended++;
      if (!this.#dirty) this.#dirtySince = this.#mono();
      this.#dirty = true;
      this.#armTimer();
    } catch (err) {
      // A full disk must not take the hub down: health reports the log as degraded, acks are refused
      // until a later append manages to reopen the log (#reopen).
      this.#fail(err);
    }
  }

  #fail(err: unknown): void {
    // Records not yet written go with the segment: the reopened one starts with a checkpoint of the state
    // they led to (#reopen).
    this.#size -= this.#pendingBytes;
    this.#recordBytes -= this.#pendingBytes;
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#lastError = err instanceof Error ? err : new Error(String(err));
    this.#failedThisRun = true;
    this.#retryAt = this.#mono() + REOPEN_RETRY_MS;
  }

  /**
   * After a write or sync error the current segment may end in a torn record and its unsynced pages may be
   * gone (a failed fsync does not keep them dirty): it is never written again. Instead a new segment starts
   * at `offset` with a checkpoint of the whole state, which holds whatever the lost records led to; only once
   * that is written does the log accept appends (and acks) again. At most one attempt per REOPEN_RETRY_MS.
   * A run that failed never writes the clean-shutdown marker, so the next start opens a new epoch and no
   * offset from before the hole is ever replayed across it.
   */
  #reopen(offset: number): boolean {
    if (this.#mono() < this.#retryAt || this.#syncing) return false;
    const old = this.#fd;
    const index = this.#segment + 1;
    const name = join(this.#opts.dir, this.#segmentName(index));
    try {
      // The damaged segment is left as it is (recovery cuts it at its damage); no truncate, no sync.
      this.#fd = undefined;
      // What the damaged segment held unsynced is not waited for; the new one is dirty with its checkpoint.
      this.#dirty = false;
      this.#startSegment(index, offset);
    } catch (err) {
      const partial = this.#fd;
      this.#fd = old;
      this.#segment = index - 1;
      if (partial !== undefined) closeSync(partial);
      // A half-written checkpoint must not be taken for the state at its offset.
      try {
        unlinkSync(name);
      } catch {
        // Not created, or the directory itself fails: recovery treats a torn checkpoint as damage.
      }
      this.#fail(err);
      return false;
    }
    if (old !== undefined) this.#release(old);
    this.#lastError = undefined;
    return true;
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
    this.writePending();
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
      if (!err) this.#lastSyncAt = this.#opts.now();
      if (err && this.#fd === fd) this.#fail(err);
      if (!err && this.#fd === fd && !this.#lastError) this.#pruneSafely();
      const done = this.#inflight;
      this.#inflight = [];
      for (const w of done) w(this.#lastError);
      if (this.#closeAfterSync === fd) {
        this.#closeAfterSync = undefined;
        closeSync(fd);
      }
      if (this.#waiters.length > 0) this.#startSync();
      else if (this.#dirty && this.#fd !== undefined) {
        // The timer armed while the sync was in flight waited a full interval from then: re-arm by deadline.
        if (this.#timer) clearTimeout(this.#timer);
        this.#timer = undefined;
        this.#armTimer();
      }
    });
  }

  #mono(): number {
    return this.#opts.monotonicMs ? this.#opts.monotonicMs() : performance.now();
  }

  /**
   * Sync by the oldest unsynced record's deadline (`syncIntervalMs` after it was written): records written
   * while a sync was in flight are synced at once when that sync ends after their deadline.
   */
  #armTimer(): void {
    if (this.#timer !== undefined || !this.#sync) return;
    const wait = Math.max(0, this.#dirtySince + this.#syncIntervalMs - this.#mono());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#startSync();
    }, wait);
    this.#timer.unref();
  }

  /** Sync now, on this thread, and run the waiting callbacks (benchmarks; shutdown). */
  flush(): void {
    this.writePending();
    if (this.#immediate) clearImmediate(this.#immediate);
    this.#immediate = undefined;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#dirty && this.#fd !== undefined && this.#sync && !this.#lastError) {
      try {
        fdatasyncSync(this.#fd);
        this.#syncs++;
        this.#lastSyncAt = this.#opts.now();
        this.#dirty = false;
        this.#prune();
      } catch (err) {
        this.#fail(err);
      }
    }
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w(this.#lastError);
  }

  /** Clean shutdown: sync, close, then the marker that lets the next start keep the epoch. */
  close(): void {
    this.writePending();
    if (this.#immediate) clearImmediate(this.#immediate);
    this.#immediate = undefined;
    const fd = this.#fd;
    if (fd === undefined) return;
    let ok = this.#lastError === undefined && !this.#failedThisRun;
    try {
      ftruncateSync(fd, this.#pos);
      fsyncSync(fd);
      this.#prune();
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
