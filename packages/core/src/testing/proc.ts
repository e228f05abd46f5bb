/**
 * Readers of a process's accounting in proc(5), for the benches that measure a server from outside: one
 * parse of each file, so every bench reads the same fields the same way.
 */
import { readFileSync, readdirSync } from 'node:fs';

/** Clock ticks per second of utime and stime (Linux USER_HZ, sysconf(_SC_CLK_TCK)). */
export const CLK_TCK = 100;

/**
 * The command name and the CPU time in clock ticks of a process (`/proc/<pid>`) or one of its threads
 * (`/proc/<pid>/task/<tid>`), from its `stat`: user (field 14, utime) and kernel (field 15, stime); and its
 * start, in clock ticks after boot (field 22, starttime).
 */
export function procStat(dir: string): { name: string; user: number; sys: number; start: number } {
  const stat = readFileSync(`${dir}/stat`, 'utf8');
  // The name (field 2) is in parentheses and may hold spaces or parentheses: the fields after it start at ") ".
  const close = stat.lastIndexOf(')');
  const rest = stat.slice(close + 2).split(' '); // rest[0] is field 3 (state)
  return {
    name: stat.slice(stat.indexOf('(') + 1, close),
    user: Number(rest[11]),
    sys: Number(rest[12]),
    start: Number(rest[19]),
  };
}

/**
 * CPU time of all of process `pid`'s threads in nanoseconds: the first field of each thread's schedstat
 * (time on a CPU, which the scheduler accounts in nanoseconds: the kernel's
 * Documentation/scheduler/sched-stats.rst), summed. `stat` counts whole 10 ms ticks, too coarse for a short
 * window. A thread that ended meanwhile drops out of the sum; 0 without schedstat (a kernel without
 * CONFIG_SCHED_INFO).
 */
export function procCpuNs(pid: number): number {
  let ns = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended between the listing and the read, or there is no schedstat
    }
  }
  return ns;
}

/** Resident set size of process `pid` in KiB (VmRSS of `/proc/<pid>/status`). */
export function procRssKiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? NaN);
}
