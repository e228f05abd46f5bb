import { spawn } from 'node:child_process';
import type { Logger } from '@broadcast-ops/core';

/** What the agent knows of its stream's tally (docs/agent.md "Tally"). */
export type AgentTally = 'program' | 'preview' | 'off' | 'unknown';

export interface TallyHookOptions {
  /** Program and arguments, run without a shell (docs/agent.md "--on-tally"). */
  argv: readonly string[];
  /** A run still going after this long is killed (SIGTERM, then SIGKILL 1 s later). */
  timeoutMs: number;
  session: string;
  stream: string | undefined;
  logger: Logger;
}

/** Bytes of a command's stderr kept for the log line of a failed run. */
const STDERR_KEEP = 2048;

/**
 * `punch agent --on-tally`: runs a command on every tally change, the state in its environment. One run at
 * a time; changes during a run are coalesced into one more run with the latest state (a light wants the
 * newest colour, not every colour it missed), and none when that is the state it just ran with. A failing, missing or hung command is logged and never ends
 * the agent; the agent's signalling and SRT do not wait for it (the run is a child process).
 */
export class TallyHook {
  readonly #o: TallyHookOptions;
  #running = false;
  #pending: { state: AgentTally; reason: string } | null = null;
  #stopped = false;
  /** The state of the last run started: a coalesced change back to it needs no run. */
  #last: AgentTally | null = null;
  #idle: Array<() => void> = [];

  constructor(options: TallyHookOptions) {
    this.#o = options;
  }

  /** A tally change: run now, or once the current run ended (latest state wins). */
  change(state: AgentTally, reason: string): void {
    if (this.#stopped) return;
    this.#pending = { state, reason };
    if (!this.#running) this.#next();
  }

  stop(): void {
    this.#stopped = true;
    this.#pending = null;
  }

  /** Resolves once no run is going and none is pending (tests). */
  idle(): Promise<void> {
    if (!this.#running && this.#pending === null) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #next(): void {
    const job = this.#pending;
    this.#pending = null;
    if (job === null || this.#stopped || job.state === this.#last) {
      this.#running = false;
      for (const resolve of this.#idle.splice(0)) resolve();
      return;
    }
    this.#running = true;
    this.#last = job.state;
    this.#run(job.state, job.reason);
  }

  #run(state: AgentTally, reason: string): void {
    const [file, ...args] = this.#o.argv;
    const log = this.#o.logger;
    const started = Date.now();
    const env = {
      ...process.env,
      PUNCH_TALLY: state,
      PUNCH_TALLY_REASON: reason,
      PUNCH_SESSION: this.#o.session,
      PUNCH_STREAM: this.#o.stream ?? '',
    };
    let stderr = '';
    let timedOut = false;
    let finished = false;
    const child = spawn(file as string, args, { env, shell: false, stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString('utf8')).slice(-STDERR_KEEP);
    });
    let killer: NodeJS.Timeout | null = null;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM');
      killer = setTimeout(() => child.kill('SIGKILL'), 1000);
      killer.unref();
    }, this.#o.timeoutMs);
    const done = (fields: Record<string, unknown>, ok: boolean): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      if (killer) clearTimeout(killer);
      const base = { tally: state, ms: Date.now() - started, ...fields };
      if (ok) log.info(base, 'on-tally command done');
      else log.warn({ ...base, stderr: stderr.trim() || undefined }, 'on-tally command failed');
      this.#next();
    };
    child.on('error', (err) => done({ err: err.message }, false));
    child.on('close', (code, signal) => {
      if (timedOut) done({ timeoutMs: this.#o.timeoutMs, signal }, false);
      else done({ code, signal }, code === 0);
    });
  }
}

/**
 * The tally a `tally` message means for the agent: `unknown` when the broker flags it stale (README
 * "Tally"), else its state; null for a message that is not a usable tally.
 */
export function tallyOfMessage(m: Record<string, unknown>): AgentTally | null {
  if (m['stale'] === true) return 'unknown';
  const s = m['state'];
  return s === 'program' || s === 'preview' || s === 'off' ? s : null;
}
