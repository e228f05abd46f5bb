/**
 * A connect attempt's deadline, armed only if the attempt is still open after the current turn of the event
 * loop. A connection refused at once (a closed port on loopback, or an RST from the LAN within the turn)
 * then sets no timer at all. Why it matters at rest: the clock's timers are unref'd, and Node leaves the
 * list of a cancelled unref'd timer in its queue (lib/internal/timers.js `unenroll`: "we only delete refed
 * lists"), so each deadline armed and cancelled per attempt woke the process once more when it would have
 * fired (docs/performance.md "At rest"). The deadline counts from the end of that turn: a few hundred
 * microseconds later than from the call.
 */
import type { Clock, TimerHandle } from '@broadcast-ops/core';

export function deadlineUnlessSettled(
  clock: Clock,
  ms: number,
  settled: () => boolean,
  fn: () => void,
): TimerHandle {
  let timer: TimerHandle | undefined;
  let cancelled = false;
  const immediate = setImmediate(() => {
    if (!cancelled && !settled()) timer = clock.setTimer(ms, fn);
  });
  return {
    cancel: () => {
      cancelled = true;
      clearImmediate(immediate);
      timer?.cancel();
    },
  };
}
