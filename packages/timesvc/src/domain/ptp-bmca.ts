import { clockIdentityText, type AnnounceBody, type PortIdentity } from '../protocol/ptp.ts';

/**
 * The best master clock algorithm for timesvc's single PTP port (IEEE 1588-2008 §9.3; docs/ptp.md "BMCA").
 * Pure: the caller passes every received Announce and the monotonic time; nothing here sends or waits.
 *
 * - Foreign master records (§9.3.2.4): one per sending port; an Announce is *qualified* (§9.3.2.5) once its
 *   port sent FOREIGN_MASTER_THRESHOLD Announces within FOREIGN_MASTER_TIME_WINDOW of its own announce
 *   intervals, with stepsRemoved below 255. Announces from our own clock never reach here.
 * - A record expires after `announceReceiptTimeout` announce intervals without an Announce (§9.2.6.11). The
 *   interval is the longer of ours and the one the foreign port advertises, so a master configured slower
 *   than us is not dropped between two of its own Announces.
 * - The dataset comparison is Figures 27 and 28 (§9.3.4): priority1, clockClass, clockAccuracy,
 *   offsetScaledLogVariance, priority2, identity, lower wins; for the same grandmaster, stepsRemoved and the
 *   sender's port identity decide.
 * - The state decision is Figure 26 (§9.3.3) for one port: LISTENING until `announceReceiptTimeout`
 *   intervals have passed since start (a newcomer listens before it speaks), then MASTER when our default
 *   dataset is better than the best qualified foreign master, else PASSIVE. The standard's SLAVE (our class
 *   128 or above) is also PASSIVE here: timesvc has no PTP servo, so it neither follows nor announces. A
 *   listener (`ptp.listen_only`) never leaves LISTENING and only reports the best master.
 */

export const FOREIGN_MASTER_THRESHOLD = 2;
export const FOREIGN_MASTER_TIME_WINDOW = 4;
/** §9.3.2.5 d: an Announce with stepsRemoved of 255 or more is not qualified. */
const MAX_STEPS_REMOVED = 255;
/** Foreign records kept at most (§9.3.2.4.6 asks for at least 5); the worst is dropped past this. */
export const MAX_FOREIGN_MASTERS = 16;

export type BmcaState = 'LISTENING' | 'MASTER' | 'PASSIVE';

/** The fields of a dataset the comparison reads (§9.3.4), ours or a foreign master's. */
export interface ComparableDataset {
  priority1: number;
  clockClass: number;
  clockAccuracy: number;
  offsetScaledLogVariance: number;
  priority2: number;
  grandmasterIdentity: string;
  stepsRemoved: number;
  /** The port that sent it (ours for D0). */
  sender: PortIdentity;
}

export interface ForeignMaster extends ComparableDataset {
  timeSource: number;
  currentUtcOffset: number;
  logAnnounceInterval: number;
  /** Monotonic ms of its Announces still inside the qualification window, oldest first. */
  arrivals: number[];
  lastMs: number;
}

export interface LocalDataset {
  identity: string;
  priority1: number;
  clockClass: number;
  clockAccuracy: number;
  offsetScaledLogVariance: number;
  priority2: number;
}

export interface BmcaDecision {
  state: BmcaState;
  /** The best qualified foreign master, if any (better or not than us). */
  best: ForeignMaster | undefined;
  /** Why the port is in this state, in words for the log and the status page. */
  reason: string;
  /** The state differs from the previous decision. */
  changed: boolean;
}

export interface BmcaOptions {
  announceReceiptTimeout: number;
  logAnnounceInterval: number;
  listenOnly: boolean;
  /** Monotonic ms at which the port started listening. */
  startMs: number;
}

const GM_FIELDS = [
  'priority1',
  'clockClass',
  'clockAccuracy',
  'offsetScaledLogVariance',
  'priority2',
] as const;

/** Which field decided a comparison of two different grandmasters (for the reason text). */
export function decidingField(
  a: ComparableDataset,
  b: ComparableDataset,
): (typeof GM_FIELDS)[number] | 'grandmasterIdentity' {
  for (const f of GM_FIELDS) if (a[f] !== b[f]) return f;
  return 'grandmasterIdentity';
}

function comparePort(a: PortIdentity, b: PortIdentity): number {
  if (a.clockIdentity !== b.clockIdentity) return a.clockIdentity < b.clockIdentity ? -1 : 1;
  return a.portNumber - b.portNumber;
}

/**
 * §9.3.4: negative when `a` is better than `b`, positive when worse, 0 when they cannot be told apart (the
 * same port announcing the same thing). Identities are 16 lower-case hex digits, so string order is numeric.
 */
export function compareDatasets(a: ComparableDataset, b: ComparableDataset): number {
  if (a.grandmasterIdentity !== b.grandmasterIdentity) {
    for (const f of GM_FIELDS) if (a[f] !== b[f]) return a[f] - b[f];
    return a.grandmasterIdentity < b.grandmasterIdentity ? -1 : 1;
  }
  // Figure 28: the same grandmaster seen through different paths; fewer steps wins, then the sender. With
  // one port (every foreign dataset has our port as receiver) this is what linuxptp's bmc.c dscmp2 decides:
  // its receiver-port tie-break and error-1 cases cannot arise here.
  if (a.stepsRemoved !== b.stepsRemoved) return a.stepsRemoved - b.stepsRemoved;
  return comparePort(a.sender, b.sender);
}

function intervalMs(log2: number): number {
  return 1000 * 2 ** log2;
}

export class Bmca {
  readonly #o: BmcaOptions;
  readonly #foreign = new Map<string, ForeignMaster>();
  #state: BmcaState = 'LISTENING';

  constructor(options: BmcaOptions) {
    this.#o = options;
  }

