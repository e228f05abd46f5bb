/**
 * The one Host guard of every HTTP surface (the repository's docs/ARCHITECTURE.md "The HTTP edge"), against DNS rebinding:
 * a foreign page that points its own name at this address makes the browser send that name in `Host`.
 * A request is answered only when its Host header (RFC 9110 §7.2) names
 * - an IP literal (a rebinding attack needs a DNS name; a literal is what the operator typed),
 * - `localhost`,
 * - this machine's host name (in full or its first label), or
 * - one of the names the service is configured with.
 * Anything else, a missing Host included, gets 421 Misdirected Request (RFC 9110 §15.5.20: the request was
 * directed at a server that does not answer for that name) with code HOST_NOT_ALLOWED, before any route,
 * rate limit or credential check runs. 421 rather than 403: the request is refused for where it was sent,
 * not for who sent it, and 403 stays the answer to a credential that does not allow the request.
 */
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import type { FastifyInstance } from 'fastify';
import { genericError } from './errors.ts';

/** The name part of a Host header value (`name[:port]` or `[v6][:port]`), lower case, no trailing dot. */
export function hostNameOf(header: string | undefined): string | undefined {
  if (header === undefined || header.length === 0 || header.length > 300) return undefined;
  const h = header.trim().toLowerCase();
  const m = /^(\[[0-9a-f:.]+\]|[^\s:/[\]@]+)(?::\d{1,5})?$/.exec(h);
  if (m) {
    const name = (m[1] ?? '').replace(/^\[|\]$/g, '');
    return name.endsWith('.') ? name.slice(0, -1) : name;
  }
  // A bare IPv6 literal without brackets (not valid in Host, but sent by some tools).
  return isIP(h) === 6 ? h : undefined;
}

/** Whether a Host header names this server under the rule above; `configured`: the service's extra names. */
export function hostAllowed(header: string | undefined, configured: readonly string[]): boolean {
  const name = hostNameOf(header);
  if (name === undefined || name === '') return false;
  if (isIP(name) !== 0 || name === 'localhost') return true;
  const me = hostname().toLowerCase();
  if (name === me || name === me.split('.')[0]) return true;
  return configured.some((c) => hostNameOf(c) === name);
}

/**
 * Install the guard on an app (an `onRequest` hook on the root, so it runs before every route's own hooks,
 * 404s included). `configured` is read per request, so a configuration reload takes effect at once.
 */
export function installHostGuard(app: FastifyInstance, configured: () => readonly string[]): void {
  app.addHook('onRequest', (request, _reply, done) => {
    const host = request.headers.host;
    if (hostAllowed(host, configured())) {
      done();
      return;
    }
    done(
      genericError(
        'HOST_NOT_ALLOWED',
        `Host ${JSON.stringify((host ?? '').slice(0, 100))} is not a name this server answers to`,
      ),
    );
  });
}
