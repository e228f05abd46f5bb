import { readFileSync, statSync } from 'node:fs';
import type { Logger } from '@broadcast-ops/core';
import { LEAP_LIST_MAX_BYTES, parseLeapSecondsList, type LeapSecondsList } from '../domain/leap.ts';

/** How often the list file is re-read (tzdata updates replace it in place). */
const RELOAD_MS = 3600_000;
/** An expired list is warned about at most this often. */
const EXPIRED_WARN_MS = 24 * 3600_000;

/**
 * The leap-seconds list from `ntp.leap_seconds_file` (docs/leap-seconds.md): read at start and every hour;
 * an unreadable or malformed file is logged and ignored (the sources' vote decides), an expired one is
 * logged as a warning (at most daily) and ignored, since it can no longer say whether a leap is coming.
 */
export class LeapListFile {
  #list: LeapSecondsList | undefined;
  #timer: NodeJS.Timeout | undefined;
  #warnedExpiredAt = Number.NEGATIVE_INFINITY;

  constructor(
    readonly path: string,
    readonly logger: Logger,
    readonly nowUnixMs: () => number,
  ) {}

  /** The list while it is valid (loaded and not expired), else undefined. */
  current(): LeapSecondsList | undefined {
    const l = this.#list;
    if (l === undefined) return undefined;
    const now = this.nowUnixMs();
    if (l.expiresUnixMs <= now) {
      if (now - this.#warnedExpiredAt >= EXPIRED_WARN_MS) {
        this.#warnedExpiredAt = now;
        this.logger.warn(
          { path: this.path, expired: new Date(l.expiresUnixMs).toISOString() },
          'leap-seconds list has expired and is ignored; leap seconds come from the sources only',
        );
      }
      return undefined;
    }
    return l;
  }

  load(): void {
    try {
      if (statSync(this.path).size > LEAP_LIST_MAX_BYTES) throw new Error('file too large');
      this.#list = parseLeapSecondsList(readFileSync(this.path, 'utf8'));
      this.current();
    } catch (err) {
      this.#list = undefined;
      this.logger.error({ path: this.path, err: (err as Error).message }, 'cannot use the leap-seconds list');
    }
  }

  start(): void {
    this.load();
    this.#timer = setInterval(() => {
      this.load();
    }, RELOAD_MS);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
