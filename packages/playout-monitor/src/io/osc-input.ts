/**
 * OSC input runner for `osc_player` servers: one UDP socket per configured port, datagrams demultiplexed
 * by source IP (then channel and layer inside the CasparCG reducer, so two channels of one server never
 * clash). Datagrams from unknown sources are dropped before decoding, so a flood from elsewhere costs
 * almost nothing. Only well-formed CasparCG messages reach the reducers (and count as liveness): garbage
 * from a configured address is counted as malformed and keeps nobody connected.
 * A periodic tick (`tickMs`, 250 ms) lets the reducers notice silence (offline). It runs only while a
 * server has been heard within its stale timeout (the one rule that reads the time,
 * CasparcgReducer.awaitsSilence): with every server silent past it, or never heard, the tick sleeps and the
 * next well-formed message starts it again (docs/at-rest.md at the repository root).
 */
import { createSocket, type Socket } from 'node:dgram';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { TimerHandle } from '@broadcast-ops/core';
import type { OscServerConfig } from '../config.ts';
import { CasparcgReducer } from '../domain/casparcg-reducer.ts';
import type { DevicePatch, LayerState } from '../domain/device-state.ts';
import { ZERO_TIMECODE } from '../domain/timecode.ts';
import { parseCasparMessage } from '../protocol/casparcg.ts';
import { decodeOsc, oscMessages } from '../protocol/osc.ts';
import type { InputContext } from './input-context.ts';

export interface OscInputOptions extends InputContext {
  port: number;
  bindAddress: string;
  servers: OscServerConfig[];
  tickMs?: number;
}

interface Entry {
  server: OscServerConfig;
  reducer: CasparcgReducer;
  /** Further watched layers (`layers` minus `layer`), each its own reducer and last shown state. */
  extra: { layer: number; reducer: CasparcgReducer; shown: LayerState }[];
}

/** A layer's own state from its reducer's patch; what the patch leaves out (offline) is kept. */
export function layerState(layer: number, p: DevicePatch, before?: LayerState): LayerState {
  const filename = p.filename ?? before?.filename ?? '';
  const state = p.state ?? before?.state ?? 'offline';
  const out: LayerState = {
    layer,
    state,
    paused: state === 'stop' && filename !== '',
    timecode: p.timecode ?? before?.timecode ?? ZERO_TIMECODE,
    filename,
  };
  const keep = p.state !== 'offline';
  for (const k of ['positionMs', 'durationMs', 'remainingMs'] as const) {
    const v = keep ? p[k] : before?.[k];
    if (v !== undefined) out[k] = v;
  }
  return out;
}

