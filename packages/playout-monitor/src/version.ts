import { readFileSync } from 'node:fs';

/** The package version, reported in /health (and later in Ember+ `Info/Version`). */
export const VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
