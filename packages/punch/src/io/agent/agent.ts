import { spawn, type ChildProcess } from 'node:child_process';
import { createSocket, type Socket } from 'node:dgram';
import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { Logger } from '@broadcast-ops/core';
import { WebSocket } from 'ws';
import { StatsAccumulator, classifyStderrLine, parseStatsLine, type SrtSample } from './srt-stats.ts';
import { TallyHook, tallyOfMessage, type AgentTally } from './tally-hook.ts';

/**
 * The peer agent (`punch agent`, docs/agent.md): one end of an SRT link driven by the broker's signalling.
 * It registers, waits for `peer`, sends `ready`, and on `start` runs srt-live-transmit in rendezvous mode
 * with the coordinates, passphrase and latency it was given. While SRT runs it sends `health` every
 * `healthMs` from the tool's JSON statistics and `status` on each SRT state change. A lost broker does not
 * stop SRT: the agent reconnects with backoff, registers again (the broker gives its slot back) and keeps
 * the running process unless the coordinates changed. `session_closed` stops SRT and ends the agent (0).
 */
export interface AgentOptions {
  /** Broker origin, `http(s)://host:port`. */
  broker: string;
  session: string;
  token: string;
  stream?: string | undefined;
  role: 'sender' | 'receiver';
  /** Local UDP port for SRT (both ends bind the stream's port; the broker may assign another). */
  port: number;
  /** Sender: `udp://127.0.0.1:P`, `file:PATH` or `-` (stdin). Receiver: `udp://HOST:P`, `file:PATH` or `-`. */
  media: string;
  label?: string | undefined;
  /** The encoder's bit rate (bits/s), sent as `meta.bitrate` (docs/relay.md "The cap per session"). */
  bitrate?: number | undefined;
  logger: Logger;
  /** `health` interval, 1-5 s (spec). Default 2 s. */
  healthMs?: number;
  /** srt-live-transmit binary. Default: from PATH. */
  srtBinary?: string | undefined;
  /** `--on-tally`: a command (program and arguments, no shell) run on every tally change (docs/agent.md). */
  onTally?: { argv: readonly string[]; timeoutMs: number } | undefined;
}

export type AgentExit =
  | { code: 0; reason: 'session_closed'; closeReason: string }
  | { code: 2; reason: 'bad_stream'; message: string }
  | { code: 3; reason: 'token_refused' | 'session_expired'; message: string }
  | { code: 4; reason: 'srt_missing'; message: string };

interface Coordinates {
  ip: string;
  port: number;
  localPort: number;
  passphrase: string;
  latency: number;
}

type SrtState = 'connecting' | 'connected' | 'disconnected' | 'error';

export const SRT_INSTALL_HINT =
  'srt-live-transmit was not found on PATH. Install it: Debian/Ubuntu `sudo apt-get install srt-tools`, ' +
  'Fedora `sudo dnf install srt`, macOS `brew install srt`; or pass --srt <path to srt-live-transmit>.';

export function findSrtLiveTransmit(explicit?: string): string | undefined {
  if (explicit) return existsSync(explicit) ? explicit : undefined;
  // Windows names its executables with .exe (a build from the SRT sources, docs/agent.md).
  const names = process.platform === 'win32' ? ['srt-live-transmit.exe'] : ['srt-live-transmit'];
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    for (const name of names) {
      const candidate = join(dir, name);
      if (dir && existsSync(candidate)) return candidate;
    }
  }
  return undefined;
}

/** `srt://ip:port?…` for srt-live-transmit: latency in ms (SRTO_LATENCY), IPv6 literals in brackets. */
export function srtUri(c: Coordinates): string {
  const host = c.ip.includes(':') ? `[${c.ip}]` : c.ip;
  return (
    `srt://${host}:${c.port}?mode=rendezvous&port=${c.localPort}&latency=${c.latency}` +
    `&passphrase=${c.passphrase}&conntimeo=120000`
  );
}

const sameCoordinates = (a: Coordinates | null, b: Coordinates | null): boolean =>
  a !== null &&
  b !== null &&
  a.ip === b.ip &&
  a.port === b.port &&
  a.localPort === b.localPort &&
  a.passphrase === b.passphrase &&
  a.latency === b.latency;

