import { randomBytes } from 'node:crypto';
import { Counter, Gauge, type Logger, type Registry } from '@broadcast-ops/core';
import type { RelayPort } from '../../domain/signalling.ts';
import {
  parseRelayAnswer,
  parseRelayRegistration,
  relayOfAllocation,
  type RelayAnswer,
  type RelayRegistration,
  type RelayRequest,
} from '../../protocol/relay-bus.ts';
import type { RelayPathReport } from '../../protocol/relay-path-view.ts';
import type { RedisCluster } from '../redis-cluster.ts';

/**
 * The relays of a Redis deployment as the broker sees them (docs/relay.md "Relays on Redis"): every relay
 * whose registration is current, `punch relay` processes and the relays inside broker instances alike. An
 * allocation goes to the live relay with the most free allocations (then the next, when one refuses or does
 * not answer within `answerMs`). A relay whose registration expired is lost: logged, counted
 * (`punch_relay_losses_total`), and `onLost` re-allocates its streams.
 */
export interface RedisRelaysOptions {
  cluster: RedisCluster;
  logger: Logger;
  registry: Registry;
  /** How often the registrations are read. Default 1 s. */
  pollMs?: number;
  /** How long a relay has to answer an allocation request. Default 2 s. */
  answerMs?: number;
  /** A relay that was up is gone (its registration expired). */
  onLost?: (relay: string) => void;
  /** A relay ended one of its allocations (idle, expired, released). */
  onEnded?: (id: string, reason: string) => void;
}

type Allocated = { ok: true; id: string; address: string; ports: readonly [number, number] };
type Refused = { ok: false; reason: string };
type AllocateRequest = Parameters<RelayPort['allocate']>[0];

export class RedisRelays implements RelayPort {
  readonly #o: RedisRelaysOptions;
  readonly #pending = new Map<string, (answer: Allocated | Refused) => void>();
  readonly #losses: Counter;
  readonly #upGauge: Gauge;
  readonly #late: Counter;
  #up = new Map<string, RelayRegistration>();
  #timer: NodeJS.Timeout | null = null;
  #polling: Promise<void> | null = null;
  readonly #unsubscribe: () => void;
  /** The last report of each allocation (docs/relay.md "What the relay measures"), by allocation id. */
  readonly #reports = new Map<string, RelayPathReport>();

