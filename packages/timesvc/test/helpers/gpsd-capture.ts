import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The recorded gpsd 3.22 ?WATCH session (fixtures/gpsd-3.22-watch.json names its provenance), one JSON line each. */
export const capture = JSON.parse(
  readFileSync(join(import.meta.dirname, '../fixtures/gpsd-3.22-watch.json'), 'utf8'),
) as {
  lines: string[];
};
