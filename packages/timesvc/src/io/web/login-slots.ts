import { createHash } from 'node:crypto';
import { expandIpv6, unmapIpv4 } from '../../domain/ip-address.ts';

/** The client a slot is counted for: an IPv4 address, or an IPv6 /64 (one host's usual allocation). */
export function loginClient(ip: string): string {
  const v4 = unmapIpv4(ip);
  if (!v4.includes(':')) return v4;
  const groups = expandIpv6(v4);
  return groups
    ? `${groups
        .slice(0, 4)
        .map((g) => g.toString(16))
        .join(':')}::/64`
    : v4;
}

/**
 * Who may run a password verification now (README "Web API: logins"). scrypt at the OWASP parameters
 * takes 128 MiB and tens to hundreds of milliseconds, so verifications are bounded: `total` at once, and at
 * most `perAddress` of them for one client address, so that one address (or a few) flooding the login
 * cannot keep operators at other addresses out. Identical requests in flight (the same username and
 * password) share one verification, from whatever address: a replayed or retried login costs nothing more.
 */
export class LoginSlots<T> {
  readonly #total: number;
  readonly #perAddress: number;
  #running = 0;
  readonly #byAddress = new Map<string, number>();
  readonly #inFlight = new Map<string, Promise<T>>();

  constructor(options: { total: number; perAddress: number }) {
    this.#total = options.total;
    this.#perAddress = options.perAddress;
  }

  /** Verifications running now (for tests and status). */
  get running(): number {
    return this.#running;
  }

  /**
   * Run `verify` for (username, password) from `address`, or join the identical verification in flight.
   * Undefined when no slot is free for this address (the caller answers 429 "login busy").
   */
  run(address: string, username: string, password: string, verify: () => Promise<T>): Promise<T> | undefined {
    // The key is a digest: the map never holds a password.
    const key = createHash('sha256').update(username).update('\0').update(password).digest('base64');
    const shared = this.#inFlight.get(key);
    if (shared !== undefined) return shared;
    address = loginClient(address);
    const mine = this.#byAddress.get(address) ?? 0;
    if (this.#running >= this.#total || mine >= this.#perAddress) return undefined;
    this.#running++;
    this.#byAddress.set(address, mine + 1);
    const done = (): void => {
      this.#running--;
      const left = (this.#byAddress.get(address) ?? 1) - 1;
      if (left <= 0) this.#byAddress.delete(address);
      else this.#byAddress.set(address, left);
      this.#inFlight.delete(key);
    };
    const p = verify().finally(done);
    this.#inFlight.set(key, p);
    return p;
  }
}
