import { join } from 'node:path';
import { repoRoot, startProcess, type RunningProcess } from '@broadcast-ops/core/testing';

/** The timesvc command as installed (bin/timesvc.mjs), run with the current Node. */
export const timesvcBin = join(repoRoot, 'packages/timesvc/bin/timesvc.mjs');

/** `timesvc --config <cfg>` as a child process; `env` is added to this process's environment. */
export function startTimesvcCli(cfg: string, env?: NodeJS.ProcessEnv): RunningProcess {
  return startProcess(process.execPath, [timesvcBin, '--config', cfg], env ? { env } : undefined);
}
