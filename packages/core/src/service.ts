import type { Logger } from 'pino';
import { runCli, type CliCommand } from './cli.ts';
import { systemClock, type Clock } from './clock.ts';
import { ConfigError } from './config.ts';
import { createLogger, silentLogger, type LoggerConfig } from './logger.ts';
import { Shutdown } from './shutdown.ts';
import { releaseStartSettings } from './start-v8.ts';

/**
 * The contract every service's `app.ts` returns (docs/ARCHITECTURE.md "One skeleton"): `runService` drives
 * it, tests drive it the same way on 127.0.0.1:0 or with a `ManualClock`.
 */
export interface Service {
  /** Open every port and start every input; resolves once the service answers. Rejects if it cannot start. */
  start(): Promise<void>;
  /**
   * Stop accepting, let in-flight work finish, close every socket, timer and file. Safe to call twice and
   * after a failed or partial `start`.
   */
  close(): Promise<void>;
  /** The service's own summary: `status` plus whatever its health route documents. */
  health(): ServiceHealth;
  /** What to log once started (URLs, ports, counts); never a secret. */
  describe(): Record<string, unknown>;
  /**
   * Optional: re-read what can change without a restart (certificates, keys). `runService` calls it on SIGHUP
   * once the service is built, until it closes; a service without it keeps SIGHUP's default.
   */
  reload?(reason: string): void;
}

export interface ServiceHealth {
  status: string;
  [key: string]: unknown;
}

/** What `create` gets: everything a service needs from its process, and nothing read from globals later. */
export interface ServiceContext<C> {
  config: C;
  /** The config file the configuration came from (`--config` or the definition's `configEnv`), if any. */
  configFile: string | undefined;
  logger: Logger;
  clock: Clock;
  env: NodeJS.ProcessEnv;
  /** The run command's flags, including the definition's `runOptions`. */
  values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  /** Closers added here run after the service's own `close` (they were opened before it). */
  shutdown: Shutdown;
}

/**
 * A context for building a `Service` outside `runService` (tests, benches): no config file, a silent logger,
 * the system clock, an empty environment and flags, a `Shutdown` that listens to no signal; `parts` replace any.
 */
export function serviceContext<C>(config: C, parts: Partial<ServiceContext<C>> = {}): ServiceContext<C> {
  const logger = parts.logger ?? silentLogger();
  return {
    config,
    configFile: undefined,
    logger,
    clock: systemClock,
    env: {},
    values: {},
    shutdown: new Shutdown({ logger, signals: [] }),
    ...parts,
  };
}

export interface ServiceDefinition<C> {
  /** The binary's name, as in `--help` and error lines (`timesvc: …`). */
  bin: string;
  description: string;
  /** The run command's name (default `run`); it is also the default command. */
  runCommand?: string;
  runSummary?: string;
  /** Environment variable naming the config file when `--config` is not given. */
  configEnv?: string;
  configDescription?: string;
  /** Parse and validate; throw `ConfigError` for the operator's mistakes (exit code 2). */
  loadConfig(file: string | undefined, env: NodeJS.ProcessEnv): C;
  /** Logger settings from the configuration (service name, level, redaction, destination). */
  logger(config: C, env: NodeJS.ProcessEnv): LoggerConfig;
  /**
   * Build the service (app.ts); nothing listens before `start`. A `ConfigError` thrown here or by `start`
   * exits 2 with one line, as from `loadConfig`; any other error exits 1.
   */
  create(context: ServiceContext<C>): Service | Promise<Service>;
  /** The log message once started, e.g. 'telemetry bridge listening'. */
  startedMessage: string;
  /** Extra flags of the run command. */
  runOptions?: CliCommand['options'];
  /** Other sub-commands of the same binary (tools, simulators, a client). */
  commands?: Record<string, CliCommand>;
}

/** Process-level seams, for tests. */
export interface RunServiceOptions {
  argv?: string[];
  env?: NodeJS.ProcessEnv;
  clock?: Clock;
  /** Passed to `Shutdown`; default `process.exit`. */
  exit?: (code: number) => void;
  signals?: NodeJS.Signals[];
  stderr?: (line: string) => void;
  /** The supervisor's pipe (see `SUPERVISED_ENV`); default `process.stdin`. */
  supervisorPipe?: NodeJS.ReadableStream;
}

/**
 * Set by a supervisor (`npm start`'s launcher) that gives the service a pipe on stdin and keeps the other end
 * for as long as it runs. The pipe ending means the supervisor is gone, even by SIGKILL or a crash, which no
 * signal reports to its children (they run in their own process groups): the service then shuts down as on
 * SIGTERM, so that no orphan keeps the stack's ports and a new `npm start` can take them.
 */
export const SUPERVISED_ENV = 'BROADCAST_OPS_SUPERVISED';

/**
 * Emitted on `process` once a service has started (V8's defaults back, its start's code compiled): the
 * start file (scripts/start-launcher.cjs) writes its code cache then.
 */
export const STARTED_EVENT = 'broadcast-ops:started';

/** What a run left behind: the started service and its shutdown, or neither when it did not start. */
export interface RunningService {
  service: Service;
  shutdown: Shutdown;
  logger: Logger;
}

/**
 * One `main.ts` for every service: the sub-command CLI, the config file from `--config` or the environment,
 * the logger, SIGINT/SIGTERM through `Shutdown`, the wall clock, then `create` and `start`. A configuration
 * error (a `ConfigError`, from loading, building or starting) prints one line and exits 2; a service that
 * cannot start for another reason logs why, closes what it opened and exits 1.
 */
