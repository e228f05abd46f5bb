/**
 * Malformed input accounting: every bad datagram, document or line is counted per kind
 * (`playout_monitor_malformed_input_total{kind}`) and logged once per kind, so a flood of garbage is
 * visible without flooding the log. Never throws.
 */
import { Counter, type Logger, type Registry } from '@broadcast-ops/core';

export class MalformedInputs {
  readonly #logger: Logger;
  readonly #counter: Counter;
  readonly #counts = new Map<string, number>();

  constructor(logger: Logger, registry: Registry) {
    this.#logger = logger;
    this.#counter = new Counter({
      name: 'playout_monitor_malformed_input_total',
      help: 'Malformed device input (OSC datagrams, vMix XML, HyperDeck lines), by kind',
      labelNames: ['kind'],
      registers: [registry],
    });
  }

  report(kind: string, details: Record<string, unknown>): void {
    const n = (this.#counts.get(kind) ?? 0) + 1;
    this.#counts.set(kind, n);
    this.#counter.inc({ kind });
    if (n === 1) this.#logger.warn({ kind, ...details }, 'malformed input (logged once per kind; counted)');
  }

  counts(): Record<string, number> {
    return Object.fromEntries(this.#counts);
  }
}
