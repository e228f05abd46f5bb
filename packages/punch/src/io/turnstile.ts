/**
 * Cloudflare Turnstile check for `POST /api/session` (optional: on only when a secret is configured).
 * Injectable so tests pass a strict fake instead of calling Cloudflare.
 */
export type TurnstileVerifier = (token: string, remoteIp: string) => Promise<boolean>;

/** siteverify answers are a few hundred bytes; anything larger is not one. */
const MAX_ANSWER_BYTES = 65_536;

/** The body as text, or undefined once it exceeds `max` bytes (reading stops there: a bounded buffer). */
async function readBounded(body: AsyncIterable<Uint8Array>, max: number): Promise<string | undefined> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  // Leaving the loop early cancels the stream, which closes the connection.
  for await (const chunk of body) {
    size += chunk.byteLength;
    if (size > max) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** siteverify: https://developers.cloudflare.com/turnstile/get-started/server-side-validation/ */
export function cloudflareTurnstile(secret: string, verifyUrl: string, timeoutMs = 5000): TurnstileVerifier {
  return async (token, remoteIp) => {
    const body = new URLSearchParams({ secret, response: token, remoteip: remoteIp });
    try {
      const res = await fetch(verifyUrl, { method: 'POST', body, signal: AbortSignal.timeout(timeoutMs) });
      if (!res.ok || !res.body) {
        await res.body?.cancel();
        return false;
      }
      const text = await readBounded(res.body, MAX_ANSWER_BYTES);
      if (text === undefined) return false;
      const data = JSON.parse(text) as { success?: unknown };
      return data.success === true;
    } catch {
      // Unreachable or malformed answer: fail closed, the client sees TURNSTILE_FAILED and can retry.
      return false;
    }
  };
}
