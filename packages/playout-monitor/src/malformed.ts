/**
 * Malformed input accounting: every bad datagram, document or line is counted per kind
 * (`playout_monitor_malformed_input_total{kind}`) and logged once per kind, so a flood of garbage is
 * visible without flooding the log. Never throws. The kinds are a closed list: the README's list is
 * checked against it by a test.
 */
import { Counter, type Logger, type Registry } from '@broadcast-ops/core';

export const MALFORMED_KINDS = {
  'osc-datagram': 'an OSC datagram unusable as a whole (not OSC, truncated, too large)',
  'osc-element': 'one element of an OSC bundle skipped; the rest of the datagram is kept',
  'osc-arguments': 'a CasparCG address with arguments of the wrong type or count',
  'osc-unknown-source': 'a datagram from an address no osc_player is configured with (dropped undecoded)',
  'vmix-not-xml': 'a vMix answer that is not well-formed XML (cut short, garbage)',
  'vmix-not-vmix': 'well-formed XML without a <vmix> root',
  'vmix-too-large': 'a vMix answer over the size bound (the download is cut there)',
  'vmix-http-status': 'a vMix answer with an HTTP status other than 200',
  'vmix-tcp-malformed':
    'a vMix TCP API line that is not `<COMMAND> <OK|ER|length>`, over its bound, or a bad TALLY',
  'hyperdeck-unknown-line': 'a HyperDeck line that is neither a response header nor a parameter',
  'hyperdeck-bad-parameter': 'a line inside a HyperDeck response block that is not `key: value`',
  'hyperdeck-line-too-long': 'a HyperDeck line over the length bound (dropped)',
  'hyperdeck-unterminated-block': 'a HyperDeck response block cut short by the next header',
  'hyperdeck-too-many-parameters': 'a HyperDeck response block over the parameter bound',
  'hyperdeck-unexpected-response': 'a HyperDeck reply with no command waiting for it, or a repeated banner',
  'hyperdeck-bad-response': 'a HyperDeck response whose content could not be applied',
} as const;

export type MalformedKind = keyof typeof MALFORMED_KINDS;

export class MalformedInputs {
  readonly #logger: Logger;
  readonly #counter: Counter;
  readonly #counts = new Map<MalformedKind, number>();

  constructor(logger: Logger, registry: Registry) {
    this.#logger = logger;
    this.#counter = new Counter({
      name: 'playout_monitor_malformed_input_total',
      help: 'Malformed device input (OSC datagrams, vMix XML, HyperDeck lines), by kind',
      labelNames: ['kind'],
      registers: [registry],
    });
  }

  report(kind: MalformedKind, details: Record<string, unknown>): void {
    const n = (this.#counts.get(kind) ?? 0) + 1;
    this.#counts.set(kind, n);
    this.#counter.inc({ kind });
    if (n === 1) this.#logger.warn({ kind, ...details }, 'malformed input (logged once per kind; counted)');
  }

  counts(): Partial<Record<MalformedKind, number>> {
    return Object.fromEntries(this.#counts);
  }

  /** Total of all kinds (tests and the bench). */
  total(): number {
    let n = 0;
    for (const v of this.#counts.values()) n += v;
    return n;
  }
}