  constructor(options: RedisRelaysOptions) {
    this.#o = options;
    const registers = [options.registry];
    this.#upGauge = new Gauge({
      name: 'punch_relays_up',
      help: 'Relays whose registration in Redis is current (punch relay processes and broker relays)',
      registers,
    });
    this.#upGauge.set(0);
    this.#losses = new Counter({
      name: 'punch_relay_losses_total',
      help: 'Relays that were up and whose registration expired (crashed, killed, cut off from Redis)',
      registers,
    });
    this.#late = new Counter({
      name: 'punch_relay_late_answers_total',
      help: 'Allocations a relay answered after this instance stopped waiting (2 s), released at once',
      registers,
    });
    this.#unsubscribe = options.cluster.subscribe((m) => {
      // The bus also carries forwarded requests and bridged sockets: only relay answers are parsed here.
      if (!m.t.startsWith('relay_')) return;
      const parsed = parseRelayAnswer(m);
      if (!parsed.ok) return;
      const answer = parsed.value;
      if (answer.t === 'relay_ended') {
        this.#reports.delete(answer.id);
        options.onEnded?.(answer.id, answer.reason);
        return;
      }
      if (answer.t === 'relay_report') {
        this.#keepReport(answer);
        return;
      }
      const resolve = this.#pending.get(answer.rq);
      this.#pending.delete(answer.rq);
      if (!resolve && answer.t === 'relay_allocated') {
        // Asked by this instance (it came on its bus) but no longer wanted: the wait timed out, or the
        // instance is stopping. Released at once rather than left to the relay's idle timeout.
        this.#late.inc();
        options.logger.warn(
          { allocation: answer.id, outcome: 'relay_late_answer' },
          'a relay allocated after the broker stopped waiting; released',
        );
        this.release(answer.id);
        return;
      }
      resolve?.(
        answer.t === 'relay_allocated'
          ? { ok: true, id: answer.id, address: answer.address, ports: answer.ports }
          : { ok: false, reason: answer.reason },
      );
    });
  }

  /** The relays up at the last read. */
  get up(): ReadonlyMap<string, RelayRegistration> {
    return this.#up;
  }

  isUp(relay: string): boolean {
    return this.#up.has(relay);
  }

  start(): void {
    this.#timer = setInterval(() => void this.poll(), this.#o.pollMs ?? 1_000);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#unsubscribe();
    for (const resolve of this.#pending.values()) resolve({ ok: false, reason: 'closed' });
    this.#pending.clear();
  }

  /** Read the registrations (one read at a time); a relay that was up and is not any more is lost. */
  poll(): Promise<void> {
    this.#polling ??= this.#read().finally(() => {
      this.#polling = null;
    });
    return this.#polling;
  }

  async #read(): Promise<void> {
    const { redis, keys } = this.#o.cluster;
    let ids: string[];
    let texts: (string | null)[];
    try {
      ids = await redis.smembers(keys.relays);
      texts = ids.length > 0 ? await redis.mget(ids.map((id) => keys.relay(id))) : [];
    } catch {
      // Redis does not answer: nothing is known about the relays, and nothing is declared lost.
      return;
    }
    const now = new Map<string, RelayRegistration>();
    const gone: string[] = [];
    ids.forEach((id, k) => {
      const parsed = texts[k] ? parseRelayRegistration(texts[k]) : undefined;
      const reg = parsed?.ok ? parsed.value : undefined;
      if (reg && reg.id === id) now.set(id, reg);
      else gone.push(id);
    });
    if (gone.length > 0) await redis.srem(keys.relays, ...gone).catch(() => undefined);
    const before = this.#up;
    this.#up = now;
    this.#upGauge.set(now.size);
    for (const [id, reg] of before) {
      if (now.has(id)) continue;
      this.#losses.inc();
      this.#o.logger.error(
        { relay: id, address: reg.address, kind: reg.kind, outcome: 'relay_lost' },
        'a relay stopped renewing its registration; its relayed streams are moved to another relay',
      );
      this.#o.onLost?.(id);
    }
    for (const [id, reg] of now) {
      if (!before.has(id))
        this.#o.logger.info(
          { relay: id, address: reg.address, kind: reg.kind, capacity: reg.capacity },
          'relay up',
        );
    }
  }

  async allocate(req: AllocateRequest): Promise<Allocated | Refused> {
    if (this.#up.size === 0) await this.poll();
    const candidates = [...this.#up.values()].sort((a, b) => b.free - a.free);
    let last: Refused = { ok: false, reason: 'no_relay' };
    for (const relay of candidates) {
      const answer = await this.#ask(relay.id, req);
      if (answer.ok) return answer;
      last = answer;
    }
    return last;
  }

  figures(id: string): RelayPathReport | undefined {
    return this.#reports.get(id);
  }

  #keepReport(report: Extract<RelayAnswer, { t: 'relay_report' }>): void {
    // Stamped with this host's clock on arrival (the bus adds milliseconds), so a relay host's clock offset
    // never shows as age. Bounded: a report replaces that relay's earlier entries; entries older than a
    // minute go.
    const now = Date.now();
    for (const [id, r] of this.#reports)
      if (relayOfAllocation(id) === report.relay || now - r.at > 60_000) this.#reports.delete(id);
    for (const a of report.allocations) {
      if (relayOfAllocation(a.id) !== report.relay) continue;
      this.#reports.set(a.id, { at: now, directions: a.directions });
    }
  }

  release(id: string): void {
    this.#reports.delete(id);
    this.#send(id, { t: 'release', id });
  }

  renew(id: string, lifetimeMs: number): void {
    this.#send(id, { t: 'renew', id, lifetimeMs });
  }

  /** A request on the channel of the relay an allocation is on. */
  #send(id: string, message: RelayRequest): void {
    const relay = relayOfAllocation(id);
    if (relay === undefined) return;
    const { redis, keys } = this.#o.cluster;
    void redis.publish(keys.relayRequests(relay), JSON.stringify(message)).catch(() => undefined);
  }

  async #ask(relay: string, req: AllocateRequest): Promise<Allocated | Refused> {
    const rq = randomBytes(9).toString('base64url');
    const message: RelayRequest = {
      t: 'allocate',
      rq,
      from: this.#o.cluster.id,
      sessionId: req.sessionId,
      peers: [req.peers[0], req.peers[1]],
      ...(req.bytesPerSecond === undefined ? {} : { bytesPerSecond: req.bytesPerSecond }),
      ...(req.lifetimeMs === undefined ? {} : { lifetimeMs: req.lifetimeMs }),
    };
    const answered = new Promise<Allocated | Refused>((resolve) => this.#pending.set(rq, resolve));
    const { redis, keys } = this.#o.cluster;
    let listeners: number;
    try {
      listeners = await redis.publish(keys.relayRequests(relay), JSON.stringify(message));
    } catch {
      listeners = 0;
    }
    if (listeners === 0) {
      this.#pending.delete(rq);
      return { ok: false, reason: 'relay_unreachable' };
    }
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<Refused>((resolve) => {
      timer = setTimeout(() => resolve({ ok: false, reason: 'relay_timeout' }), this.#o.answerMs ?? 2_000);
    });
    const answer = await Promise.race([answered, timeout]);
    clearTimeout(timer);
    this.#pending.delete(rq);
    if (!answer.ok) this.#o.logger.warn({ relay, reason: answer.reason }, 'relay did not allocate');
    return answer;
  }
}
