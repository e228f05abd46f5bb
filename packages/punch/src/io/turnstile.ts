/**
 * Cloudflare Turnstile check for `POST /api/session` (optional: on only when a secret is configured).
 * Injectable so tests pass a strict fake instead of calling Cloudflare.
 */
export type TurnstileVerifier = (token: string, remoteIp: string) => Promise<boolean>;

/** siteverify: https://developers.cloudflare.com/turnstile/get-started/server-side-validation/ */
export function cloudflareTurnstile(secret: string, verifyUrl: string, timeoutMs = 5000): TurnstileVerifier {
  return async (token, remoteIp) => {
    const body = new URLSearchParams({ secret, response: token, remoteip: remoteIp });
    try {
      const res = await fetch(verifyUrl, { method: 'POST', body, signal: AbortSignal.timeout(timeoutMs) });
      if (!res.ok) return false;
      const text = await res.text();
      if (text.length > 65_536) return false;
      const data = JSON.parse(text) as { success?: unknown };
      return data.success === true;
    } catch {
      // Unreachable or malformed answer: fail closed, the client sees TURNSTILE_FAILED and can retry.
      return false;
    }
  };
}
