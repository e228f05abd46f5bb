/**
 * Reading the event log back at start (README "Durability"): every segment keeps its readable records up
 * to its first damage (bad CRC, torn or zero-filled record in the middle, offset out of order, missing
 * header); a damaged segment is copied whole to `<name>.quarantine-<ms>` before it is cut at the damage;
 * later intact segments are kept (their checkpoint restores what the lost stretch led to). Only a start that
 * finds a matching clean-shutdown marker keeps the epoch.
 */
import {
  closeSync,
  copyFileSync,
  existsSync,
  fsyncSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  unlinkSync,
} from 'node:fs';
import { join } from 'node:path';
import { scanRecords, type LogRecord } from '../protocol/log-record.ts';
import type { RecoveredLog } from '../domain/recovery.ts';

const FILE_RE = /^events-(\d{8})\.tblog$/;
export const CLEAN_MARKER = 'clean-shutdown.json';

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
  lost: {
    file: string;
    byte: number;
    reason: string;
    afterOffset: number;
    nextOffset?: number;
    /** Wall time of the last record read before the stretch, and of the first after it (or of this start). */
    fromTime: number;
    toTime: number;
  }[];
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
    const r = scanRecords(readFileSync(join(dir, seg.name)));
    records.push(...r.records);
    if (r.stopReason && r.stopReason !== 'zero-fill') torn.push({ file: seg.name, stopReason: r.stopReason });
  }
  return { records, torn };
}

export function syncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export interface RecoveryResult {
  report: RecoveryReport;
  recovered: RecoveredLog;
  /** A clean start: append to this segment. */
  append?: number;
  /** Any other start: open this segment in a new epoch. */
  startNew?: { index: number; firstOffset: number };
}

/** Read back `dir`: keep what is readable, quarantine damage, decide the epoch (`newEpoch()` unless clean). */
export function recoverLog(dir: string, now: () => number, newEpoch: () => string): RecoveryResult {
  mkdirSync(dir, { recursive: true });

  const marker = takeMarker(dir);
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
  /** The segment whose checkpoint is the base of the state (the oldest read, or the first after damage). */
  let baseSegment: string | undefined;
  /** Wall time of the newest record read so far. */
  let lastTime = 0;
  for (const seg of segments) {
    const file = join(dir, seg.name);
    const buf = readFileSync(file);
    let order = lastOffset;
    let reject: string | undefined;
    const r = scanRecords(buf, (rec, n) => {
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
      if (open && open.nextOffset === undefined) {
        open.nextOffset = meta.firstOffset;
        open.toTime = (r.records[0] as LogRecord).t;
      }
      epoch = meta.epoch;
      for (const rec of r.records) {
        if (rec.k === 'meta') continue;
        if (rec.k === 'checkpoint') {
          // The checkpoint is the whole state at the segment start. After a damaged stretch it replaces
          // everything read before (some deletions may be in the lost part); otherwise the oldest one is
          // the base and later ones repeat what the records built.
          // A checkpoint larger than one record spans several (CHECKPOINT_CHUNK_BYTES in event-log.ts):
          // every one of the base segment's checkpoint records belongs to the base.
          if (damagedBefore && rec.o >= lastOffset) {
            records = records.filter((x) => x.k !== 'checkpoint' && x.k !== 'state');
            damagedBefore = false;
          } else if (haveBase && baseSegment !== seg.name) continue;
          haveBase = true;
          baseSegment = seg.name;
          records.push(rec);
          continue;
        }
        lastOffset = rec.o;
        lastTime = Math.max(lastTime, rec.t);
        records.push(rec);
      }
      haveBase = true;
    }
    if (stop === undefined) continue;
    // Damage: keep the readable records, copy the file whole to quarantine, cut the original there.
    damage ??= { file: seg.name, byte: r.goodBytes, reason: stop };
    // Until a later segment says otherwise, the stretch may reach up to this start.
    lost.push({
      file: seg.name,
      byte: r.goodBytes,
      reason: stop,
      afterOffset: order,
      fromTime: lastTime,
      toTime: now(),
    });
    damagedBefore = true;
    lostBytes += buf.length - r.goodBytes;
    const copy = `${seg.name}.quarantine-${now()}`;
    copyFileSync(file, join(dir, copy));
    // The copy's contents and name must be on disk before the original is cut: a power cut may otherwise
    // keep the cut and lose the evidence.
    const cfd = openSync(join(dir, copy), 'r');
    try {
      fsyncSync(cfd);
    } finally {
      closeSync(cfd);
    }
    syncDir(dir);
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
  const runEpoch = clean ? (epoch as string) : newEpoch();
  const report: RecoveryReport = {
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
  const recovered: RecoveredLog = {
    epoch: runEpoch,
    lastOffset,
    // A clean start can replay from the start of its epoch; a new epoch from nothing older than itself.
    floorOffset: clean ? epochFirstOffset - 1 : lastOffset,
    records,
    lost: lost.map((l) => ({ fromTime: l.fromTime, toTime: l.toTime })),
  };
  const last = remaining.at(-1);
  return clean && last
    ? { report, recovered, append: last.index }
    : {
        report,
        recovered,
        startNew: { index: (last?.index ?? segments.at(-1)?.index ?? 0) + 1, firstOffset: lastOffset + 1 },
      };
}

/** Read and remove the clean-shutdown marker (durably, before anything new is written). */
export function takeMarker(dir: string): { epoch: string; lastOffset: number; segment: string } | undefined {
  const path = join(dir, CLEAN_MARKER);
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
  syncDir(dir);
  return marker;
}
