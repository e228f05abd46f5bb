/**
 * A stable error catalogue per service: each code has one HTTP status and a default message.
 * Codes are part of the API contract; messages are for people and may change.
 */
export interface ErrorSpec {
  readonly status: number;
  readonly message: string;
}

export type ErrorCatalogue<C extends string = string> = Readonly<Record<C, ErrorSpec>>;

export function defineErrors<C extends string>(catalogue: Record<C, ErrorSpec>): ErrorCatalogue<C> {
  return Object.freeze({ ...catalogue });
}

export class AppError<C extends string = string> extends Error {
  readonly code: C;
  readonly status: number;
  readonly details: Record<string, unknown> | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(
    code: C,
    status: number,
    message: string,
    options?: { details?: Record<string, unknown>; headers?: Record<string, string>; cause?: unknown },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.status = status;
    this.details = options?.details;
    this.headers = options?.headers;
  }

  /** The JSON body every service sends for an error: `{error: CODE, message}` plus optional details. */
  toBody(): { error: C; message: string; details?: Record<string, unknown> } {
    return this.details === undefined
      ? { error: this.code, message: this.message }
      : { error: this.code, message: this.message, details: this.details };
  }
}

/** Build an error factory bound to a catalogue: `fail('SESSION_EXISTS', 'session "x" exists')`. */
export function errorFactory<C extends string>(catalogue: ErrorCatalogue<C>) {
  return (
    code: C,
    message?: string,
    options?: { details?: Record<string, unknown>; headers?: Record<string, string>; cause?: unknown },
  ): AppError<C> => {
    const spec = catalogue[code];
    return new AppError(code, spec.status, message ?? spec.message, options);
  };
}

export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError;
}

/**
 * The generic codes every HTTP surface of the toolkit answers with (the repository's docs/ARCHITECTURE.md "The HTTP edge"):
 * the meanings all services share, one code and one status each. A service's catalogue extends this set
 * with `extendErrors` and cannot give one of these codes another status.
 */
export const GENERIC_ERRORS = defineErrors({
  /** Malformed JSON, a body or query that fails validation, an empty JSON body. */
  INVALID_REQUEST: { status: 400, message: 'the request is invalid' },
  /** Credential missing, malformed or not valid (RFC 9110 §15.5.2). */
  UNAUTHORIZED: { status: 401, message: 'a valid credential is required' },
  /** A valid credential that does not allow this request (RFC 9110 §15.5.4). */
  FORBIDDEN: { status: 403, message: 'the credential does not allow this request' },
  NOT_FOUND: { status: 404, message: 'not found' },
  /** Body over the app's limit (RFC 9110 §15.5.14). */
  PAYLOAD_TOO_LARGE: { status: 413, message: 'the request body is larger than the limit' },
  /** A body in a media type the route does not take (RFC 9110 §15.5.16). */
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'the request body must be application/json' },
  /** The Host header names no name this server answers to (RFC 9110 §15.5.20; core's host-guard.ts). */
  HOST_NOT_ALLOWED: { status: 421, message: 'this server does not answer to that Host name' },
  RATE_LIMITED: { status: 429, message: 'too many requests' },
  /** Anything unexpected: logged with its cause, never echoed. */
  SERVER_ERROR: { status: 500, message: 'internal server error' },
});

export type GenericErrorCode = keyof typeof GENERIC_ERRORS;

/**
 * A service's catalogue: the generic codes plus its own. Redefining a generic code is refused (by the type
 * and at load), so a generic code has one status in every service.
 */
export function extendErrors<C extends string>(
  own: Record<C, ErrorSpec> & { readonly [K in GenericErrorCode]?: never },
): ErrorCatalogue<C | GenericErrorCode> {
  for (const code of Object.keys(own)) {
    if (Object.hasOwn(GENERIC_ERRORS, code))
      throw new Error(`${code} is a generic error code (core errors.ts)`);
  }
  return defineErrors<C | GenericErrorCode>({ ...GENERIC_ERRORS, ...(own as Record<C, ErrorSpec>) });
}

/** A generic error with its catalogue status: `genericError('UNAUTHORIZED', 'token expired')`. */
export const genericError = errorFactory(GENERIC_ERRORS);
