/**
 * The young generation held at its first size while a service starts (`holdYoungGeneration`, called by
 * start-heap.ts, which a service's main.ts imports first) and let grow again once it has started
 * (`restoreYoungGeneration`, called by runService). docs/at-rest.md "Young generation".
 *
 * Start-up allocates much that survives (every module's functions, schemas, the routes), and V8 doubles the
 * young generation (`--semi-space-growth-factor`, 2) each time enough of it survives scavenges, so a service
 * ended its start with a 16 MB young generation (32 MB on Node 24) holding 2-4 MB, resident while it
 * idled. With the factor at 1 it stays at its first size, 1 MB a semi-space. V8 reads the factor at each
 * scavenge, so setting it at run time works (Node 20, 22 and 24). An operator's own
 * `--semi-space-growth-factor`, `--min-semi-space-size` or `--max-semi-space-size` (command line or
 * NODE_OPTIONS) is left alone.
 *
 * Nothing here runs on import: a test or a bench that imports core keeps V8's default throughout.
 */
import { setFlagsFromString } from 'node:v8';

/** V8's default on Node 20, 22 and 24 (`node --v8-options`). */
const DEFAULT_GROWTH_FACTOR = 2;
const OPERATOR_FLAG =
  /--(semi[-_]space[-_]growth[-_]factor|min[-_]semi[-_]space[-_]size|max[-_]semi[-_]space[-_]size)\b/;

let held = false;

/** Keep the young generation at its size now (unless the operator sized it). */
export function holdYoungGeneration(): void {
  if (held || OPERATOR_FLAG.test([...process.execArgv, process.env['NODE_OPTIONS'] ?? ''].join(' '))) return;
  setFlagsFromString('--semi-space-growth-factor=1');
  held = true;
}

/** Let the young generation grow again (V8's default factor); a no-op unless it was held. */
export function restoreYoungGeneration(): void {
  if (!held) return;
  held = false;
  setFlagsFromString(`--semi-space-growth-factor=${DEFAULT_GROWTH_FACTOR}`);
}
