import { createRequire } from 'node:module';
import type { CookieAead } from '../domain/nts-cookies.ts';

/**
 * Kept-key AES-256-GCM for NTS cookies (native/nts-cookie.c; docs/performance.md "NTS request"): the
 * OpenSSL of the running Node, one context per master key, re-initialised with each cookie's nonce. Where
 * the addon is not built this returns undefined and the cookie jar uses node:crypto (a cipher object per
 * cookie); both produce and accept the same cookies.
 */
let cached: CookieAead | null | undefined;

export function nativeCookieAead(): CookieAead | undefined {
  if (cached === undefined) {
    try {
      const require = createRequire(import.meta.url);
      const a = require('../../build/Release/nts_cookie.node') as {
        key(key: Uint8Array): object;
        seal(h: object, out: Uint8Array, offset: number, plain: Uint8Array): boolean;
        open(h: object, cookie: Uint8Array, plain: Uint8Array): boolean;
      };
      cached = {
        key: (key) => a.key(key),
        seal: (h, out, offset, plain) => {
          a.seal(h, out, offset, plain);
        },
        open: (h, cookie, plain) => a.open(h, cookie, plain),
      };
    } catch {
      cached = null;
    }
  }
  return cached ?? undefined;
}