  get state(): BmcaState {
    return this.#state;
  }

  /** Qualified foreign masters now, best first. */
  qualified(nowMs: number): ForeignMaster[] {
    this.#expire(nowMs);
    return [...this.#foreign.values()]
      .filter((f) => this.#isQualified(f, nowMs))
      .sort((a, b) => compareDatasets(a, b));
  }

  /** Record a received Announce (already filtered to our domain and not from our own clock). */
  receive(sender: PortIdentity, logInterval: number, a: AnnounceBody, nowMs: number): void {
    // A nonsensical interval (0x7F, −128) must not make a record eternal or its window empty.
    const logAnnounceInterval = Math.min(7, Math.max(-7, logInterval));
    const key = `${sender.clockIdentity}-${sender.portNumber}`;
    const prev = this.#foreign.get(key);
    const windowMs = FOREIGN_MASTER_TIME_WINDOW * intervalMs(logAnnounceInterval);
    const arrivals = (prev?.arrivals ?? []).filter((t) => nowMs - t < windowMs);
    arrivals.push(nowMs);
    if (arrivals.length > FOREIGN_MASTER_THRESHOLD)
      arrivals.splice(0, arrivals.length - FOREIGN_MASTER_THRESHOLD);
    const record: ForeignMaster = {
      priority1: a.grandmasterPriority1,
      clockClass: a.clockClass,
      clockAccuracy: a.clockAccuracy,
      offsetScaledLogVariance: a.offsetScaledLogVariance,
      priority2: a.grandmasterPriority2,
      grandmasterIdentity: a.grandmasterIdentity,
      stepsRemoved: a.stepsRemoved,
      sender: { ...sender },
      timeSource: a.timeSource,
      currentUtcOffset: a.currentUtcOffset,
      logAnnounceInterval,
      arrivals,
      lastMs: nowMs,
    };
    this.#foreign.delete(key);
    this.#foreign.set(key, record);
    if (this.#foreign.size > MAX_FOREIGN_MASTERS) {
      // Bounded: drop the worst record (a flood of invented ports cannot grow this map).
      const worst = [...this.#foreign.entries()].sort((x, y) => compareDatasets(y[1], x[1]))[0];
      if (worst) this.#foreign.delete(worst[0]);
    }
  }

  /** The state decision (§9.3.3): run on every received Announce and at least once per announce interval. */
  decide(local: LocalDataset, nowMs: number): BmcaDecision {
    const best = this.qualified(nowMs)[0];
    const d0: ComparableDataset = {
      ...local,
      grandmasterIdentity: local.identity,
      stepsRemoved: 0,
      sender: { clockIdentity: local.identity, portNumber: 1 },
    };
    let state: BmcaState;
    let reason: string;
    const timeoutMs = this.#o.announceReceiptTimeout * intervalMs(this.#o.logAnnounceInterval);
    if (this.#o.listenOnly) {
      state = 'LISTENING';
      reason = best
        ? `listener; best master ${clockIdentityText(best.grandmasterIdentity)}`
        : 'listener; no qualified master heard';
    } else if (!best) {
      const listening = this.#state === 'LISTENING' && nowMs - this.#o.startMs < timeoutMs;
      state = listening ? 'LISTENING' : 'MASTER';
      reason = listening
        ? `listening for other masters (${this.#o.announceReceiptTimeout} announce intervals)`
        : 'no other master heard';
    } else if (best.grandmasterIdentity === local.identity) {
      // A boundary clock relaying our own Announces: we are its grandmaster.
      state = 'MASTER';
      reason = `only our own grandmaster, relayed by ${clockIdentityText(best.sender.clockIdentity)}`;
    } else if (compareDatasets(d0, best) < 0) {
      state = 'MASTER';
      reason = `better than ${clockIdentityText(best.grandmasterIdentity)} (${decidingField(d0, best)})`;
    } else {
      state = 'PASSIVE';
      const f = decidingField(best, d0);
      const detail =
        f === 'grandmasterIdentity' ? 'lower clock identity' : `${f} ${best[f]} vs ours ${d0[f]}`;
      reason = `better grandmaster ${clockIdentityText(best.grandmasterIdentity)} (${detail})`;
    }
    const changed = state !== this.#state;
    this.#state = state;
    return { state, best, reason, changed };
  }

  /**
   * When the next decision could change the state without an Announce arriving: the end of the listening
   * period, or the expiry of a foreign record. The caller decides again then, so a port returns to MASTER
   * at the timeout and not up to one announce interval later.
   */
  nextDeadlineMs(): number | undefined {
    const times: number[] = [];
    if (this.#state === 'LISTENING' && !this.#o.listenOnly)
      times.push(this.#o.startMs + this.#o.announceReceiptTimeout * intervalMs(this.#o.logAnnounceInterval));
    for (const f of this.#foreign.values()) times.push(this.#expiresAt(f));
    return times.length > 0 ? Math.min(...times) : undefined;
  }

  #expiresAt(f: ForeignMaster): number {
    const interval = Math.max(intervalMs(this.#o.logAnnounceInterval), intervalMs(f.logAnnounceInterval));
    return f.lastMs + this.#o.announceReceiptTimeout * interval;
  }

  #isQualified(f: ForeignMaster, nowMs: number): boolean {
    if (f.stepsRemoved >= MAX_STEPS_REMOVED) return false;
    const windowMs = FOREIGN_MASTER_TIME_WINDOW * intervalMs(f.logAnnounceInterval);
    return f.arrivals.filter((t) => nowMs - t < windowMs).length >= FOREIGN_MASTER_THRESHOLD;
  }

  #expire(nowMs: number): void {
    for (const [key, f] of this.#foreign) if (nowMs >= this.#expiresAt(f)) this.#foreign.delete(key);
  }
}
