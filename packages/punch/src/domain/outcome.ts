/**
 * Typed outcomes of the domain. The broker and the access checks never throw for a refusal and never pick
 * an HTTP status or a WebSocket close code: they return a refusal with a stable code (the spec's error
 * codes plus `STORE_FAILED`), and each transport maps it (`src/io/http-errors.ts` for HTTP).
 */
export type RefusalCode =
  | 'INVALID_MESSAGE'
  | 'AUTH_FAILED'
  | 'SESSION_EXISTS'
  | 'SESSION_FULL'
  | 'STREAM_TAKEN'
  | 'SESSION_EXPIRED'
  | 'SESSION_LIMIT'
  /** The change could not be saved; memory was rolled back, nothing changed. */
  | 'STORE_FAILED';

export interface Refusal<C extends RefusalCode = RefusalCode> {
  ok: false;
  code: C;
  message: string;
}

export type Outcome<T extends object, C extends RefusalCode> = ({ ok: true } & T) | Refusal<C>;

export function refuse<C extends RefusalCode>(code: C, message: string): Refusal<C> {
  return { ok: false, code, message };
}
