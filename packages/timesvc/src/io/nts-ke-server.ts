import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { createServer, type Server, type TLSSocket } from 'node:tls';
import type { Socket } from 'node:net';
import type { Logger } from '@broadcast-ops/core';
import type { NtsCookieJar } from '../domain/nts-cookies.ts';
import {
  AEAD_AES_SIV_CMAC_256,
  COOKIES_PER_RESPONSE,
  KE_ERROR,
  NTS_EXPORTER_LABEL,
  NTS_KE_ALPN,
  NTS_KE_MAX_REQUEST,
  buildKeError,
  buildKeResponse,
  exporterContext,
  parseKeRequest,
  planKeResponse,
  scanRecords,
} from '../protocol/nts-ke.ts';

/**
 * The NTS-KE server (RFC 8915 §4): TLS 1.3 only, ALPN `ntske/1` checked in code (Node's TLS server lets a
 * client without ALPN through), one request then one response and close_notify. Requests are bounded
 * in bytes and time. The certificate and key are re-read when either file changes (polled) or on
 * `reload()` (SIGHUP, app.ts); a bad pair keeps the previous one. See docs/nts.md "NTS-KE server".
 */

export type KeFailure =
  | 'tls_handshake'
  | 'alpn'
  | 'timeout'
  | 'too_large'
  | 'truncated'
  | 'malformed'
  | 'unrecognized_critical'
  | 'bad_request'
  | 'no_common_aead'
  | 'internal'
  /** Refused at accept: all `maxConnections` slots taken. */
  | 'refused_capacity'
  /** Refused at accept: this address already holds `maxPerAddress` connections. */
  | 'refused_per_address'
  /** No completed TLS handshake (e.g. no ClientHello) within `handshakeTimeoutMs`. */
  | 'handshake_timeout';

export interface NtsKeCounters {
  /** TCP connections accepted (each is one NTS-KE request attempt). */
  requests: number;
  /** Responses with cookies sent. */
  success: number;
  failures: Record<KeFailure, number>;
}

export interface NtsKeServerOptions {
  port: number;
  host?: string | undefined;
  certPath: string;
  keyPath: string;
  cookies: NtsCookieJar;
  /** The NTP port clients must use; a Port record is sent when it is not 123. */
  ntpPort: () => number;
  /** An NTP server name or address to announce (Server record); absent = this host. */
  ntpServer?: string | undefined;
  logger: Logger;
  /** Whole-exchange time bound after the TCP accept, ms (default 5000). */
  timeoutMs?: number;
  /** Poll interval of the certificate files, ms (default 2000; 0 = no watching). */
  watchIntervalMs?: number;
  /** Concurrent connections at most (default 1024); more are accepted and closed at once, counted. */
  maxConnections?: number;
  /**
   * Concurrent connections from one address at most (default 32; IPv6 by /64), so that one address cannot
   * take every slot (docs/nts.md "Connection floods").
   */
  maxPerAddress?: number;
  /** Deadline for the TLS handshake from the TCP accept, ms (default 2000): idle connections go early. */
  handshakeTimeoutMs?: number;
}

/** Refusals and handshake timeouts are logged at most this often, as one summary line. */
const REFUSAL_LOG_INTERVAL_MS = 10_000;

