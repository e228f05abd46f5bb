import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot, startProcess, type RunningProcess } from '@broadcast-ops/core/testing';

export { peerRow } from './peer-row.ts';

/** The timesvc command as installed (bin/timesvc.mjs), run with the current Node. */
export const timesvcBin = join(repoRoot, 'packages/timesvc/bin/timesvc.mjs');

/** `timesvc --config <cfg>` as a child process; `env` is added to this process's environment. */
export function startTimesvcCli(cfg: string, env?: NodeJS.ProcessEnv): RunningProcess {
  return startProcess(process.execPath, [timesvcBin, '--config', cfg], env ? { env } : undefined);
}

/** One `timesvc <args>` run to its end: exit code and output (`stdin` written then closed). */
export function run(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  stdin?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [timesvcBin, ...args],
      { cwd: repoRoot, env: { ...process.env, ...env }, timeout: 120_000, maxBuffer: 1 << 20 },
      (err, stdout, stderr) => {
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
    if (stdin !== undefined) child.stdin?.end(stdin);
    else child.stdin?.end();
  });
}
