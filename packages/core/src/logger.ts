import { pino, type Logger, type LoggerOptions, type DestinationStream } from 'pino';

export type { Logger } from 'pino';

export interface LoggerConfig {
  service: string;
  level?: string;
  /** Human-readable output instead of JSON lines; only when asked (LOG_PRETTY=1 or config). */
  pretty?: boolean;
  /** Extra paths to redact (secrets, passphrases, tokens). */
  redact?: string[];
  /** Write here instead of stdout (tests). */
  destination?: DestinationStream;
}

/** Field paths never logged, whatever the component: credentials and keys. */
export const DEFAULT_REDACT = [
  'secret',
  'password',
  'passphrase',
  'token',
  'authorization',
  '*.secret',
  '*.password',
  '*.passphrase',
  '*.token',
  '*.authorization',
  'req.headers.authorization',
  'headers.authorization',
];

/**
 * JSON lines with a numeric `level`, ISO 8601 `time`, `service` and, on child loggers, `component`.
 * Components get their own child: `logger.child({ component: 'ntp-server' })`.
 */
export function createLogger(config: LoggerConfig): Logger {
  const options: LoggerOptions = {
    level: config.level ?? 'info',
    base: { service: config.service },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: [...DEFAULT_REDACT, ...(config.redact ?? [])], censor: '[redacted]' },
  };
  if (config.destination) return pino(options, config.destination);
  if (config.pretty) {
    return pino({
      ...options,
      transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:standard' } },
    });
  }
  return pino(options);
}

/** A logger that writes nothing, for tests that do not look at logs. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
