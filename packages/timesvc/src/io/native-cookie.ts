import type { CookieAead } from '../domain/nts-cookies.ts';
import type { NtsSiv } from '../domain/nts-responder.ts';
import { optionalAddon } from './native-addon.ts';

/**
 * Kept-key AES-256-GCM for NTS cookies (native/nts-cookie.c; docs/performance.md "NTS request"): the
 * OpenSSL of the running Node, one context per master key, re-initialised with each cookie's nonce. Where
 * the addon is not built this returns undefined and the cookie jar uses node:crypto (a cipher object per
 * cookie); both produce and accept the same cookies.
 */
interface Addon {
  key(key: Uint8Array): object;
  seal(h: object, out: Uint8Array, offset: number, plain: Uint8Array): boolean;
  open(h: object, cookie: Uint8Array, plain: Uint8Array): boolean;
  sivKey(key: Uint8Array): object | undefined;
  sivSeal(h: object, ad: Uint8Array, nonce: Uint8Array, plain: Uint8Array, out: Uint8Array): number;
  sivOpen(h: object, ad: Uint8Array, nonce: Uint8Array, sealed: Uint8Array, plain: Uint8Array): boolean;
}

const EMPTY = new Uint8Array(0);
const load = optionalAddon<Addon>('nts_cookie');

let cached: CookieAead | null | undefined;

export function nativeCookieAead(): CookieAead | undefined {
  if (cached === undefined) {
    const a = load();
    if (!a) cached = null;
    else {
      cached = {
        key: (key) => a.key(key),
        seal: (h, out, offset, plain) => {
          a.seal(h, out, offset, plain);
        },
        open: (h, cookie, plain) => a.open(h, cookie, plain),
      };
    }
  }
  return cached ?? undefined;
}

/**
 * AEAD_AES_SIV_CMAC_256 from the OpenSSL of the running Node ("AES-128-SIV"; S2V by hand with its CMAC for
 * an empty plaintext, which the EVP layer does not pass on), per client key, for the NTS authenticators:
 * the same bytes as protocol/aes-siv.ts (test/app/nts-fast-path.test.ts). Undefined where the addon is not
 * built or this OpenSSL has no SIV; the responder then uses the hand-written AES-SIV.
 */
export function nativeNtsSiv(): ((key: Uint8Array) => NtsSiv) | undefined {
  const a = load();
  if (!a || a.sivKey(new Uint8Array(32)) === undefined) return undefined;
  return (key) => {
    const h = a.sivKey(key);
    if (h === undefined) throw new Error('AES-SIV key');
    return {
      seal: (ad, nonce, plaintext) => {
        const out = Buffer.allocUnsafe(16 + plaintext.length);
        a.sivSeal(h, ad, nonce, plaintext, out);
        return out;
      },
      sealInto: (ad, nonce, plaintext, out, at) =>
        a.sivSeal(h, ad, nonce, plaintext, out.subarray(at, at + 16 + plaintext.length)),
      open: (ad, nonce, sealed) => {
        if (sealed.length < 16) return undefined;
        // A request authenticator has no plaintext: nothing to allocate for it.
        const plain = sealed.length === 16 ? EMPTY : Buffer.allocUnsafe(sealed.length - 16);
        return a.sivOpen(h, ad, nonce, sealed, plain) ? plain : undefined;
      },
    };
  };
}
