import { createHmac } from 'node:crypto';
import type { HealthAlarm } from '../domain/health-monitor.ts';

/**
 * The health alarm webhook (README "Health", docs/health.md "Alarms"): each alarm change is POSTed as JSON
 * to the configured URL, one at a time in order. Bounded: at most `MAX_QUEUED` waiting (the oldest is
 * dropped, and logged), `retries` more attempts after a network error, a timeout, a 429 or a 5xx (1 s, 2 s,
 * 4 s … apart, at most 30 s), none after another 4xx. The URL carries no secret (config refuses
 * credentials and query strings in it); with a secret the body is signed: `Punch-Signature:
 * sha256=<hex HMAC-SHA256(secret, body)>`, the scheme GitHub's webhooks use. The secret is never logged.
 */
export const MAX_QUEUED = 100;

export interface AlarmWebhookOptions {
  url: string;
  secret: string | undefined;
  retries: number;
  timeoutMs: number;
  /** Where failures go (pino's `warn` fits); never given the URL or the secret. */
  logger: { warn: (fields: object, message: string) => void };
  /** Delay before retry n (1-based); default 1 s doubling, at most 30 s. Tests shorten it. */
  backoffMs?: (attempt: number) => number;
}

export interface AlarmBody {
  type: 'health_alarm';
  session: string;
  stream: string;
  alarm: HealthAlarm['alarm'];
  active: boolean;
  message: string;
  at: string;
}

export class AlarmWebhook {
  readonly #o: AlarmWebhookOptions;
  readonly #queue: AlarmBody[] = [];
  #busy = false;
  #closed = false;
  /** Delivered and given-up counts (tests and logs). */
  delivered = 0;
  failed = 0;

  constructor(options: AlarmWebhookOptions) {
    this.#o = options;
  }

  send(alarm: HealthAlarm): void {
    if (this.#closed) return;
    if (this.#queue.length >= MAX_QUEUED) {
      const lost = this.#queue.shift();
      this.failed++;
      this.#o.logger.warn(
        { session: lost?.session, stream: lost?.stream },
        'alarm webhook: queue full, oldest alarm dropped',
      );
    }
    this.#queue.push({
      type: 'health_alarm',
      session: alarm.session,
      stream: alarm.stream,
      alarm: alarm.alarm,
      active: alarm.active,
      message: alarm.message,
      at: new Date(alarm.at).toISOString(),
    });
    void this.#drain();
  }

  /** Stop sending (shutdown): what is queued is dropped. */
  close(): void {
    this.#closed = true;
    this.#queue.length = 0;
  }

  async #drain(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      for (let next = this.#queue.shift(); next && !this.#closed; next = this.#queue.shift()) {
        await this.#deliver(next);
      }
    } finally {
      this.#busy = false;
    }
  }

  async #deliver(body: AlarmBody): Promise<void> {
    const text = JSON.stringify(body);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': 'punch-broker',
    };
    if (this.#o.secret) {
      headers['punch-signature'] =
        `sha256=${createHmac('sha256', this.#o.secret).update(text).digest('hex')}`;
    }
    const backoff = this.#o.backoffMs ?? ((n: number) => Math.min(30_000, 1000 * 2 ** (n - 1)));
    let why = '';
    for (let attempt = 0; attempt <= this.#o.retries && !this.#closed; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, backoff(attempt)).unref());
      try {
        const res = await fetch(this.#o.url, {
          method: 'POST',
          headers,
          body: text,
          redirect: 'error',
          signal: AbortSignal.timeout(this.#o.timeoutMs),
        });
        await res.arrayBuffer().catch(() => undefined);
        if (res.ok) {
          this.delivered++;
          return;
        }
        why = `HTTP ${res.status}`;
        if (res.status !== 429 && res.status < 500) break;
      } catch (err) {
        why =
          (err as Error).name === 'TimeoutError'
            ? `no answer within ${this.#o.timeoutMs} ms`
            : (err as Error).message;
      }
    }
    this.failed++;
    this.#o.logger.warn(
      { session: body.session, stream: body.stream, alarm: body.alarm, error: why },
      'alarm webhook: not delivered',
    );
  }
}