export class PunchAgent {
  readonly #o: AgentOptions;
  readonly #log: Logger;
  /** Stable across restarts of this agent on this host (see `agentClientId`). */
  readonly #clientId: string;
  #ws: WebSocket | null = null;
  #coords: Coordinates | null = null;
  /** Coordinates the running srt-live-transmit was started with. */
  #running: Coordinates | null = null;
  #srt: ChildProcess | null = null;
  #srtState: SrtState = 'disconnected';
  #sample: SrtSample | undefined;
  #sampleAt = 0;
  readonly #period = new StatsAccumulator();
  #healthTimer: NodeJS.Timeout | null = null;
  #reconnectTimer: NodeJS.Timeout | null = null;
  #backoff = 500;
  #stopped = false;
  /** Whether a WebSocket to the broker ever opened: the log says "cannot reach" until it did. */
  #reached = false;
  /** The partner's presence as last announced (`presence`), to log each change once. */
  #partnerPresent: boolean | null = null;
  /** The path the broker last showed for our stream (docs/relay.md "Detection"): null before the first. */
  #path: 'direct' | 'relayed' | null = null;
  #restartTimer: NodeJS.Timeout | null = null;
  /** The stream's tally as this agent knows it; null before the broker sent any. */
  #tally: AgentTally | null = null;
  readonly #tallyHook: TallyHook | null;
  /** Receiver writing to a file or stdout: srt-live-transmit delivers to this loopback UDP socket. */
  #sink: { socket: Socket; port: number } | null = null;
  #done!: (exit: AgentExit) => void;
  readonly finished: Promise<AgentExit>;

  constructor(options: AgentOptions) {
    this.#o = options;
    this.#log = options.logger;
    this.#clientId = agentClientId(options.token, options.role, options.port);
    this.#tallyHook = options.onTally
      ? new TallyHook({
          ...options.onTally,
          session: options.session,
          stream: options.stream,
          logger: options.logger,
        })
      : null;
    this.finished = new Promise((resolve) => {
      this.#done = resolve;
    });
  }

