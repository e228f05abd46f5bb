import assert from 'node:assert/strict';
import type { PeerLink } from '../src/domain/signalling.ts';
import type { TokenClaims } from '../src/protocol/token.ts';
import { parseClientMessage, type ClientMessage } from '../src/protocol/ws-messages.ts';

/**
 * The hub with time in hand (ManualClock) and links that record what they are sent: the rules that need
 * addresses or waits a loopback test cannot produce (IPv6 peers, a 30 s detach grace, many connections).
 */
export class FakeLink implements PeerLink {
  readonly sent: Record<string, unknown>[] = [];
  ended: string | null = null;
  constructor(
    readonly ip: string,
    readonly holder: string,
    readonly claims: TokenClaims,
    readonly answersPing = true,
  ) {}
  send(text: string): void {
    this.sent.push(JSON.parse(text) as Record<string, unknown>);
  }
  end(reason: 'replaced' | 'session_closed'): void {
    this.ended = reason;
  }
  probe(): Promise<boolean> {
    return Promise.resolve(this.answersPing);
  }
  types(): string[] {
    return this.sent.map((m) => m['type'] as string);
  }
  last(type: string): Record<string, unknown> | undefined {
    return this.sent.filter((m) => m['type'] === type).at(-1);
  }
}

export function msg(m: object): ClientMessage {
  const r = parseClientMessage(JSON.stringify(m));
  assert.ok(r.ok);
  return r.value;
}

export const settle = () => new Promise((r) => setImmediate(r));
