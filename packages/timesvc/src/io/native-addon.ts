import { createRequire } from 'node:module';

/**
 * One of timesvc's optional native addons (`build/Release/<name>.node`, built by node-gyp at `npm ci`):
 * a function that loads it on first call and returns it, or undefined where it is not built (not Linux, no
 * compiler at install) or `usable` rejects it; each caller falls back to its JavaScript path then. Loaded
 * once: later calls return the same answer.
 */
export function optionalAddon<T>(name: string, usable: (a: T) => boolean = () => true): () => T | undefined {
  let cached: T | null | undefined;
  return () => {
    if (cached === undefined) {
      try {
        const a = createRequire(import.meta.url)(`../../build/Release/${name}.node`) as T;
        cached = usable(a) ? a : null;
      } catch {
        cached = null;
      }
    }
    return cached ?? undefined;
  };
}