  start(): Promise<AgentExit> {
    const bin = findSrtLiveTransmit(this.#o.srtBinary);
    if (!bin) {
      this.#finish({ code: 4, reason: 'srt_missing', message: SRT_INSTALL_HINT });
      return this.finished;
    }
    this.#connect();
    this.#healthTimer = setInterval(() => this.#sendHealth(), this.#o.healthMs ?? 2000);
    return this.finished;
  }

  /** Stop everything (signals): SRT ends, the socket closes. */
  stop(): void {
    this.#stopped = true;
    this.#tallyHook?.stop();
    if (this.#healthTimer) clearInterval(this.#healthTimer);
    if (this.#reconnectTimer) clearTimeout(this.#reconnectTimer);
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    this.#stopSrt();
    this.#sink?.socket.close();
    this.#sink = null;
    this.#ws?.close(1000);
  }

  /**
   * A receiver's file or stdout output goes through a loopback UDP socket of the agent, not through the
   * tool's stdout: the tool's stdout carries its statistics (see #startSrt), which would corrupt the media.
   */
  async #openSink(): Promise<number> {
    if (this.#sink) return this.#sink.port;
    const media = this.#o.media;
    // `file:` starts a new recording: an existing file is truncated (README "punch agent"), never appended
    // to; within one agent process SRT restarts keep writing to the same open file.
    const out = media === '-' ? process.stdout : createWriteStream(media.slice(5), { flags: 'w' });
    const socket = createSocket({ type: 'udp4', recvBufferSize: 4 * 1024 * 1024 });
    socket.on('message', (d) => out.write(d));
    socket.on('error', (err) => this.#log.error({ err: err.message }, 'media sink socket failed'));
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    this.#sink = { socket, port: socket.address().port };
    return this.#sink.port;
  }

  #finish(exit: AgentExit): void {
    this.stop();
    this.#done(exit);
  }

  #send(message: Record<string, unknown>): void {
    if (this.#ws?.readyState === WebSocket.OPEN) this.#ws.send(JSON.stringify(message));
  }

  #connect(): void {
    if (this.#stopped) return;
    const url = `${this.#o.broker.replace(/^http/, 'ws')}/api/ws/${encodeURIComponent(this.#o.session)}`;
    const ws = new WebSocket(url, {
      headers: { authorization: `Bearer ${this.#o.token}` },
      perMessageDeflate: false,
      maxPayload: 64 * 1024,
      handshakeTimeout: 10_000,
    });
    this.#ws = ws;
    let pingTimer: NodeJS.Timeout | null = null;
    let registered: NodeJS.Timeout | null = null;
    ws.on('open', () => {
      // The backoff is reset only once the broker kept this connection (a `peer`, or 30 s without a
      // refusal): a refused registration must not retry at the fastest rate forever.
      registered = setTimeout(() => {
        this.#backoff = 500;
      }, 30_000);
      this.#reached = true;
      this.#log.info({ broker: this.#o.broker, session: this.#o.session }, 'connected to broker');
      this.#send({
        type: 'register',
        ...(this.#o.stream ? { stream: this.#o.stream } : {}),
        port: this.#o.port,
        role: this.#o.role,
        meta: {
          label: this.#o.label ?? this.#o.role,
          clientId: this.#clientId,
          agent: 'punch-agent',
          ...(this.#o.bitrate !== undefined ? { bitrate: this.#o.bitrate } : {}),
        },
      });
      // A broker that vanished without closing (host down, cable) is noticed by our own pings.
      let alive = true;
      ws.on('pong', () => {
        alive = true;
      });
      pingTimer = setInterval(() => {
        if (!alive) {
          ws.terminate();
          return;
        }
        alive = false;
        ws.ping();
      }, 10_000);
    });
    ws.on('message', (data) => {
      let m: Record<string, unknown>;
      try {
        m = JSON.parse((data as Buffer).toString('utf8')) as Record<string, unknown>;
      } catch {
        return;
      }
      this.#onMessage(m);
    });
    ws.on('error', (err) => this.#log.warn({ err: err.message }, 'broker connection error'));
    ws.on('close', (code) => {
      if (pingTimer) clearInterval(pingTimer);
      if (registered) clearTimeout(registered);
      if (this.#ws !== ws || this.#stopped) return;
      this.#ws = null;
      // Without the broker the tally is no longer known: unknown, never the last colour (docs/agent.md).
      if (this.#tally !== null) this.#setTally('unknown', 'broker connection lost');
      if (code === 4401 || code === 4403) {
        this.#finish({
          code: 3,
          reason: 'token_refused',
          message:
            'the broker refused the token (wrong session or stream, expired, or signed with another secret); ' +
            'ask the operator for a new join link',
        });
        return;
      }
      if (code === 4410) {
        this.#finish({ code: 3, reason: 'session_expired', message: 'the session is closed or expired' });
        return;
      }
      const wait = this.#backoff;
      this.#backoff = Math.min(10_000, this.#backoff * 2);
      if (!this.#reached) {
        this.#log.warn(
          { broker: this.#o.broker, code, retryInMs: wait },
          'cannot reach the broker (never connected yet); retrying',
        );
      } else {
        this.#log.warn(
          { code, retryInMs: wait, srtRunning: this.#srt !== null },
          this.#srt !== null
            ? 'broker connection lost; SRT keeps running; reconnecting'
            : 'broker connection lost; reconnecting',
        );
      }
      this.#reconnectTimer = setTimeout(() => this.#connect(), wait);
    });
  }

  #onMessage(m: Record<string, unknown>): void {
    switch (m['type']) {
      case 'peer': {
        const c: Coordinates = {
          ip: String(m['ip']),
          port: Number(m['port']),
          localPort: Number(m['localPort']),
          passphrase: String(m['passphrase']),
          latency: Number(m['latency']),
        };
        const unchanged = sameCoordinates(c, this.#running);
        this.#log.info({ ip: c.ip, port: c.port, localPort: c.localPort, unchanged }, 'peer received');
        this.#backoff = 500;
        this.#coords = c;
        // Status before `ready`: the `start` that follows tells the partner whether our SRT runs.
        if (unchanged) this.#sendStatus(this.#srtState);
        this.#send({ type: 'ready', ...(this.#o.stream ? { stream: this.#o.stream } : {}) });
        return;
      }
      case 'start': {
        if (!this.#coords) return;
        // A running SRT with the same coordinates is kept while the partner's runs too (a broker restart,
        // a signalling blip); a partner that restarted (its SRT is not up) needs a fresh rendezvous.
        const partnerFresh = 'partnerSrt' in m && m['partnerSrt'] !== 'connected';
        if (!sameCoordinates(this.#coords, this.#running) || (partnerFresh && this.#srt !== null)) {
          if (partnerFresh && this.#srt !== null) this.#log.info('partner restarted; fresh rendezvous');
          void this.#startSrt(this.#coords);
        }
        return;
      }
      case 'session': {
        // Our link is up but the broker shows the stream only matched (it restarted, or our partner came
        // back): tell it again.
        const streams = m['streams'] as Record<string, { state?: string; path?: string }> | undefined;
        const mine = this.#o.stream ?? Object.keys(streams ?? {})[0];
        const matched = streams?.[mine ?? '']?.state;
        // The agent knows when its rendezvous failed and the broker moved the link to the relay, and when it
        // left the relay again: one line per change of path, with the state that caused it.
        const entry = mine === undefined ? undefined : streams?.[mine];
        const path = entry === undefined ? null : entry.path === 'relayed' ? 'relayed' : 'direct';
        if (path !== null && path !== this.#path) {
          if (path === 'relayed' || this.#path !== null)
            this.#log.warn(
              { path, state: matched, srt: this.#srtState },
              path === 'relayed'
                ? 'no direct SRT connection within the detection window: the broker moved this stream to its relay'
                : 'the stream left the relay: direct rendezvous again',
            );
          this.#path = path;
        }
        if (mine && (matched === 'ready' || matched === 'relaying') && this.#srtState === 'connected') {
          this.#sendStatus('connected');
        }
        return;
      }
      case 'presence': {
        // README "Presence": our partner's signalling came or went. Its SRT may still run (a cut signalling
        // path), so the link is left alone; the operator reads it in the log.
        const mine = this.#o.stream ?? String(m['stream']);
        if (m['stream'] !== mine || this.#coords === null) return;
        const present = m['present'] === true;
        if (present === this.#partnerPresent) return;
        // Only a holder coming back is announced to itself (our own label then); a departure is never ours.
        if (present && m['label'] === (this.#o.label ?? this.#o.role)) return;
        this.#partnerPresent = present;
        this.#log.warn(
          { partner: m['label'], srt: this.#srtState },
          present ? 'partner is back' : 'partner left (its broker connection closed)',
        );
        return;
      }
      case 'tally': {
        if (this.#o.stream !== undefined && m['stream'] !== this.#o.stream) return;
        const tally = tallyOfMessage(m);
        if (tally === null) return;
        const age = typeof m['age'] === 'number' ? m['age'] : undefined;
        this.#setTally(
          tally,
          tally === 'unknown'
            ? `the mixer's tally is unknown (stale at the sender${age === undefined ? '' : ` for ${Math.round(age / 1000)} s`})`
            : 'from the broker',
        );
        return;
      }
      case 'session_closed':
        this.#log.info({ reason: m['reason'] }, 'session closed; stopping SRT');
        this.#finish({ code: 0, reason: 'session_closed', closeReason: String(m['reason']) });
        return;
      case 'error': {
        const code = String(m['code']);
        this.#log.warn({ code, message: m['message'] }, 'broker error');
        if (code === 'AUTH_FAILED') {
          // The close that follows (4401/4403) ends the agent with the right message.
          return;
        }
        if (code === 'SESSION_EXPIRED') {
          // A closed session is followed by close 4410; a session past its lifetime refuses a new peer
          // without closing (README "Lifetime"): either way this agent cannot join.
          this.#finish({ code: 3, reason: 'session_expired', message: String(m['message']) });
          return;
        }
        const text = String(m['message']);
        if (code === 'INVALID_MESSAGE' && /^stream: no stream /.test(text)) {
          // An unknown --stream never becomes valid by retrying.
          this.#finish({ code: 2, reason: 'bad_stream', message: `--stream: ${text.slice(8)}` });
          return;
        }
        if (code === 'SESSION_FULL' || code === 'STREAM_TAKEN') {
          // Our slot may still be held by our previous connection during its grace period: retry.
          this.#ws?.close(1000);
        }
        return;
      }
      default:
        return;
    }
  }

  /** Tally of our stream, printed on each change; `--on-tally` runs on each change. */
  #setTally(tally: AgentTally, reason: string): void {
    if (tally === this.#tally) return;
    this.#tally = tally;
    this.#log.info({ tally, reason, stream: this.#o.stream }, `tally ${tally}`);
    this.#tallyHook?.change(tally, reason);
  }

  #sendStatus(state: SrtState): void {
    this.#send({ type: 'status', ...(this.#o.stream ? { stream: this.#o.stream } : {}), srt: state });
  }

  #setState(state: SrtState): void {
    if (state === this.#srtState) return;
    this.#srtState = state;
    this.#log.info({ srt: state }, 'srt state');
    this.#sendStatus(state);
  }

  #sendHealth(): void {
    const s = this.#sample;
    const period = this.#period.take();
    if (!s || this.#srtState !== 'connected' || Date.now() - this.#sampleAt > 15_000) return;
    // A period without a statistics report (a slow stream: `-s:100` counts packets) repeats the latest
    // RTT with empty counters, so the broker keeps seeing a live link (README "Health").
    const f = period ?? { ...s, retransmit: 0, dropped: 0, packets: 0, unique: 0, lost: 0, retransmitted: 0 };
    this.#send({
      type: 'health',
      ...(this.#o.stream ? { stream: this.#o.stream } : {}),
      rtt: f.rtt,
      retransmit: f.retransmit,
      bitrate: f.bitrate,
      dropped: f.dropped,
      ...(this.#o.role === 'receiver' ? { buffer: s.buffer } : {}),
      role: this.#o.role,
      counts: { packets: f.packets, unique: f.unique, lost: f.lost, retransmitted: f.retransmitted },
      ...(f.latency === undefined ? {} : { latency: f.latency }),
    });
  }

  async #startSrt(c: Coordinates): Promise<void> {
    const old = this.#stopSrt();
    this.#running = c;
    // The old process must release the local port first (a rendezvous binds it), at most 2 s.
    if (old) {
      await Promise.race([
        new Promise((resolve) => old.once('exit', resolve)),
        new Promise((resolve) => setTimeout(resolve, 2000)),
      ]);
      if (this.#stopped || this.#running !== c) return;
    }
    const bin = findSrtLiveTransmit(this.#o.srtBinary);
    if (!bin) {
      this.#finish({ code: 4, reason: 'srt_missing', message: SRT_INSTALL_HINT });
      return;
    }
    const media = this.#o.media;
    const uri = srtUri(c);
    const pipe = media === '-' || media.startsWith('file:');
    let local = media;
    if (pipe) local = this.#o.role === 'sender' ? 'file://con' : `udp://127.0.0.1:${await this.#openSink()}`;
    if (this.#stopped || this.#running !== c) return;
    const [src, dst] = this.#o.role === 'sender' ? [local, uri] : [uri, local];
    // Statistics every 100 packets (`-s:N` counts packets), as JSON lines on the tool's stdout. The media
    // never uses that stdout (a receiver's file or stdout output goes through the agent's UDP sink), so the
    // two cannot mix. (`-statsout:/dev/fd/N` does not work here: Node's stdio pipes are sockets, which
    // cannot be opened by path, and the tool then falls back to stdout anyway.)
    const args = ['-v', '-s:100', '-pf:json', '-chunk:1316', src, dst];
    this.#log.info({ ip: c.ip, port: c.port, localPort: c.localPort, latency: c.latency }, 'srt started');
    const child = spawn(bin, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.#srt = child;
    this.#running = c;
    this.#setState('connecting');
    if (this.#o.role === 'sender') {
      if (media === '-') process.stdin.pipe(child.stdin);
      else if (media.startsWith('file:')) createReadStream(media.slice(5)).pipe(child.stdin);
      else child.stdin.end();
    } else child.stdin.end();
    child.stdin.on('error', () => undefined);
    const lines = (stream: NodeJS.ReadableStream, onLine: (line: string) => void): void => {
      let buffered = '';
      stream.on('data', (d: Buffer) => {
        buffered = (buffered + d.toString('utf8')).slice(-65536);
        let nl: number;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          onLine(buffered.slice(0, nl));
          buffered = buffered.slice(nl + 1);
        }
      });
    };
    lines(child.stdout, (line) => {
      const sample = parseStatsLine(line, this.#o.role);
      if (!sample) return;
      this.#sample = sample;
      this.#period.add(sample);
      this.#sampleAt = Date.now();
      this.#setState('connected');
    });
    lines(child.stderr, (line) => {
      // A broken link is reported as such (docs/relay.md "Detection"): the tool keeps running to reconnect,
      // so its exit is not the only sign that the link is down.
      const said = classifyStderrLine(line);
      if (said === 'connected') this.#setState('connected');
      else if (said === 'disconnected') this.#setState('disconnected');
      if (said === 'disconnected' || said === 'error')
        this.#log.warn(
          { line: line.trim().replace(/passphrase=[^&\s'"]*/g, 'passphrase=***') },
          'srt-live-transmit',
        );
    });
    child.on('exit', (code, signal) => {
      if (this.#srt !== child) return;
      this.#srt = null;
      this.#running = null;
      this.#setState(code === 0 || signal ? 'disconnected' : 'error');
      this.#log.warn({ code, signal }, 'srt-live-transmit exited; restarting in 1 s');
      if (this.#stopped || !this.#coords) return;
      const coords = this.#coords;
      this.#restartTimer = setTimeout(() => {
        if (!this.#stopped && this.#srt === null) void this.#startSrt(coords);
      }, 1000);
    });
  }

  /** Stop the running srt-live-transmit; returns it while it has not exited yet. */
  #stopSrt(): ChildProcess | null {
    const child = this.#srt;
    this.#srt = null;
    this.#running = null;
    if (!child || child.exitCode !== null || child.signalCode !== null) return null;
    child.kill('SIGINT');
    return child;
  }
}

/**
 * The agent's `meta.clientId`: derived from its token, role, local port and host name, so the same agent
 * restarted on the same device presents the same id (README "Reconnection"), while another device using
 * the same token presents another. A hash: the token cannot be recovered from it.
 */
export function agentClientId(token: string, role: string, port: number): string {
  return createHash('sha256')
    .update(`punch-agent\0${token}\0${role}\0${port}\0${hostname()}`)
    .digest('base64url')
    .slice(0, 22);
}

/**
 * A join link as the console gives it, `http(s)://host:port/s/<name>?t=<token>`: the broker's origin, the
 * session and the token. The stream comes from the token's claims when it is scoped to one.
 */
export function parseJoinLink(link: string): {
  broker: string;
  session: string;
  token: string;
  stream?: string;
} {
  let url: URL;
  try {
    url = new URL(link);
  } catch {
    throw new Error(`join link: not a URL: ${link.slice(0, 80)}`);
  }
  const m = /^\/s\/([^/]+)\/?$/.exec(url.pathname);
  const token = url.searchParams.get('t');
  if (!m?.[1] || !token) throw new Error('join link: expected http(s)://host:port/s/<session>?t=<token>');
  const stream = streamOfToken(token);
  return {
    broker: url.origin,
    session: decodeURIComponent(m[1]),
    token,
    ...(stream ? { stream } : {}),
  };
}

/** The `stream` claim of a token (not verified here: the broker verifies it). */
export function streamOfToken(token: string): string | undefined {
  const body = token.startsWith('p_') ? token.slice(2).split('.')[0] : undefined;
  if (!body) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as { stream?: unknown };
    return typeof claims.stream === 'string' ? claims.stream : undefined;
  } catch {
    return undefined;
  }
}
