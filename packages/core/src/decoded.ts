/**
 * The one result every codec returns (docs/ARCHITECTURE.md "Codecs return Decoded"): a decoder or parser of
 * peer input never throws and never answers `undefined` for bad input; it returns `Decoded<T, E>`, either the
 * value or a typed error. Pure: no imports, so every service's protocol/ layer can use it.
 */

/**
 * Why input was refused. `code` is stable (tests, metrics and peers' error codes are built from it), `message`
 * is for a person, `offset` is the byte (or character) offset of the fault where the codec knows it.
 */
export interface DecodeError<C extends string = string> {
  code: C;
  message: string;
  offset?: number;
}

/** A decoded value, or the reason the input was refused. Test `ok` first; both arms are plain objects. */
export type Decoded<T, E = DecodeError> = { ok: true; value: T } | { ok: false; error: E };

/** The success arm. */
export function decoded<T>(value: T): { ok: true; value: T } {
  return { ok: true, value };
}

/** The failure arm. */
export function rejected<E>(error: E): { ok: false; error: E } {
  return { ok: false, error };
}

/** A `DecodeError` refusal in one call: `return reject('too-short', 'header needs 48 bytes', 0)`. */
export function reject<C extends string>(
  code: C,
  message: string,
  offset?: number,
): { ok: false; error: DecodeError<C> } {
  return rejected(offset === undefined ? { code, message } : { code, message, offset });
}