function normaliseAddress(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

export class OscInput {
  readonly #o: OscInputOptions;
  readonly #byAddress = new Map<string, Entry[]>();
  readonly #entries: Entry[] = [];
  #socket: Socket | undefined;
  #tick: TimerHandle | undefined;
  #closed = false;

  constructor(options: OscInputOptions) {
    this.#o = options;
    const reducerFor = (s: OscServerConfig, layer: number): CasparcgReducer =>
      new CasparcgReducer({
        channel: s.channel,
        layer,
        framerate: s.framerate,
        videoFormat: s.videoFormat,
        defaultFramerate: options.defaultFramerate,
        staleTimeoutMs: s.staleTimeoutMs,
        layerQuietMs: s.layerQuietMs,
        advanceWindowMs: 500,
      });
    for (const s of options.servers) {
      this.#entries.push({
        server: s,
        extra: (s.layers ?? [])
          .filter((l) => l !== s.layer)
          .map((layer) => ({ layer, reducer: reducerFor(s, layer), shown: layerState(layer, {}) })),
        reducer: reducerFor(s, s.layer),
      });
    }
  }

  /** Resolve server addresses (CasparCG sends from an IP; names are resolved once), bind, start ticking. */
  async start(): Promise<number> {
    for (const entry of this.#entries) {
      const s = entry.server;
      let address = s.ip;
      if (isIP(address) === 0) {
        try {
          address = (await lookup(address, { family: 4 })).address;
        } catch (err) {
          this.#o.logger.warn(
            { id: s.id, ip: s.ip, err },
            'cannot resolve the CasparCG server name; use an IP',
          );
        }
      }
      const list = this.#byAddress.get(address) ?? [];
      list.push(entry);
      this.#byAddress.set(address, list);
    }
    const socket = createSocket({
      type: isIP(this.#o.bindAddress) === 6 ? 'udp6' : 'udp4',
      reuseAddr: false,
    });
    this.#socket = socket;
    socket.on('message', (msg, rinfo) => this.#onDatagram(msg, normaliseAddress(rinfo.address)));
    socket.on('error', (err) => this.#o.logger.error({ err }, 'OSC socket error'));
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(this.#o.port, this.#o.bindAddress, () => {
        socket.removeListener('error', reject);
        resolve();
      });
    });
    try {
      // 50 bundle sets per second per server at 50p: give the kernel room for bursts.
      socket.setRecvBufferSize(1024 * 1024);
    } catch {
      /* not permitted: the default buffer still works */
    }
    this.#refreshAll();
    if (this.#awaitsSilence()) this.#armTick();
    return socket.address().port;
  }

  #armTick(): void {
    if (this.#closed) return;
    this.#tick = this.#o.clock.setTimer(this.#o.tickMs ?? 250, () => {
      this.#tick = undefined;
      this.#refreshAll();
      if (this.#awaitsSilence()) this.#armTick();
    });
  }

  /** True while the silence tick is armed (tests). */
  get ticking(): boolean {
    return this.#tick !== undefined;
  }

  #awaitsSilence(): boolean {
    const now = this.#o.clock.monotonicMs();
    return this.#entries.some(
      (e) => e.reducer.awaitsSilence(now) || e.extra.some((x) => x.reducer.awaitsSilence(now)),
    );
  }

  /** Re-derive every device without new data: silence turns into offline, a quiet layer into stop. */
  #refreshAll(): void {
    const now = this.#o.clock.monotonicMs();
    for (const e of this.#entries) this.#o.store.apply(e.server.id, this.#derive(e, now), false);
  }

  /** The device's patch (its own `layer`), with every watched layer's state when `layers` is configured. */
  #derive(e: Entry, now: number): DevicePatch {
    const patch = e.reducer.derive(now);
    if (e.server.layers === undefined) return patch;
    const own = this.#o.store.get(e.server.id);
    const layers = [layerState(e.server.layer, patch, own?.layers?.[0])];
    for (const x of e.extra) {
      x.shown = layerState(x.layer, x.reducer.derive(now), x.shown);
      layers.push(x.shown);
    }
    return { ...patch, layers };
  }

  /** Entry point for one datagram (public for tests that drive it without a socket). */
  handleDatagram(msg: Uint8Array, address: string): void {
    this.#onDatagram(msg, address);
  }

  #onDatagram(msg: Uint8Array, address: string): void {
    const entries = this.#byAddress.get(address);
    if (!entries) {
      this.#o.malformed.report('osc-unknown-source', { address });
      return;
    }
    const now = this.#o.clock.monotonicMs();
    const datagram = decodeOsc(msg);
    if (!datagram.ok) {
      this.#o.malformed.report('osc-datagram', {
        address,
        code: datagram.error.code,
        error: datagram.error.message,
      });
      return;
    }
    const { packet, skipped } = datagram.value;
    for (const err of skipped) {
      this.#o.malformed.report('osc-element', { address, code: err.code, error: err.message });
    }
    let wellFormed = 0;
    for (const m of oscMessages(packet)) {
      const parsed = parseCasparMessage(m);
      if (!parsed.ok) {
        if (parsed.error.code === 'bad-arguments')
          this.#o.malformed.report('osc-arguments', { address, path: parsed.error.address });
        continue;
      }
      wellFormed++;
      for (const e of entries) {
        e.reducer.onEvent(parsed.value, now);
        for (const x of e.extra) x.reducer.onEvent(parsed.value, now);
      }
    }
    if (wellFormed === 0) return;
    for (const e of entries) this.#o.store.apply(e.server.id, this.#derive(e, now), true);
    if (this.#tick === undefined && this.#socket !== undefined) this.#armTick();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#tick?.cancel();
    const socket = this.#socket;
    this.#socket = undefined;
    if (socket) await new Promise<void>((resolve) => socket.close(() => resolve()));
  }
}
