/**
 * vMix input for one `http_mixer` server: the `/api` document every `pollIntervalMs`, never two requests at
 * once, each bounded by `timeoutMs` and by the XML size limit.
 *
 * With `tallyApi: "tcp"` (the default) the document comes over vMix's TCP API (`tcpPort`, 8099) while it
 * answers: `SUBSCRIBE TALLY`, and every `TALLY OK` push asks for the document at once, so a cut reaches the
 * outputs in one round trip instead of up to one poll interval (docs/TALLY.md). The number → key mapping
 * for the pushed digits is always taken from a document asked for after the push. When the TCP API does not
 * answer, the HTTP `GET http://<ip>:<port>/api` poll is used (keep-alive, one socket) and the TCP API is
 * tried again with backoff (1 s to 30 s).
 *
 * A mixer declared offline (`offlineAfterFailures` failed polls) is polled with backoff: the period doubled
 * per further failure up to 5 s (domain/backoff.ts pollDelayMs; at the cap on the monitor's retry grid),
 * back to `pollIntervalMs` with its first answer. Its poll first opens a bare TCP connection to the HTTP
 * port and sends the request only once that connects.
 *
 * Tally knows it is stale: with no document for two poll intervals, or at once when the TCP link drops,
 * every input's tally is `unknown` (domain/mixer-tally.ts), never its last colour.
 */
