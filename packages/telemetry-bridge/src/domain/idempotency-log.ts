/**
 * The idempotency registry rebuilt from the event log at start (docs/protocol.md "Commands": a repeated key
 * is never executed again, restarts included). Pure: log records in, registry entries out.
 *
 * A command is logged as a `command` record followed, in the same durability batch, by its `received` ack;
 * the command is dispatched only after that batch is fsynced. So, per logged command with an
 * `idempotencyKey` inside the window:
 * - command and `received` and a final ack in the log: the retry gets both recorded acks, nothing runs;
 * - command and `received` but no final ack (the bridge died while it ran): it may or may not have reached
 *   the device. It is never run again: the retry gets `received` and a final `failed` ack with code
 *   `INTERNAL_ERROR` and `details.outcome: "unknown"` (written to the log at start, so every later retry
 *   gets the same one);
 * - command without `received` (the crash tore the batch before its fsync completed): it was never
 *   dispatched and no ack was ever sent, so it is not remembered and a retry runs it (once).
 */
import type { LogRecord } from '../protocol/log-record.ts';

export interface RestoredIdem {
  /** `<idempotency scope>\0<idempotencyKey>` as the command router keys it (client-registry.ts). */
  key: string;
  namespace: string;
  /** Wall time (Unix ms) the command was logged. */
  at: number;
  receivedJson: string;
  /** The recorded final ack, or undefined when the bridge died before it. */
  finalJson: string | undefined;
  /** What a synthesised final ack needs. */
  command: { id: string; path: string; correlationId: string };
}

function isObj(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * Every idempotent command logged within `windowMs` before `nowWall`, with its recorded acks. Later records
 * for the same key (a newer command after the previous one's window) replace earlier ones.
 */
export function idempotencyFromLog(
  records: readonly LogRecord[],
  nowWall: number,
  windowMs: number,
): RestoredIdem[] {
  const byCommand = new Map<string, RestoredIdem & { hasReceived: boolean }>();
  const byKey = new Map<string, string>();
  for (const r of records) {
    if (!isObj(r.m)) continue;
    const m = r.m;
    if (r.k === 'command') {
      if (nowWall - r.t > windowMs) continue;
      const ns = m['source'];
      const key = m['idempotencyKey'];
      const id = m['id'];
      const scope = m['idemScope'];
      if (typeof ns !== 'string' || typeof key !== 'string' || typeof id !== 'string') continue;
      if (typeof scope !== 'string') continue;
      const idemKey = `${scope}\u0000${key}`;
      const cmdKey = `${ns}\u0000${id}`;
      const prev = byKey.get(idemKey);
      if (prev !== undefined) byCommand.delete(prev);
      byKey.set(idemKey, cmdKey);
      byCommand.set(cmdKey, {
        key: idemKey,
        namespace: ns,
        at: r.t,
        receivedJson: '',
        hasReceived: false,
        finalJson: undefined,
        command: {
          id,
          path: typeof m['path'] === 'string' ? m['path'] : '',
          correlationId: typeof m['correlationId'] === 'string' ? m['correlationId'] : id,
        },
      });
      continue;
    }
    if (r.k !== 'ack' || !isObj(m['payload'])) continue;
    const ns = m['target'];
    const commandId = m['payload']['commandId'];
    const status = m['payload']['status'];
    if (typeof ns !== 'string' || typeof commandId !== 'string') continue;
    const entry = byCommand.get(`${ns}\u0000${commandId}`);
    if (!entry) continue;
    if (status === 'received') {
      entry.receivedJson = JSON.stringify(m);
      entry.hasReceived = true;
    } else if (entry.finalJson === undefined) entry.finalJson = JSON.stringify(m);
  }
  const out: RestoredIdem[] = [];
  for (const e of byCommand.values()) {
    if (!e.hasReceived) continue;
    const { hasReceived: _, ...entry } = e;
    out.push(entry);
  }
  return out;
}
