import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { CLK_TCK, procCpuNs, procRssKiB, procStat, startProcess, waitFor } from '../../src/testing/index.ts';

test('procStat reads a process whose name holds ") (" and spaces: name, CPU ticks and start', async () => {
  // The kernel keeps 15 bytes of a name (comm); this one fits, with the parentheses and spaces that make stat's
  // second field hard to split.
  const child = startProcess(process.execPath, [
    '-e',
    "process.title = 'x) (y z) 1 2 3'; const t = Date.now(); while (Date.now() - t < 300); setInterval(() => {}, 1000)",
  ]);
  try {
    const dir = `/proc/${child.child.pid}`;
    const st = await waitFor(
      () => {
        const s = procStat(dir);
        return s.name === 'x) (y z) 1 2 3' && s.user + s.sys >= 10 ? s : undefined;
      },
      { timeoutMs: 20_000, what: "the child's title and 100 ms of its busy loop in its stat" },
    );
    // The same fields as /proc/<pid>/status gives by name, and the start before now.
    const status = readFileSync(`${dir}/status`, 'utf8');
    assert.match(status, /^Name:\s+x\) \(y z\) 1 2 3$/m);
    const uptimeTicks = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * CLK_TCK;
    assert.ok(st.start > 0 && st.start <= uptimeTicks, `start ${st.start} ticks, uptime ${uptimeTicks}`);
    // The busy loop's first 100 ms are counted by both clocks: ticks (above) and schedstat's nanoseconds.
    const ns = procCpuNs(child.child.pid!);
    assert.ok(ns >= 100e6, `${ns} ns on a CPU`);
    assert.ok(procRssKiB(child.child.pid!) > 1024);
  } finally {
    await child.stop('SIGTERM');
  }
});
