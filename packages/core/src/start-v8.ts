/**
 * Two V8 settings held while a service loads and starts (`holdStartSettings`, called by start-heap.ts, which a
 * service's main.ts imports first) and set back to V8's defaults once it has started (`releaseStartSettings`,
 * called by runService). docs/at-rest.md "Young generation" and "Optimising compiler".
 *
 * - The young generation keeps its first size (`--semi-space-growth-factor=1`). Start-up allocates much that
 *   survives (every module's functions, schemas, the routes), and V8 doubles the young generation (factor 2)
 *   each time enough survives, so a service ended its start with a 16 MB young generation (32 MB on Node 24)
 *   holding 2-4 MB, resident while it idled.
 * - TurboFan, the optimising compiler, is off (`--no-turbofan`). Start-up code runs once, but it runs hot
 *   enough for TurboFan to compile some of it (the module loader, zod's schema building): CPU on a
 *   background thread, compiler memory glibc keeps afterwards, and more of the node binary's pages touched.
 *   Without it punch and playout-monitor started with 160-230 ms less CPU and about 10 MB less RSS.
 *
 * V8 reads both flags when it decides (each scavenge; each tier-up), so setting them at run time works:
 * checked on Node 20, 22 and 24 (packages/core/test/io/start-v8.test.ts). Set back, the young generation
 * grows and hot functions are optimised as before, so a service under load is not changed by this. An
 * operator's own flags for either (command line or NODE_OPTIONS) are left alone. Nothing here runs on
 * import: a test or a bench that imports core keeps V8's defaults throughout.
 */
import { setFlagsFromString } from 'node:v8';

interface HeldFlag {
  /** An operator's flag that leaves this one alone. */
  operator: RegExp;
  hold: string;
  /** V8's default on Node 20, 22 and 24 (`node --v8-options`). */
  release: string;
}

const FLAGS: readonly HeldFlag[] = [
  {
    operator:
      /--(semi[-_]space[-_]growth[-_]factor|min[-_]semi[-_]space[-_]size|max[-_]semi[-_]space[-_]size)\b/,
    hold: '--semi-space-growth-factor=1',
    release: '--semi-space-growth-factor=2',
  },
  {
    operator: /--(no[-_])?(turbofan|opt|jitless|max[-_]opt)\b/,
    hold: '--no-turbofan',
    release: '--turbofan',
  },
];

let held: HeldFlag[] = [];

/** Hold both settings for the start (each unless the operator set it). */
export function holdStartSettings(): void {
  if (held.length > 0) return;
  const operatorFlags = [...process.execArgv, process.env['NODE_OPTIONS'] ?? ''].join(' ');
  held = FLAGS.filter((f) => !f.operator.test(operatorFlags));
  for (const f of held) setFlagsFromString(f.hold);
}

/** Set what was held back to V8's defaults; a no-op unless something was held. */
export function releaseStartSettings(): void {
  for (const f of held) setFlagsFromString(f.release);
  held = [];
}
