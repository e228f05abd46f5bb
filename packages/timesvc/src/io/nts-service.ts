import { isIP } from 'node:net';
import type { Clock, Logger } from '@broadcast-ops/core';
import { NtsCookieJar, cookieSecretFromHex } from '../domain/nts-cookies.ts';
import { NtsResponder } from '../domain/nts-responder.ts';
import type { TimesvcConfig } from '../config.ts';
import { NtsKeServer } from './nts-ke-server.ts';
import { hiresClock } from './served-clock.ts';
import { nativeCookieAead, nativeNtsSiv } from './native-cookie.ts';

/**
 * The NTS server side as one unit for the service: the cookie jar (secret from TIMESVC_NTS_COOKIE_KEY or
 * nts.cookie_key), the NTP-packet responder the NTP server consults, the NTS-KE server and their metrics.
 */
export interface NtsServerSide {
  readonly cookies: NtsCookieJar;
  readonly responder: NtsResponder;
  readonly ke: NtsKeServer;
  start(): Promise<void>;
  close(): Promise<void>;
}

export function createNtsServerSide(
  config: TimesvcConfig,
  logger: Logger,
  ntpPort: () => number,
  /** Cookie times on its wall clock, the responder's on its monotonic one (default hiresClock). */
  clock: Clock = hiresClock,
): NtsServerSide | undefined {
  const nts = config.nts;
  if (!nts.enabled) return undefined;
  const log = logger.child({ component: 'nts' });
  const cookies = new NtsCookieJar({
    secret: cookieSecretFromHex(nts.cookie_key),
    now: () => clock.now(),
    // Kept-key AES-GCM where the addon is built (docs/performance.md "NTS request"); node:crypto otherwise.
    aead: nativeCookieAead(),
  });
  if (!cookies.persistent) {
    log.warn('no NTS cookie key configured: cookies are invalid after a restart (clients re-run NTS-KE)');
  }
  // OpenSSL's AES-SIV where the addon is built (docs/performance.md "NTS request"); hand-written otherwise.
  const responder = new NtsResponder({ cookies, now: () => clock.monotonicMs(), siv: nativeNtsSiv() });
  const iface = config.ntp.interface;
  const bound = isIP(iface) && iface !== '0.0.0.0' && iface !== '::' ? iface : undefined;
  const ke = new NtsKeServer({
    port: nts.ke_port,
    // NTS-KE binds where NTP does when ntp.interface is an address; otherwise on every address.
    host: bound,
    // NTP bound to one address: say so in a Server record (RFC 8915 §4.1.7); otherwise clients use the
    // NTS-KE host, which then serves NTP too.
    ntpServer: bound,
    certPath: nts.cert_path,
    keyPath: nts.key_path,
    cookies,
    ntpPort,
    logger: log,
    maxConnections: nts.ke_max_connections,
    maxPerAddress: nts.ke_max_connections_per_address,
    handshakeTimeoutMs: nts.ke_handshake_timeout * 1000,
  });
  return {
    cookies,
    responder,
    ke,
    start: () => ke.start(),
    close: () => ke.close(),
  };
}
