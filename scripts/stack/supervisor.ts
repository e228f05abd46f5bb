/**
 * The launcher's supervisor: starts each service as a child in its own process group with its log in
 * data/logs/<service>.log, asks each for its health URL, reports a service that exits unexpectedly (with the
 * busy port its log names) and stops them all, last started first in parallel, SIGKILL after 15 s. It never
 * exits the process itself: `onStopped(code)` (the launcher's `process.exit`) is called once all are down.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, createWriteStream, openSync, readFileSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { SUPERVISED_ENV } from '@broadcast-ops/core';
import { probe } from './http-probe.ts';
import { serviceEnv, type StackService } from './services.ts';

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Running {
  service: StackService;
  child: ChildProcess;
  /** With --verbose only: the log file the launcher copies the service's output to. */
  log: WriteStream | null;
  exited: Promise<Exit>;
  /** Resolves once an unexpected exit has been reported (reason and log; at once when stopping). */
  reported: Promise<void>;
}

export interface SupervisorOptions {
  /** The repository: the services' working directory. */
  root: string;
  logDir: string;
  /** Echo the services' output on the console too. */
  verbose: boolean;
  /** The way to move every port, printed when a service could not listen. */
  moveHint: () => string;
  /** Called once every service has stopped, with the launcher's exit code. */
  onStopped: (code: number) => void;
}

/** How long stopped services get between SIGTERM and SIGKILL. */
const KILL_AFTER_MS = 15_000;
/** How often a health URL is asked while waiting for a service. */
const READY_POLL_MS = 200;

export function describeExit(e: Exit): string {
  return e.signal ? `signal ${e.signal}` : String(e.code);
}

/** The port named in an EADDRINUSE line of a service's log, if any. */
export function busyPortInLog(text: string): string | undefined {
  const m = /EADDRINUSE[^\n]*?(?:address already in use\s*)?([\d.:[\]a-f]*:(\d+))/i.exec(text);
  return m ? (m[2] ?? m[1]) : undefined;
}

function tailOf(file: string): string {
  try {
    return readFileSync(file, 'utf8').slice(-20_000);
  } catch {
    return '';
  }
}

export class Supervisor {
  readonly running: Running[] = [];
  #stopping = false;
  readonly #options: SupervisorOptions;

  constructor(options: SupervisorOptions) {
    this.#options = options;
  }

  get stopping(): boolean {
    return this.#stopping;
  }

  start(service: StackService): Running {
    const { root, logDir, verbose } = this.#options;
    const logFile = join(logDir, `${service.name}.log`);
    // The service writes its log file itself (stdout and stderr are the file), so that its logging never
    // depends on this process: a service whose stdout is a pipe to a launcher that died blocks or fails on
    // its next log line. Only --verbose, which also shows the output here, goes through pipes.
    const fd = verbose ? null : openSync(logFile, 'a');
    const log = verbose ? createWriteStream(logFile, { flags: 'a' }) : null;
    const child = spawn(process.execPath, [service.bin, ...(service.start.args ?? [])], {
      cwd: root,
      // stdin is a pipe this process holds until it ends: a service on core's runService shuts down when it
      // closes (SUPERVISED_ENV), so a launcher killed by SIGKILL or a crash leaves no service behind.
      env: { ...serviceEnv(service.start.env ?? {}, process.env), [SUPERVISED_ENV]: 'stdin' },
      stdio: fd === null ? ['pipe', 'pipe', 'pipe'] : ['pipe', fd, fd],
      // Own process group: a terminal Ctrl-C reaches the launcher, which stops the services in order.
      detached: true,
    });
    if (fd !== null) closeSync(fd);
    for (const stream of [child.stdout, child.stderr]) {
      stream?.on('data', (d: Buffer) => {
        log?.write(d);
        process.stdout.write(`[${service.name}] ${d.toString()}`);
      });
    }
    const exited = new Promise<Exit>((res) => child.once('exit', (code, signal) => res({ code, signal })));
    const reported = exited.then(async (e) => {
      if (this.#stopping) return;
      // The log stream (--verbose) flushes on end; read it afterwards for the reason.
      if (log) await new Promise<void>((done) => log.end(done));
      if (this.#stopping) return;
      console.error(
        `start-stack: ${service.name} exited unexpectedly with ${describeExit(e)}; see data/logs/${service.name}.log`,
      );
      const port = busyPortInLog(tailOf(logFile));
      if (port) {
        console.error(
          `start-stack: ${service.name} could not listen: port ${port} is in use by another program.`,
        );
        console.error(this.#options.moveHint());
      }
      void this.stopAll(`${service.name} failed`, 1);
    });
    const running: Running = { service, child, log, exited, reported };
    this.running.push(running);
    return running;
  }

  /** Whether the service answers its health URL (any status below 500) before `deadline` or its exit. */
  async ready(r: Running, deadline: number): Promise<boolean> {
    const url = r.service.start.ready;
    if (url === undefined) return false;
    while (Date.now() < deadline && r.child.exitCode === null && r.child.signalCode === null) {
      const answer = await probe(url, 1000);
      if (answer.ok && answer.status < 500) return true;
      await new Promise((res) => setTimeout(res, READY_POLL_MS));
    }
    return false;
  }

  /** Stop every service and report each exit; a second call while stopping does nothing. */
  async stopAll(reason: string, code: number): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    console.log(`\nstart-stack: ${reason}; stopping ${this.running.length} service(s)`);
    for (const r of this.running) if (r.child.exitCode === null) r.child.kill('SIGTERM');
    const killer = setTimeout(() => {
      for (const r of this.running) if (r.child.exitCode === null) r.child.kill('SIGKILL');
    }, KILL_AFTER_MS);
    const exits = await Promise.all(this.running.map((r) => r.exited));
    clearTimeout(killer);
    this.running.forEach((r, i) => {
      console.log(
        `start-stack: ${r.service.name} exited with ${describeExit(exits[i] ?? { code: null, signal: null })}`,
      );
      r.log?.end();
    });
    console.log(`start-stack: exit ${code}`);
    this.#options.onStopped(code);
  }
}
