/**
 * The Companion session (src/domain/companion/session.ts) on a ManualClock, without sockets: a recording
 * AdapterContext and SessionLinks whose `wake` arms a ManualClock timer, as io/companion/adapter.ts does on the
 * process clock. `out` lists every link output in order; `take()` returns and clears it.
 */
import type { Logger } from '@broadcast-ops/core';
import { ManualClock } from '@broadcast-ops/core/testing';
import type { AdapterContext } from '../../src/domain/adapter.ts';
import { CompanionSession } from '../../src/domain/companion/session.ts';
import type { CompanionSessionOptions, SessionLinks } from '../../src/domain/companion/types.ts';

export type Out = ['open', number, string] | ['send', number, string] | ['close', number, string];

/** A surface id that is its own path segment (`companion.device.<id>`). */
export const DEVICE_ID = 'bridge1';

export function sessionOptions(over: Partial<CompanionSessionOptions> = {}): CompanionSessionOptions {
  return {
    host: 'primary',
    port: 16622,
    device: {
      deviceId: DEVICE_ID,
      productName: 'Bridge',
      keysTotal: 2,
      keysPerRow: 2,
      bitmaps: 0,
      colors: 'hex',
      text: true,
      textStyle: false,
      pincodeLock: false,
      brightness: true,
      variables: [],
    },
    heartbeatInterval: 1000,
    deadAfter: 2500,
    connectionTimeout: 2000,
    replyTimeout: 1000,
    reconnectDelay: 500,
    maxReconnectDelay: 4000,
    reconnectJitter: 100,
    maxReconnectAttempts: 0,
    refreshTimeout: 1000,
    // Jitter drawn as 0: delays are exact.
    random: () => 0,
    ...over,
  };
}

export interface Rig {
  clock: ManualClock;
  session: CompanionSession;
  out: Out[];
  take(): Out[];
  /** Every value written, by path (the last one). */
  state: Map<string, unknown>;
  /** `companion.connection.state` values in the order written. */
  states: string[];
  events: { path: string; event: string; data: unknown }[];
  connected: boolean[];
  logs: { level: string; msg: string }[];
  reconnects: number;
  heldReleased: number;
  /** Let promise continuations (the session's awaits) run. */
  settle(): Promise<void>;
  /** Open link `id` and run BEGIN (ApiVersion 1.7.0: no CAPS) to `ADD-DEVICE OK`. */
  register(id: number): Promise<void>;
}

export function companionRig(
  over: Partial<CompanionSessionOptions> = {},
  restored: Record<string, unknown> = {},
): Rig {
  const clock = new ManualClock(Date.UTC(2026, 10, 29, 10, 0, 0));
  const session = new CompanionSession(sessionOptions(over));
  let wake: { cancel(): void } | undefined;
  const rig: Rig = {
    clock,
    session,
    out: [],
    take: () => rig.out.splice(0),
    state: new Map(),
    states: [],
    events: [],
    connected: [],
    logs: [],
    reconnects: 0,
    heldReleased: 0,
    settle: async () => {
      for (let i = 0; i < 20; i++) await Promise.resolve();
    },
    register: async (id) => {
      session.opened(id);
      session.line(id, 'BEGIN CompanionVersion=3.2.0 ApiVersion=1.7.0');
      await rig.settle();
      session.line(id, `ADD-DEVICE OK DEVICEID=${DEVICE_ID}`);
      await rig.settle();
    },
  };
  const log =
    (level: string) =>
    (_obj: unknown, msg?: string): void => {
      rig.logs.push({ level, msg: msg ?? '' });
    };
  const logger = {
    debug: log('debug'),
    info: log('info'),
    warn: log('warn'),
    error: log('error'),
  } as unknown as Logger;
  const ctx: AdapterContext = {
    clock,
    logger,
    setState(path, value) {
      rig.state.set(path, value);
      if (path === 'companion.connection.state') rig.states.push(value as string);
    },
    emitEvent(path, event, data) {
      rig.events.push({ path, event, data });
    },
    setConnected(c) {
      rig.connected.push(c);
    },
    markStale() {},
    setPathStale() {},
    reportReconnect() {
      rig.reconnects++;
    },
    reportLatency() {},
    read: (path) => restored[path],
    reportHeldReleased() {
      rig.heldReleased++;
    },
  };
  const links: SessionLinks = {
    open: (id, h) => rig.out.push(['open', id, `${h.host}:${h.port}`]),
    send: (id, line) => rig.out.push(['send', id, line]),
    close: (id, reason) => rig.out.push(['close', id, reason]),
    wake: (at) => {
      wake?.cancel();
      wake = at === undefined ? undefined : clock.setTimer(at - clock.monotonicMs(), () => session.tick());
    },
  };
  session.start(ctx, links);
  return rig;
}