import { Agent, request, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { StringDecoder } from 'node:string_decoder';
import type { Logger, TimerHandle } from '@broadcast-ops/core';
import type { HttpServerConfig } from '../config.ts';
import { OFFLINE_POLL_MAX_MS, pollDelayMs, reconnectDelayMs } from '../domain/backoff.ts';
import type { TallyDigit } from '../domain/mixer-tally.ts';
import { VmixReducer } from '../domain/vmix-reducer.ts';
import { parseVmixXml, VMIX_MAX_XML_BYTES } from '../protocol/vmix.ts';
import { deadlineUnlessSettled } from './deadline.ts';
import type { InputContext } from './input-context.ts';
import { scheduleRetry } from './retry-grid.ts';
import { VmixTcpLink } from './vmix-tcp-link.ts';

/** TCP API reconnect backoff bounds. */
const TCP_RETRY_MIN_MS = 1000;
const TCP_RETRY_MAX_MS = 30_000;

export interface VmixPollerOptions extends InputContext {
  server: HttpServerConfig;
  port: number;
  /** Jitter source of the offline poll backoff (tests fix it). */
  random?: () => number;
}

class PollError extends Error {
  constructor(
    readonly kind: 'timeout' | 'http-status' | 'too-large' | 'network',
    message: string,
  ) {
    super(message);
  }
}

export class VmixPoller {
  readonly #o: VmixPollerOptions;
  readonly #reducer: VmixReducer;
  readonly #agent = new Agent({ keepAlive: true, maxSockets: 1 });
  readonly #logger: Logger;
  #timer: TimerHandle | undefined;
  #closed = false;
  #inFlight: (() => void) | undefined;
  #lastVersion = '';
  #lastBody = '';
  #offlineLogged = false;
  /** Failed polls in a row (reset by any document). */
  #failedPolls = 0;
  #link: VmixTcpLink | undefined;
  #linkAttempts = 0;
  #linkTimer: TimerHandle | undefined;
  #connecting = false;
  /** The last `TALLY OK` digits pushed over the link (cleared when it drops). */
  #digits: TallyDigit[] | undefined;
  /** A push-triggered document request runs; `#again` = another push came meanwhile. */
  #pushing = false;
  #again = false;
  #tallyStale: TimerHandle | undefined;

  constructor(options: VmixPollerOptions) {
    this.#o = options;
    this.#logger = options.logger.child({ device: options.server.id });
    this.#reducer = new VmixReducer({
      framerate: options.server.framerate,
      defaultFramerate: options.defaultFramerate,
      offlineAfterFailures: options.server.offlineAfterFailures,
    });
  }

  start(): void {
    this.#schedule(0);
    if (this.#o.server.tallyApi === 'tcp') this.#connectTcp();
  }

  /** Whether the TCP API link is up (the tally is pushed). */
  get tcpLinked(): boolean {
    return this.#link?.open === true;
  }

  #connectTcp(): void {
    if (this.#closed || this.#connecting || this.#link) return;
    this.#connecting = true;
    const s = this.#o.server;
    VmixTcpLink.open({
      host: s.ip,
      port: s.tcpPort,
      timeoutMs: s.timeoutMs,
      clock: this.#o.clock,
      onTally: (digits) => this.#onTally(digits),
      onClose: (reason) => this.#onLinkClosed(reason),
      onMalformed: (error) => this.#o.malformed.report('vmix-tcp-malformed', { device: s.id, error }),
    }).then(
      (link) => {
        this.#connecting = false;
        if (this.#closed) {
          link.close();
          return;
        }
        this.#link = link;
        this.#linkAttempts = 0;
        this.#logger.info({ port: s.tcpPort }, 'vMix TCP API linked: tally is pushed');
        this.#pushRefresh();
      },
      (err: unknown) => {
        this.#connecting = false;
        if (this.#linkAttempts === 0) {
          this.#logger.info(
            { port: s.tcpPort, error: (err as Error).message },
            'vMix TCP API not answering: HTTP poll',
          );
        }
        this.#retryTcp();
      },
    );
  }

  #retryTcp(): void {
    if (this.#closed) return;
    const delay = reconnectDelayMs(this.#linkAttempts++, TCP_RETRY_MIN_MS, TCP_RETRY_MAX_MS, Math.random);
    this.#linkTimer = scheduleRetry(this.#o, delay, () => this.#connectTcp());
  }

  #onLinkClosed(reason: string): void {
    this.#link = undefined;
    this.#digits = undefined;
    if (this.#closed) return;
    this.#logger.warn({ reason }, 'vMix TCP API link lost: tally unknown, HTTP poll');
    // A dropped link: the tally is unknown at once (the HTTP poll, if vMix still answers, brings it back).
    this.#lastBody = '';
    this.#o.store.apply(this.#o.server.id, this.#reducer.tallyUnknown(), false);
    this.#retryTcp();
  }

  #onTally(digits: TallyDigit[]): void {
    this.#digits = digits;
    if (this.#pushing) this.#again = true;
    else this.#pushRefresh();
  }

  /** Ask for the document now (a tally push, or the link just opened) and apply it. */
  #pushRefresh(): void {
    const link = this.#link;
    if (!link || this.#closed) return;
    this.#pushing = true;
    this.#again = false;
    const digits = this.#digits;
    link.xml().then(
      (body) => {
        this.#pushing = false;
        if (!this.#closed) this.#applyBody(body, digits, 'tcp');
        if (this.#again) this.#pushRefresh();
      },
      () => {
        // The link reports its end through onLinkClosed.
        this.#pushing = false;
      },
    );
  }

  /** Tally with no document for two poll intervals is unknown (docs/TALLY.md, "Stale"). */
  #armTallyStale(): void {
    this.#tallyStale?.cancel();
    this.#tallyStale = this.#o.clock.setTimer(2 * this.#o.server.pollIntervalMs, () => {
      if (this.#closed) return;
      this.#lastBody = '';
      this.#o.store.apply(this.#o.server.id, this.#reducer.tallyUnknown(), false);
    });
  }

  /** The next poll in `ms`; an offline mixer's (`offline`) on the monitor's retry grid once at the cap. */
  #schedule(ms: number, offline = false): void {
    if (this.#closed) return;
    const poll = (): void => void this.#pollOnce();
    this.#timer = offline ? scheduleRetry(this.#o, ms, poll) : this.#o.clock.setTimer(ms, poll);
  }

  async #pollOnce(): Promise<void> {
    const started = this.#o.clock.monotonicMs();
    const link = this.#link;
    const digits = this.#digits;
    try {
      // An offline mixer is first asked for a bare TCP connection (closed at once): refused, the poll ends
      // there, without the HTTP client's request, agent and parser (docs/performance.md "At rest").
      if (!link && this.#failedPolls >= this.#o.server.offlineAfterFailures) await this.#reachable();
      const body = link ? await link.xml() : await this.#fetch();
      if (this.#closed) return;
      this.#applyBody(body, link ? digits : undefined, link ? 'tcp' : 'http');
    } catch (err) {
      if (this.#closed) return;
      const e = err instanceof PollError ? err : new PollError('network', (err as Error).message);
      if (e.kind === 'too-large' || e.kind === 'http-status') {
        this.#o.malformed.report(`vmix-${e.kind}`, { device: this.#o.server.id, error: e.message });
      }
      this.#failure(e.message);
    }
    const elapsed = this.#o.clock.monotonicMs() - started;
    const s = this.#o.server;
    const offline = this.#failedPolls >= s.offlineAfterFailures;
    this.#schedule(
      offline
        ? pollDelayMs(
            this.#failedPolls,
            s.offlineAfterFailures,
            s.pollIntervalMs,
            OFFLINE_POLL_MAX_MS,
            this.#o.random ?? Math.random,
          )
        : Math.max(0, s.pollIntervalMs - elapsed),
      offline,
    );
  }

  #applyBody(body: string, digits: readonly TallyDigit[] | undefined, source: 'tcp' | 'http'): void {
    const id = this.#o.server.id;
    // An unchanged document (nothing playing, meters still) with the same digits changes nothing: only
    // `updated` moves.
    const seen = `${source}\n${digits?.join('') ?? ''}\n${body}`;
    if (seen === this.#lastBody) {
      this.#failedPolls = 0;
      this.#o.store.apply(id, {}, true);
      this.#armTallyStale();
      return;
    }
    this.#lastBody = '';
    const parsed = parseVmixXml(body);
    if (!parsed.ok) {
      this.#o.malformed.report(`vmix-${parsed.error.code}`, { device: id, error: parsed.error.message });
      this.#failure(`bad XML from vMix (${parsed.error.code})`);
      return;
    }
    if (parsed.value.version !== this.#lastVersion) {
      this.#lastVersion = parsed.value.version;
      this.#logger.info({ version: parsed.value.version, edition: parsed.value.edition }, 'vMix answered');
    }
    this.#offlineLogged = false;
    this.#failedPolls = 0;
    this.#lastBody = seen;
    this.#o.store.apply(
      id,
      this.#reducer.onSnapshot(parsed.value, { source, ...(digits ? { digits } : {}) }),
      true,
    );
    this.#armTallyStale();
  }

  #failure(reason: string): void {
    this.#failedPolls++;
    this.#lastBody = '';
    const patch = this.#reducer.onFailure(reason);
    if (patch) {
      // Logged once per outage (also when vMix was never reached, e.g. wrong credentials).
      if (!this.#offlineLogged) this.#logger.warn({ reason: patch.reason }, 'vMix offline');
      this.#offlineLogged = true;
      this.#o.store.apply(this.#o.server.id, patch, false);
    }
  }

  /** Resolves once a TCP connection to the HTTP port opens (it is closed at once); rejects as a poll would. */
  #reachable(): Promise<void> {
    const s = this.#o.server;
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const socket = connect({ host: s.ip, port: this.#o.port });
      const done = (err?: Error): void => {
        if (settled) return;
        settled = true;
        timer.cancel();
        this.#inFlight = undefined;
        socket.destroy();
        if (err) reject(err);
        else resolve();
      };
      const timer = deadlineUnlessSettled(
        this.#o.clock,
        s.timeoutMs,
        () => settled,
        () => done(new PollError('timeout', `no answer within ${s.timeoutMs} ms`)),
      );
      socket.once('connect', () => done());
      socket.once('error', (err) => done(new PollError('network', err.message)));
      this.#inFlight = () => done(new PollError('network', 'closed'));
    });
  }

  #fetch(): Promise<string> {
    const s = this.#o.server;
    const headers: Record<string, string> = {};
    if (s.username !== undefined) {
      headers['authorization'] =
        `Basic ${Buffer.from(`${s.username}:${s.password ?? ''}`).toString('base64')}`;
    }
    return new Promise<string>((resolve, reject) => {
      let settled = false;
      const finish = (err: Error | undefined, body?: string): void => {
        if (settled) return;
        settled = true;
        timer.cancel();
        this.#inFlight = undefined;
        if (err) reject(err);
        else resolve(body ?? '');
      };
      const req = request(
        { host: s.ip, port: this.#o.port, path: '/api', method: 'GET', agent: this.#agent, headers },
        (res: IncomingMessage) => {
          if (res.statusCode !== 200) {
            res.resume();
            finish(new PollError('http-status', `vMix answered HTTP ${res.statusCode}`));
            return;
          }
          // Each chunk is decoded as it arrives (StringDecoder keeps a UTF-8 sequence cut between two chunks)
          // and the strings are joined: no second copy of the whole document as one large Buffer.
          const decoder = new StringDecoder('utf8');
          let body = '';
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > VMIX_MAX_XML_BYTES) {
              req.destroy();
              finish(new PollError('too-large', `vMix XML over ${VMIX_MAX_XML_BYTES} bytes`));
              return;
            }
            body += decoder.write(chunk);
          });
          res.on('end', () => finish(undefined, body + decoder.end()));
          res.on('error', (err) => finish(new PollError('network', err.message)));
        },
      );
      // No timer when the request fails within this turn (a refused connect: an absent mixer; io/deadline.ts).
      const timer = deadlineUnlessSettled(
        this.#o.clock,
        s.timeoutMs,
        () => settled,
        () => {
          req.destroy();
          finish(new PollError('timeout', `no answer within ${s.timeoutMs} ms`));
        },
      );
      this.#inFlight = () => {
        req.destroy();
        finish(new PollError('network', 'closed'));
      };
      req.on('error', (err) => finish(new PollError('network', err.message)));
      req.end();
    });
  }

  close(): void {
    this.#closed = true;
    this.#timer?.cancel();
    this.#linkTimer?.cancel();
    this.#tallyStale?.cancel();
    this.#link?.close();
    this.#link = undefined;
    this.#inFlight?.();
    this.#agent.destroy();
  }
}
