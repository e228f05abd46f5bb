import { execFile } from 'node:child_process';
import { closeSync, constants as fsConstants, openSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { ReadStream } from 'node:tty';
import type { Logger } from '@broadcast-ops/core';
import {
  GpsReceiverModel,
  gpsdoApiBody,
  satellitesApiBody,
  type GpsdoEvent,
  type GpsdoStatus,
  type GpsdoType,
  type GpsSample,
  type Satellite,
} from '../domain/gpsdo.ts';
import type { ReferenceSource, ReferenceStatus } from '../domain/reference-source.ts';
import { RefclockFilter } from '../domain/refclock-filter.ts';
import { NmeaLineBuffer, parseNmea } from '../protocol/nmea.ts';
import { parseGpsdLine, type GpsdMessage } from '../protocol/gpsd.ts';
import { parsePpsAssert, ppsSysfsPath } from '../protocol/pps.ts';
import type { Ticker } from './service-tick.ts';

/** node:fs/promises, loaded by the first PPS read rather than at every start (docs/at-rest.md). */
let fsPromisesModule: typeof import('node:fs/promises') | undefined;
async function fsPromises(): Promise<typeof import('node:fs/promises')> {
  return (fsPromisesModule ??= await import('node:fs/promises'));
}

/**
 * GPSDO reference sources (docs/gpsdo.md): the receiver model (domain/gpsdo.ts) fed by a driver — dummy,
 * serial NMEA + kernel PPS, or gpsd over TCP — and exposed to the clock manager as a `ReferenceSource` of
 * kind `gpsdo` (stratum 0, so the server is stratum 1 with `ntp.ref_id`).
 */

export interface GpsdoConfig {
  type: GpsdoType;
  serial_device: string;
  serial_baud: number;
  pps_device: string;
  network_address: string;
  poll_interval: number;
  /** The median filter's poll, seconds (a power of two; docs/gpsdo.md "Samples: a median filter per poll"). */
  filter_poll: number;
  nmea_delay: number;
  dummy: {
    locked: boolean;
    satellites: number;
    lose_lock_after: number;
    regain_lock_after: number;
    offset_ns: number;
  };
}

export interface GpsdoSourceOptions {
  config: GpsdoConfig;
  referenceId: number;
  logger: Logger;
  /**
   * Receives the filtered samples, one per `filter_poll` (one per receiver sample during acquisition):
   * offset = reference − host realtime + `hostOffsetS()`.
   */
  onSample: (id: string, sample: GpsSample & { jitterS: number }) => void;
  /**
   * Host realtime − the clock the samples are for (the service's raw clock), added to each receiver sample
   * as it is stored: a host clock step within a poll does not mix two scales in one filtered sample.
   */
  hostOffsetS?: () => number;
  /**
   * A poll whose kept samples span more than this gives no sample (the clock manager's step threshold,
   * `ntp.discipline.step_threshold`; domain/refclock-filter.ts `maxSpanS`). Default 128 ms.
   */
  stepThresholdS?: number;
  onEvent?: (e: GpsdoEvent) => void;
  monoMs?: () => number;
  wallMs?: () => number;
}

const IDS: Record<GpsdoType, string> = {
  dummy: 'GPSDO:Dummy',
  serialpps: 'GPSDO:SerialPPS',
  network: 'GPSDO:Network',
};

const RECONNECT_MS = 2000;
const PPS_POLL_MS = 250;
/**
 * Receiver samples handed on one by one after the filter starts (at start and at each lock): as many as the
 * clock manager needs before it may select a source (`min_samples`' default, an iburst's four), so a GPSDO
 * is selected seconds after it locks rather than four polls later (docs/gpsdo.md "Samples").
 */
export const GPSDO_BURST = 4;

export class GpsdoSource implements ReferenceSource {
  readonly id: string;
  readonly kind = 'gpsdo' as const;
  readonly prefer = false;
  readonly model: GpsReceiverModel;
  readonly #o: GpsdoSourceOptions;
  readonly #mono: () => number;
  readonly #wall: () => number;
  readonly #log: Logger;
  readonly #offsets: number[] = [];
  readonly #diffs = new Float64Array(7);
  readonly #filter: RefclockFilter;
  readonly #pollMs: number;
  readonly #hostOffsetS: () => number;
  /** Receiver samples still to hand on one by one (GPSDO_BURST after each lock). */
  #burstLeft = GPSDO_BURST;
  /** Monotonic ms of the receiver sample that closed the last poll (or the burst's last). */
  #pollStartMs: number | undefined;
  /** The reference status, replaced only when the lock changes (the clock manager reads it every second). */
  #status: ReferenceStatus | undefined;
  #timers: NodeJS.Timeout[] = [];
  #tick: Ticker | undefined;
  #offTicks: (() => void)[] = [];
  #closed = false;
  #tty: ReadStream | undefined;
  #sock: Socket | undefined;
  #lastSeq: number | undefined;
  #startedMs = 0;

  constructor(options: GpsdoSourceOptions) {
    this.#o = options;
    this.id = IDS[options.config.type];
    this.#mono = options.monoMs ?? (() => performance.now());
    this.#wall = options.wallMs ?? (() => Date.now());
    this.#log = options.logger;
    this.#pollMs = options.config.filter_poll * 1000;
    this.#filter = new RefclockFilter({ maxSpanS: options.stepThresholdS ?? 0.128 });
    this.#hostOffsetS = options.hostOffsetS ?? (() => 0);
    const type = options.config.type;
    this.model = new GpsReceiverModel({
      type,
      // serialpps needs PPS for lock; gpsd lock follows its fix (PPS used when gpsd reports it).
      ppsTimeoutMs: type === 'network' ? 0 : 2000,
      onSample: (s) => {
        this.#sample(s);
      },
      onEvent: (e) => {
        // A lock lost or (re)gained: what is stored does not reach the manager, and the next samples are
        // handed on one by one until it can select the source again (chrony drops its filter likewise when
        // a refclock's samples stop being valid).
        if (e.type === 'locked' || e.type === 'lock_lost') this.#restartFilter();
        this.#log.info({ gpsdo: this.id, event: e }, 'gpsdo event');
        options.onEvent?.(e);
      },
    });
  }

  status(): ReferenceStatus {
    const locked = this.model.locked;
    if (this.#status?.usable !== locked) {
      this.#status = {
        usable: locked,
        stratum: 0,
        referenceId: this.#o.referenceId,
        leap: 0,
        rootDelayS: 0,
        rootDispersionS: 0,
        // The filter's poll: the manager's run gap limit (4 polls) and the poll shown for the source.
        pollLog2: Math.round(Math.log2(this.#o.config.filter_poll)),
      };
    }
    return this.#status;
  }

  /** The receiver's full status (lock, satellites, position, PPS, identity, errors). */
  gpsdoStatus(): GpsdoStatus {
    return this.model.status(this.#mono());
  }

  /** The receiver's fix and last PPS (domain/gpsdo.ts signal), without the rest of `gpsdoStatus`. */
  signal(): { fixValid: boolean; lastPpsUnixMs: number | undefined } {
    return this.model.signal(this.#mono());
  }

  /** `/api/status/gpsdo` body. */
  apiStatus(): Record<string, unknown> {
    return gpsdoApiBody(this.gpsdoStatus(), this.#mono());
  }

  /** `/api/satellites` body. */
  apiSatellites(): Record<string, unknown>[] {
    return satellitesApiBody(this.gpsdoStatus());
  }

  #restartFilter(): void {
    this.#filter.drop();
    this.#pollStartMs = undefined;
    this.#burstLeft = GPSDO_BURST;
  }

  /**
   * A receiver sample: stored in the median filter (no allocation); handed on alone during the burst after
   * a lock, otherwise once a poll as the filter's combination of the poll's samples (docs/gpsdo.md
   * "Samples: a median filter per poll"; chrony's refclock.c `poll_timeout`).
   */
  #sample(s: GpsSample): void {
    const filter = this.#filter;
    if (!filter.add(s.atMonoMs, s.offsetS + this.#hostOffsetS(), s.dispersionS)) return;
    if (this.#burstLeft > 0 || this.#pollStartMs === undefined) {
      this.#burstLeft = Math.max(0, this.#burstLeft - 1);
      this.#pollStartMs = s.atMonoMs;
      const f = filter.take();
      if (f) this.#handOn(f.offsetS, f.atMs, f.dispersionS);
      return;
    }
    // The poll is closed by the first sample at or after its end, half a second of arrival jitter allowed
    // (the samples come once a second or so; with no sample there is nothing to hand on, and a lock loss
    // has emptied the filter already). So a 16 s poll combines the 16 samples after the last hand-on.
    if (s.atMonoMs - this.#pollStartMs < this.#pollMs - 500) return;
    this.#pollStartMs = s.atMonoMs;
    const f = filter.take();
    if (f) this.#handOn(f.offsetS, f.atMs, f.dispersionS);
  }

  #handOn(offsetS: number, atMonoMs: number, dispersionS: number): void {
    const offsets = this.#offsets;
    offsets.push(offsetS);
    if (offsets.length > 8) offsets.shift();
    // Jitter: the upper median of the successive differences of the last 8 handed-on offsets, at least the
    // sample's dispersion. Sorted in place in a kept array (docs/performance.md "At rest").
    const diffs = this.#diffs;
    const n = offsets.length - 1;
    for (let i = 0; i < n; i++) {
      const d = Math.abs((offsets[i + 1] ?? 0) - (offsets[i] ?? 0));
      let j = i;
      for (; j > 0 && (diffs[j - 1] ?? 0) > d; j--) diffs[j] = diffs[j - 1] ?? 0;
      diffs[j] = d;
    }
    const jitterS = n > 0 ? Math.max(dispersionS, diffs[n >> 1] ?? 0) : dispersionS;
    this.#o.onSample(this.id, { offsetS, atMonoMs, dispersionS, jitterS });
  }

  #every(ms: number, fn: () => void): void {
    if (ms === 1000 && this.#tick) {
      this.#offTicks.push(this.#tick.every(fn));
      return;
    }
    const t = setInterval(fn, ms);
    t.unref();
    this.#timers.push(t);
  }

  /** Start the receiver; its once-a-second work runs on the service's tick when given (service-tick.ts). */
  start(tick?: Ticker): void {
    this.#tick = tick;
    this.#startedMs = this.#mono();
    this.#every(1000, () => {
      this.model.tick(this.#mono());
    });
    switch (this.#o.config.type) {
      case 'dummy':
        this.#startDummy();
        break;
      case 'serialpps':
        this.#openSerial();
        this.#every(PPS_POLL_MS, () => {
          void this.#pollPps();
        });
        break;
      case 'network':
        this.#connectGpsd();
        break;
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    for (const off of this.#offTicks) off();
    this.#offTicks = [];
    this.#tty?.destroy();
    this.#sock?.destroy();
    await Promise.resolve();
  }

  // ---- dummy ----------------------------------------------------------------------------------------

  /**
   * Deterministic simulated receiver: a fixed constellation, a fix and a PPS tick every poll interval, the
   * reference equal to the host clock plus `offset_ns`. Lock is lost only when asked for
   * (`lose_lock_after` seconds; `regain_lock_after` seconds later it returns).
   */
  #startDummy(): void {
    const d = this.#o.config.dummy;
    this.model.setReceiver({ vendor: 'timesvc', model: 'dummy GPSDO', firmware: 'simulated' });
    this.model.setConnected(true);
    const sats: Satellite[] = [];
    for (let i = 0; i < d.satellites; i++) {
      sats.push({
        prn: [2, 5, 7, 9, 13, 15, 18, 20, 24, 27, 29, 30][i % 12] ?? i + 1,
        elevation: 15 + ((i * 37) % 70),
        azimuth: (i * 83) % 360,
        snr: 30 + ((i * 7) % 18),
        used: i < Math.max(4, d.satellites - 2),
      });
    }
    // Kept and updated in place: the dummy's fix each second allocates nothing (docs/performance.md "Fifth pass").
    const fix = {
      mode: 3,
      latitude: 51.4779,
      longitude: -0.0015,
      altitudeM: 45,
      hdop: 0.9,
      timeUnixMs: 0,
    };
    const unlockedSats = sats.map((s) => ({ ...s, snr: undefined, used: false }));
    const tick = (): void => {
      const now = this.#mono();
      const elapsedS = (now - this.#startedMs) / 1000;
      let locked = d.locked;
      if (d.lose_lock_after > 0 && elapsedS >= d.lose_lock_after) {
        locked = d.regain_lock_after > 0 && elapsedS >= d.lose_lock_after + d.regain_lock_after;
      }
      this.model.satellitesSeen(locked ? sats : unlockedSats, now);
      fix.mode = locked ? 3 : 1;
      fix.timeUnixMs = Math.floor(this.#wall() / 1000) * 1000;
      this.model.fix(fix, now);
      if (locked) this.model.timeSample(d.offset_ns / 1e9, now, 1e-6, true);
      else this.model.tick(now);
    };
    tick();
    this.#every(Math.max(100, this.#o.config.poll_interval * 1000), tick);
  }

  // ---- serial NMEA + kernel PPS ---------------------------------------------------------------------

  #openSerial(): void {
    if (this.#closed) return;
    const dev = this.#o.config.serial_device;
    const retry = (err: string): void => {
      this.model.setConnected(false, err);
      if (!this.#closed) setTimeout(() => this.#openSerial(), RECONNECT_MS).unref();
    };
    // Line settings through stty (coreutils): raw 8N1 at serial_baud; a pty ignores the speed.
    execFile('stty', ['-F', dev, String(this.#o.config.serial_baud), 'raw', '-echo'], (sttyErr) => {
      if (this.#closed) return;
      if (sttyErr) this.model.error('serial_config');
      let fd: number;
      try {
        fd = openSync(dev, fsConstants.O_RDONLY | fsConstants.O_NOCTTY | fsConstants.O_NONBLOCK);
      } catch (err) {
        retry(`serial: ${(err as Error).message}`);
        return;
      }
      let tty: ReadStream;
      try {
        tty = new ReadStream(fd);
      } catch (err) {
        closeSync(fd);
        retry(`serial: ${(err as Error).message}`);
        return;
      }
      this.#tty = tty;
      const lines = new NmeaLineBuffer();
      let overlong = 0;
      this.model.setConnected(true);
      tty.on('data', (chunk: Buffer) => {
        const now = this.#mono();
        for (const line of lines.push(chunk)) {
          const p = parseNmea(line);
          if (p.ok) this.model.sentence(p.value, now);
          else this.model.error(`nmea_${p.error.code}`);
        }
        while (overlong < lines.overlong) {
          overlong++;
          this.model.error('nmea_overlong');
        }
      });
      let done = false;
      const gone = (why: string): void => {
        if (done) return;
        done = true;
        tty.destroy();
        if (this.#tty === tty) this.#tty = undefined;
        this.#log.warn({ device: dev, why }, 'gpsdo serial device lost; reopening');
        retry(`serial: ${why}`);
      };
      // A pty whose other side closed, or an unplugged USB receiver, ends with EIO.
      tty.on('error', (err) => gone(err.message));
      tty.on('end', () => gone('end of stream'));
      tty.on('close', () => gone('closed'));
    });
  }

  async #pollPps(): Promise<void> {
    const path = ppsSysfsPath(this.#o.config.pps_device);
    let text: string;
    try {
      text = await (await fsPromises()).readFile(path, 'latin1');
    } catch {
      this.model.error('pps_read');
      return;
    }
    const wall = this.#wall();
    const mono = this.#mono();
    const read = parsePpsAssert(text);
    if (!read.ok) {
      this.model.error('pps_format');
      return;
    }
    const a = read.value;
    if (a.sequence === this.#lastSeq || (a.sec === 0 && a.nsec === 0)) return;
    this.#lastSeq = a.sequence;
    // The edge on the monotonic clock: its age by the realtime clock, taken back from now.
    const ageMs = wall - (a.sec * 1000 + a.nsec / 1e6);
    this.model.pps({ ...a, edgeMonoMs: mono - ageMs }, mono);
  }

  // ---- gpsd -----------------------------------------------------------------------------------------

  #connectGpsd(): void {
    if (this.#closed) return;
    const addr = this.#o.config.network_address;
    const i = addr.lastIndexOf(':');
    const host = (i > 0 ? addr.slice(0, i) : addr).replace(/^\[|\]$/g, '');
    const port = i > 0 ? Number(addr.slice(i + 1)) : 2947;
    const sock = connect({ host, port });
    this.#sock = sock;
    sock.setNoDelay(true);
    let buf = '';
    let done = false;
    const gone = (why: string): void => {
      if (done) return;
      done = true;
      sock.destroy();
      this.model.setConnected(false, `gpsd: ${why}`);
      if (!this.#closed) setTimeout(() => this.#connectGpsd(), RECONNECT_MS).unref();
    };
    sock.on('connect', () => {
      this.model.setConnected(true);
      sock.write('?WATCH={"enable":true,"json":true,"pps":true}\n');
    });
    sock.on('data', (chunk: Buffer) => {
      buf += chunk.toString('utf8');
      for (;;) {
        const nl = buf.indexOf('\n');
        if (nl < 0) break;
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        this.#gpsdLine(line);
      }
      // gpsd's longest objects (SKY with many satellites) are a few KiB; 64 KiB bounds a broken peer.
      if (buf.length > 65_536) {
        this.model.error('gpsd_overlong');
        buf = '';
      }
    });
    sock.on('error', (err) => gone(err.message));
    sock.on('close', () => gone('connection closed'));
  }

  #gpsdLine(line: string): void {
    const now = this.#mono();
    const parsed = parseGpsdLine(line);
    if (!parsed.ok) {
      this.model.error('gpsd_bad_json');
      return;
    }
    const m: GpsdMessage = parsed.value;
    switch (m.class) {
      case 'VERSION':
        this.model.setReceiver({ firmware: `gpsd ${m.release}` });
        break;
      case 'DEVICE':
        this.model.setReceiver({
          ...(m.driver ? { vendor: m.driver } : {}),
          ...(m.subtype ? { model: m.subtype } : {}),
        });
        break;
      case 'TPV':
        this.model.fix(
          {
            mode: m.mode,
            latitude: m.lat,
            longitude: m.lon,
            altitudeM: m.alt,
            timeUnixMs: m.timeUnixMs,
          },
          now,
        );
        break;
      case 'SKY':
        if (m.satellites) this.model.satellitesSeen(m.satellites, now);
        if (m.hdop !== undefined) this.model.setHdop(m.hdop);
        break;
      case 'TOFF':
      case 'PPS': {
        // real − clock: the receiver's time of the event − the gpsd host's realtime at it. SOCK-grade for
        // TOFF (serial latency, ~10 ms); PPS-grade for PPS (docs/gpsdo.md "gpsd").
        const offsetS =
          m.realSec -
          m.clockSec +
          (m.realNsec - m.clockNsec) / 1e9 +
          (m.class === 'TOFF' ? this.#o.config.nmea_delay : 0);
        const ageMs = this.#wall() - (m.clockSec * 1000 + m.clockNsec / 1e6);
        this.model.timeSample(
          offsetS,
          now - Math.max(0, ageMs),
          m.class === 'PPS' ? 1e-6 : 10e-3,
          m.class === 'PPS',
        );
        break;
      }
      default:
        break;
    }
  }
}
