/**
 * Tally to punch (punch README "WebSocket signalling", "tally": `{type, stream, state}` with `off`/`preview`/`program`, admin role only):
 * mixer inputs mapped by vMix key to punch streams (`settings.punchTally`, docs/TALLY.md "Tally to punch").
 * One WebSocket per broker session, to `<brokerUrl>/api/ws/<session>` with the session's admin token in the
 * `Authorization` header (never in the URL). A stream's `tally` is sent when its input's tally changes, and
 * every mapped stream's tally on each (re)connect. Unknown (the mixer is lost) is sent as `off` with
 * `stale: true`: the spec has no unknown state and says servers ignore unknown fields, so a peer that knows
 * the flag shows grey and one that does not shows off, never the last colour. Reconnects with backoff
 * (0.5 s doubling to 10 s, jittered).
 */
import { WebSocket } from 'ws';
import type { Logger } from '@broadcast-ops/core';
import { reconnectDelayMs } from '../domain/backoff.ts';
import { tallyOfKey, type InputTally } from '../domain/mixer-tally.ts';
import type { OutputDevice, OutputView } from '../domain/output-view.ts';

export interface PunchTallyMapping {
  /** The mixer's device id and the input's vMix key. */
  device: number;
  key: string;
  stream: string;
}

export interface PunchTallySession {
  brokerUrl: string;
  session: string;
  /** The session's admin token (from the configuration or the environment; never logged). */
  adminToken: string;
  inputs: readonly PunchTallyMapping[];
}

/** What goes on the wire for an input's tally (docs/TALLY.md, "Tally to punch"). */
export function punchTallyMessage(
  stream: string,
  tally: InputTally,
): { type: 'tally'; stream: string; state: 'off' | 'preview' | 'program'; stale?: true } {
  return tally === 'unknown'
    ? { type: 'tally', stream, state: 'off', stale: true }
    : { type: 'tally', stream, state: tally };
}

/** The WebSocket URL of a session (http → ws, https → wss). */
export function punchWsUrl(brokerUrl: string, session: string): string {
  const u = new URL(brokerUrl);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  u.pathname = `${u.pathname.replace(/\/$/, '')}/api/ws/${encodeURIComponent(session)}`;
  u.search = '';
  return u.toString();
}

class SessionLink {
  #ws: WebSocket | undefined;
  #attempt = 0;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  /** Last message sent per stream (JSON), so only changes go out. */
  readonly #sent = new Map<string, string>();

  constructor(
    readonly s: PunchTallySession,
    readonly view: OutputView,
    readonly logger: Logger,
  ) {}

  connect(): void {
    if (this.#closed) return;
    const ws = new WebSocket(punchWsUrl(this.s.brokerUrl, this.s.session), {
      headers: { authorization: `Bearer ${this.s.adminToken}` },
      perMessageDeflate: false,
      maxPayload: 64 * 1024,
      handshakeTimeout: 5000,
    });
    this.#ws = ws;
    ws.on('open', () => {
      this.#attempt = 0;
      this.#sent.clear();
      this.logger.info({ session: this.s.session }, 'punch tally connected');
      this.sync(true);
    });
    ws.on('message', (raw: Buffer) => {
      const text = raw.toString('utf8', 0, Math.min(raw.length, 512));
      if (text.includes('"type":"error"'))
        this.logger.warn({ session: this.s.session, error: text }, 'punch refused');
    });
    ws.on('error', (err) =>
      this.logger.debug({ err: err.message, session: this.s.session }, 'punch tally error'),
    );
    ws.on('close', (code) => {
      if (this.#ws === ws) this.#ws = undefined;
      if (this.#closed) return;
      const delay = reconnectDelayMs(this.#attempt++, 500, 10_000, Math.random);
      this.logger.warn({ session: this.s.session, code, retryMs: delay }, 'punch tally link lost');
      this.#timer = setTimeout(() => this.connect(), delay);
      this.#timer.unref();
    });
  }

  /** Send each mapped stream's tally that changed (all of them when `all`). */
  sync(all = false): void {
    const ws = this.#ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    for (const m of this.s.inputs) {
      const device: Readonly<OutputDevice> | undefined = this.view.get(m.device);
      const text = JSON.stringify(punchTallyMessage(m.stream, tallyOfKey(device?.inputs, m.key)));
      if (!all && this.#sent.get(m.stream) === text) continue;
      this.#sent.set(m.stream, text);
      ws.send(text);
    }
  }

  close(): void {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#ws?.close(1000);
    this.#ws = undefined;
  }
}

export class PunchTallyOutput {
  readonly #links: SessionLink[];
  #unsubscribe: (() => void)[] = [];

  constructor(options: { view: OutputView; sessions: readonly PunchTallySession[]; logger: Logger }) {
    this.#links = options.sessions.map((s) => new SessionLink(s, options.view, options.logger));
    this.#unsubscribe = [
      options.view.onChange((_d, fields) => {
        if (fields.includes('inputs') || fields.includes('*')) for (const l of this.#links) l.sync();
      }),
      options.view.onReset(() => {
        for (const l of this.#links) l.sync();
      }),
    ];
  }

  start(): void {
    for (const l of this.#links) l.connect();
  }

  close(): void {
    for (const u of this.#unsubscribe) u();
    this.#unsubscribe = [];
    for (const l of this.#links) l.close();
  }
}