export async function runService<C>(
  def: ServiceDefinition<C>,
  options: RunServiceOptions = {},
): Promise<RunningService | undefined> {
  const env = options.env ?? process.env;
  const stderr = options.stderr ?? ((line: string) => process.stderr.write(line));
  const runName = def.runCommand ?? 'run';
  let running: RunningService | undefined;
  const runCommand: CliCommand = {
    summary: def.runSummary ?? `run the service (default command)`,
    options: {
      config: {
        type: 'string',
        short: 'c',
        description:
          def.configDescription ??
          `JSON or YAML config file${def.configEnv ? ` (or $${def.configEnv})` : ''} (default: embedded defaults)`,
      },
      ...def.runOptions,
    },
    run: async ({ values }) => {
      running = await startService(def, values, env, stderr, options);
    },
  };
  await runCli(
    def.bin,
    def.description,
    { [runName]: runCommand, ...otherCommands(def.commands) },
    options.argv ?? process.argv.slice(2),
    runName,
  );
  return running;
}

/**
 * The service's other sub-commands (an agent, a relay, a query), each run with V8's defaults (start-v8.ts):
 * only the service's own start is held.
 */
function otherCommands(commands: Record<string, CliCommand> | undefined): Record<string, CliCommand> {
  const out: Record<string, CliCommand> = {};
  for (const [name, command] of Object.entries(commands ?? {}))
    out[name] = {
      ...command,
      run: (args) => {
        releaseStartSettings();
        return command.run(args);
      },
    };
  return out;
}

/** The config file named by `--config`, else by the definition's environment variable (empty means none). */
export function configFileOf(
  values: Record<string, unknown>,
  env: NodeJS.ProcessEnv,
  configEnv: string | undefined,
): string | undefined {
  const flag = values['config'];
  if (typeof flag === 'string') return flag;
  const fromEnv = configEnv === undefined ? undefined : env[configEnv];
  return fromEnv === undefined || fromEnv === '' ? undefined : fromEnv;
}

async function startService<C>(
  def: ServiceDefinition<C>,
  values: ServiceContext<C>['values'],
  env: NodeJS.ProcessEnv,
  stderr: (line: string) => void,
  options: RunServiceOptions,
): Promise<RunningService | undefined> {
  const configFile = configFileOf(values, env, def.configEnv);
  let config: C;
  try {
    config = def.loadConfig(configFile, env);
  } catch (err) {
    stderr(`${def.bin}: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = err instanceof ConfigError ? 2 : 1;
    return undefined;
  }
  const logger = createLogger(def.logger(config, env));
  const shutdown = new Shutdown({
    logger,
    ...(options.exit ? { exit: options.exit } : {}),
    ...(options.signals ? { signals: options.signals } : {}),
  }).install();
  if (env[SUPERVISED_ENV] === 'stdin')
    watchSupervisor(options.supervisorPipe ?? process.stdin, logger, shutdown);
  let service: Service | undefined;
  try {
    service = await def.create({
      config,
      configFile,
      logger,
      clock: options.clock ?? systemClock,
      env,
      values,
      shutdown,
    });
    const built = service;
    if (built.reload) onHangup(built, logger, shutdown);
    shutdown.add(def.bin, () => built.close());
    await service.start();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    logger.error({ err: message }, 'start-up failed');
    // A `ConfigError` found while building or starting (a secret missing, a file named by the configuration
    // that cannot be read) is the operator's to fix like one found loading: the same one line, exit 2.
    if (err instanceof ConfigError) stderr(`${def.bin}: ${message}\n`);
    // Everything opened so far closes (the service and what `create` registered), and the exit code says so.
    await shutdown.abort('start-up failed');
    process.exitCode = err instanceof ConfigError ? 2 : 1;
    return undefined;
  }
  // Started: V8's defaults again (start-v8.ts), so a service under load grows its young generation and
  // optimises its hot code as before.
  releaseStartSettings();
  logger.info(service.describe(), def.startedMessage);
  // For the start file (dist/start.cjs, docs/at-rest.md "One start file"): the code of a whole start is
  // compiled now, with V8's defaults back, so its code cache can be written. No listener, no effect.
  (process as NodeJS.EventEmitter).emit(STARTED_EVENT);
  return { service, shutdown, logger };
}

/** The supervisor's pipe ends (EOF or error): shut down as on SIGTERM. Its data, if any, is read and dropped. */
function watchSupervisor(pipe: NodeJS.ReadableStream, logger: Logger, shutdown: Shutdown): void {
  const gone = (): void => {
    logger.warn('the supervisor is gone (its pipe closed): shutting down');
    void shutdown.run('supervisor gone');
  };
  pipe.on('data', () => undefined);
  pipe.once('end', gone);
  pipe.once('error', gone);
  shutdown.add('supervisor pipe', () => {
    pipe.off('end', gone);
    pipe.off('error', gone);
    // process.stdin as a pipe keeps the event loop alive; let it go once the service is closing.
    if ('destroy' in pipe && typeof pipe.destroy === 'function') (pipe.destroy as () => void)();
  });
}

/** SIGHUP calls the service's `reload` (an error in it is logged, the service keeps running). */
function onHangup(service: Service, logger: Logger, shutdown: Shutdown): void {
  const handler = (): void => {
    try {
      service.reload?.('SIGHUP');
    } catch (err) {
      logger.error({ err: err instanceof Error ? err.message : String(err) }, 'reload failed');
    }
  };
  process.on('SIGHUP', handler);
  shutdown.add('SIGHUP', () => {
    process.off('SIGHUP', handler);
  });
}