/** The per-address key: an IPv4 address (also IPv4-mapped), or the /64 prefix of an IPv6 address. */
function addressKey(address: string | undefined): string {
  if (address === undefined) return '?';
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (v4) return v4[1] ?? address;
  if (!address.includes(':')) return address;
  const full = address.includes('::')
    ? (() => {
        const [head = '', tail = ''] = address.split('::');
        const h = head ? head.split(':') : [];
        const t = tail ? tail.split(':') : [];
        return [...h, ...Array<string>(Math.max(0, 8 - h.length - t.length)).fill('0'), ...t];
      })()
    : address.split(':');
  return `${full
    .slice(0, 4)
    .map((g) => g.toLowerCase().replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}

export class NtsKeServer {
  readonly counters: NtsKeCounters = {
    requests: 0,
    success: 0,
    failures: {
      tls_handshake: 0,
      alpn: 0,
      timeout: 0,
      too_large: 0,
      truncated: 0,
      malformed: 0,
      unrecognized_critical: 0,
      bad_request: 0,
      no_common_aead: 0,
      internal: 0,
      refused_capacity: 0,
      refused_per_address: 0,
      handshake_timeout: 0,
    },
  };
  readonly #perAddress = new Map<string, number>();
  /** Raw sockets closed at accept: their TLS errors are not handshake failures. */
  readonly #refused = new WeakSet<Socket>();
  #lastRefusalLogMs = Number.NEGATIVE_INFINITY;
  readonly #refusalsSinceLog = new Map<string, number>();
  #lastRefusedAddress: string | undefined;
  readonly #o: NtsKeServerOptions;
  #server: Server | undefined;
  #certExpiry: Date | undefined;
  readonly #open = new Set<Socket>();
  readonly #onFileChange = (): void => {
    this.reload('file change');
  };

  constructor(options: NtsKeServerOptions) {
    this.#o = options;
  }

  get port(): number {
    const a = this.#server?.address();
    return typeof a === 'object' && a ? a.port : 0;
  }

  /** notAfter of the certificate in use. */
  get certExpiry(): Date | undefined {
    return this.#certExpiry;
  }

  #readPair(): { cert: Buffer; key: Buffer } {
    const cert = readFileSync(this.#o.certPath);
    const key = readFileSync(this.#o.keyPath);
    this.#certExpiry = new Date(new X509Certificate(cert).validTo);
    return { cert, key };
  }

  /** Re-read certificate and key; on failure the previous pair stays in use. Returns true on success. */
  reload(trigger = 'request'): boolean {
    if (!this.#server) return false;
    try {
      const pair = this.#readPair();
      this.#server.setSecureContext({ ...pair, minVersion: 'TLSv1.3' });
      this.#o.logger.info(
        { cert: this.#o.certPath, expires: this.#certExpiry?.toISOString(), trigger },
        'NTS-KE certificate loaded',
      );
      return true;
    } catch (err) {
      this.#o.logger.error(
        { err: (err as Error).message, trigger },
        'NTS-KE certificate reload failed; keeping the previous one',
      );
      return false;
    }
  }

  async start(): Promise<void> {
    const pair = this.#readPair();
    const server = createServer({
      ...pair,
      minVersion: 'TLSv1.3',
      ALPNProtocols: [NTS_KE_ALPN],
      handshakeTimeout: Math.min(this.#o.handshakeTimeoutMs ?? 2000, this.#o.timeoutMs ?? 5000),
    });
    this.#server = server;
    const max = this.#o.maxConnections ?? 1024;
    const perAddress = this.#o.maxPerAddress ?? 32;
    // Beyond this the kernel-side accept path drops (Node's own limit); counted like a capacity refusal.
    server.maxConnections = max + 256;
    server.on('drop', (data?: { remoteAddress?: string }) => {
      this.counters.requests++;
      this.#noteRefusal('refused_capacity', data?.remoteAddress);
    });
    server.on('connection', (raw: Socket) => {
      this.counters.requests++;
      const key = addressKey(raw.remoteAddress);
      const held = this.#perAddress.get(key) ?? 0;
      const refusal: KeFailure | undefined =
        this.#open.size >= max ? 'refused_capacity' : held >= perAddress ? 'refused_per_address' : undefined;
      if (refusal !== undefined) {
        this.#refused.add(raw);
        this.#noteRefusal(refusal, raw.remoteAddress);
        raw.destroy();
        return;
      }
      this.#open.add(raw);
      this.#perAddress.set(key, held + 1);
      raw.once('close', () => {
        this.#open.delete(raw);
        const n = (this.#perAddress.get(key) ?? 1) - 1;
        if (n <= 0) this.#perAddress.delete(key);
        else this.#perAddress.set(key, n);
      });
    });
    server.on('tlsClientError', (err: Error & { code?: string }, socket) => {
      // Node wraps the accepted socket; the wrapper's `_parent` is the raw socket refused above.
      const parent = (socket as unknown as { _parent?: Socket })._parent;
      if (parent !== undefined && this.#refused.has(parent)) return;
      if (err.code === 'ERR_TLS_HANDSHAKE_TIMEOUT') {
        this.#noteRefusal('handshake_timeout', socket.remoteAddress);
        socket.destroy();
        return;
      }
      // Wrong ALPN ends in alert 120, TLS ≤ 1.2 in alert 70; both are refused here by OpenSSL.
      const alpn = /no_application_protocol|ALPN/i.test(`${err.code ?? ''} ${err.message}`);
      this.counters.failures[alpn ? 'alpn' : 'tls_handshake']++;
      this.#o.logger.debug({ err: err.message }, 'NTS-KE handshake failed');
      socket.destroy();
    });
    server.on('secureConnection', (socket: TLSSocket) => {
      this.#handle(socket);
    });
    const listen = (host: string): Promise<void> =>
      new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(this.#o.port, host, () => {
          server.removeListener('error', reject);
          resolve();
        });
      });
    if (this.#o.host !== undefined) await listen(this.#o.host);
    else {
      try {
        await listen('::'); // dual stack
      } catch (err) {
        // A host without IPv6 still serves NTS-KE over IPv4.
        if ((err as NodeJS.ErrnoException).code !== 'EAFNOSUPPORT') throw err;
        await listen('0.0.0.0');
      }
    }
    server.on('error', (err: Error) => {
      this.#o.logger.error({ err: err.message }, 'NTS-KE server error');
    });
    const interval = this.#o.watchIntervalMs ?? 2000;
    if (interval > 0) {
      watchFile(this.#o.certPath, { interval, persistent: false }, this.#onFileChange);
      watchFile(this.#o.keyPath, { interval, persistent: false }, this.#onFileChange);
    }
    this.#o.logger.info({ port: this.port }, 'NTS-KE listening');
  }

  /** Count a refusal or handshake timeout; log a summary at most every REFUSAL_LOG_INTERVAL_MS. */
  #noteRefusal(reason: KeFailure, address: string | undefined): void {
    this.counters.failures[reason]++;
    this.#refusalsSinceLog.set(reason, (this.#refusalsSinceLog.get(reason) ?? 0) + 1);
    this.#lastRefusedAddress = address;
    const now = Date.now();
    if (now - this.#lastRefusalLogMs < REFUSAL_LOG_INTERVAL_MS) return;
    this.#lastRefusalLogMs = now;
    this.#o.logger.warn(
      {
        ...Object.fromEntries(this.#refusalsSinceLog),
        lastAddress: this.#lastRefusedAddress,
        open: this.#open.size,
      },
      'NTS-KE connections refused or timed out (counts since the last such line)',
    );
    this.#refusalsSinceLog.clear();
  }

  #fail(socket: TLSSocket, reason: KeFailure, response?: Buffer): void {
    this.counters.failures[reason]++;
    this.#o.logger.debug({ reason, remote: socket.remoteAddress }, 'NTS-KE request refused');
    if (response && socket.writable) socket.end(response);
    else socket.destroy();
  }

  #handle(socket: TLSSocket): void {
    const timer = setTimeout(() => {
      this.#fail(socket, 'timeout');
    }, this.#o.timeoutMs ?? 5000);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
    socket.on('error', () => socket.destroy());
    // A client without ALPN passes Node's handshake; RFC 8915 §4 requires ntske/1.
    if (socket.alpnProtocol !== NTS_KE_ALPN || socket.getProtocol() !== 'TLSv1.3') {
      this.#fail(socket, 'alpn');
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (reason: KeFailure | undefined, response: Buffer): void => {
      done = true;
      clearTimeout(timer);
      socket.removeAllListeners('data');
      if (reason) this.#fail(socket, reason, response);
      else socket.end(response);
    };
    socket.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > NTS_KE_MAX_REQUEST) {
        finish('too_large', buildKeError(KE_ERROR.BAD_REQUEST));
        return;
      }
      chunks.push(chunk);
      const buf = chunks.length === 1 ? chunk : Buffer.concat(chunks);
      const scan = scanRecords(buf);
      if (!scan.ok) {
        finish('malformed', buildKeError(KE_ERROR.BAD_REQUEST));
        return;
      }
      if (!scan.value.complete) return;
      const parsed = parseKeRequest(scan.value.records);
      if (!parsed.ok) {
        finish(parsed.error.code, buildKeError(parsed.error.keError));
        return;
      }
      this.#respond(socket, parsed.value, finish);
    });
    socket.on('end', () => {
      if (!done) finish('truncated', buildKeError(KE_ERROR.BAD_REQUEST));
    });
  }

  #respond(
    socket: TLSSocket,
    request: Parameters<typeof planKeResponse>[0],
    finish: (reason: KeFailure | undefined, response: Buffer) => void,
  ): void {
    const plan = planKeResponse(request, [AEAD_AES_SIV_CMAC_256]);
    const ntpPort = this.#o.ntpPort();
    const extra = {
      server: this.#o.ntpServer,
      port: ntpPort !== 123 ? ntpPort : undefined,
    };
    if (plan.aead === undefined) {
      // RFC 8915 §4.1.5: the AEAD record is empty and no cookies are sent.
      finish('no_common_aead', buildKeResponse(plan, { cookies: [], ...extra }));
      return;
    }
    let response: Buffer;
    try {
      const c2s = socket.exportKeyingMaterial(32, NTS_EXPORTER_LABEL, exporterContext(plan.aead, 'c2s'));
      const s2c = socket.exportKeyingMaterial(32, NTS_EXPORTER_LABEL, exporterContext(plan.aead, 's2c'));
      const cookies = Array.from({ length: COOKIES_PER_RESPONSE }, () =>
        this.#o.cookies.seal({ aead: plan.aead ?? AEAD_AES_SIV_CMAC_256, c2s, s2c }),
      );
      response = buildKeResponse(plan, { cookies, ...extra });
    } catch (err) {
      this.#o.logger.error({ err: (err as Error).message }, 'NTS-KE key export failed');
      finish('internal', buildKeError(KE_ERROR.INTERNAL));
      return;
    }
    this.counters.success++;
    finish(undefined, response);
  }

  async close(): Promise<void> {
    unwatchFile(this.#o.certPath, this.#onFileChange);
    unwatchFile(this.#o.keyPath, this.#onFileChange);
    const server = this.#server;
    this.#server = undefined;
    if (!server) return;
    for (const s of this.#open) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
