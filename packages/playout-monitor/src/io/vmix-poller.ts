/**
 * vMix poller for one `http_mixer` server: `GET http://<ip>:<port>/api` every `pollIntervalMs`, never two
 * requests at once, each bounded by `timeoutMs` and by the XML size limit.
 * Keep-alive HTTP (one socket) keeps the cost of 4 polls a second low.
 */
import { Agent, request, type IncomingMessage } from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import type { Logger, TimerHandle } from '@broadcast-ops/core';
import type { HttpServerConfig } from '../config.ts';
import { VmixReducer } from '../domain/vmix-reducer.ts';
import { parseVmixXml, VMIX_MAX_XML_BYTES } from '../protocol/vmix.ts';
import type { InputContext } from './input-context.ts';

export interface VmixPollerOptions extends InputContext {
  server: HttpServerConfig;
  port: number;
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
  }

  #schedule(ms: number): void {
    if (this.#closed) return;
    this.#timer = this.#o.clock.setTimer(ms, () => void this.#pollOnce());
  }

  async #pollOnce(): Promise<void> {
    const started = this.#o.clock.monotonicMs();
    try {
      const body = await this.#fetch();
      if (this.#closed) return;
      // An unchanged document (nothing playing, meters still) changes nothing: only `updated` moves.
      if (body === this.#lastBody) {
        this.#o.store.apply(this.#o.server.id, {}, true);
        this.#schedule(Math.max(0, this.#o.server.pollIntervalMs - (this.#o.clock.monotonicMs() - started)));
        return;
      }
      this.#lastBody = '';
      const parsed = parseVmixXml(body);
      if (!parsed.ok) {
        this.#o.malformed.report(`vmix-${parsed.code}`, { device: this.#o.server.id, error: parsed.message });
        this.#failure(`bad XML from vMix (${parsed.code})`);
      } else {
        if (parsed.snapshot.version !== this.#lastVersion) {
          this.#lastVersion = parsed.snapshot.version;
          this.#logger.info(
            { version: parsed.snapshot.version, edition: parsed.snapshot.edition },
            'vMix answered',
          );
        }
        this.#offlineLogged = false;
        this.#lastBody = body;
        this.#o.store.apply(this.#o.server.id, this.#reducer.onSnapshot(parsed.snapshot), true);
      }
    } catch (err) {
      if (this.#closed) return;
      const e = err instanceof PollError ? err : new PollError('network', (err as Error).message);
      if (e.kind === 'too-large' || e.kind === 'http-status') {
        this.#o.malformed.report(`vmix-${e.kind}`, { device: this.#o.server.id, error: e.message });
      }
      this.#failure(e.message);
    }
    const elapsed = this.#o.clock.monotonicMs() - started;
    this.#schedule(Math.max(0, this.#o.server.pollIntervalMs - elapsed));
  }

  #failure(reason: string): void {
    this.#lastBody = '';
    const patch = this.#reducer.onFailure(reason);
    if (patch) {
      // Logged once per outage (also when vMix was never reached, e.g. wrong credentials).
      if (!this.#offlineLogged) this.#logger.warn({ reason: patch.reason }, 'vMix offline');
      this.#offlineLogged = true;
      this.#o.store.apply(this.#o.server.id, patch, false);
    }
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
      const timer = this.#o.clock.setTimer(s.timeoutMs, () => {
        req.destroy();
        finish(new PollError('timeout', `no answer within ${s.timeoutMs} ms`));
      });
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
    this.#inFlight?.();
    this.#agent.destroy();
  }
}
