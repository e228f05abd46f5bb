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
