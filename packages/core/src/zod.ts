/**
 * zod for every schema of the repository: its mini API (`z.optional(s)`, `s.check(z.minLength(1))`:
 * functions instead of methods), with zod's English messages. docs/ARCHITECTURE.md "Rules the build
 * enforces" (rule 5) says why one API and why this one: a schema of zod's classic API installs each of its
 * types' members the first time one is built, 7-14 ms of every service's start
 * (docs/at-rest.md "zod's mini API").
 */
import { config, int, maxLength, maximum, minLength, minimum, string } from 'zod/mini';
import en from 'zod/v4/locales/en.js';

// zod/mini registers no locale (the classic API registers English on its first schema): without it every
// message would read "Invalid input".
config(en());

export * from 'zod/mini';

// The repository's two shorthands beside zod's own names, for the bounds nearly every schema states.

/** An integer from `min` to `max`, inclusive; without `max`, unbounded above. */
export const intRange = (min: number, max?: number) =>
  max === undefined ? int().check(minimum(min)) : int().check(minimum(min), maximum(max));

/** A string of `min` to `max` characters; without `max`, of at least `min`. */
export const textRange = (min: number, max?: number) =>
  max === undefined ? string().check(minLength(min)) : string().check(minLength(min), maxLength(max));
// The error a failed `parse` throws, for `instanceof`: read through `z.core`, the whole of zod's core would be
// kept in every start file (esbuild keeps a namespace whole once it is used as a value).
export { $ZodError } from 'zod/v4/core';
