/**
 * The fleet as the status service knows it: per service the last verdict, when it was checked and when it
 * last answered. A service that does not answer one poll is amber ("missed a poll"), two in a row red, so it
 * turns red within two polls without flapping on a single lost answer. Time is injected; no timers here.
 */
import type { ServiceKind, ServiceLink, ServicePort, WatchedService } from './service.ts';
import type { Figure, Level, Verdict } from './verdict.ts';

export interface ServiceStatus {
  name: string;
  kind: ServiceKind;
  page: string | null;
  title: string | null;
  links: ServiceLink[];
  ports: ServicePort[];
  docs: string | null;
  level: Level | 'unknown';
  reason: string;
  figures: Record<string, Figure>;
  devices: { online: number; offline: number } | null;
  /** Epoch ms of the last completed poll, and of the last poll the service answered. */
  checkedAt: number | null;
  answeredAt: number | null;
  /** Polls in a row without an answer. */
  missed: number;
}

export class Fleet {
  readonly #services = new Map<string, ServiceStatus>();

  constructor(services: readonly WatchedService[]) {
    for (const s of services)
      this.#services.set(s.name, {
        name: s.name,
        kind: s.kind,
        page: s.page ?? null,
        title: s.title ?? null,
        links: s.links ?? [],
        ports: s.ports ?? [],
        docs: s.docs ?? null,
        level: 'unknown',
        reason: 'not polled yet',
        figures: {},
        devices: null,
        checkedAt: null,
        answeredAt: null,
        missed: 0,
      });
  }

  /** Records one poll's verdict; `answered` is false when the health URL gave no HTTP answer. */
  record(name: string, v: Verdict, answered: boolean, now: number): ServiceStatus {
    const s = this.#services.get(name);
    if (!s) throw new Error(`unknown service ${name}`);
    s.checkedAt = now;
    if (answered) {
      s.missed = 0;
      s.answeredAt = now;
      s.level = v.level;
      s.reason = v.reason;
      s.figures = v.figures;
      s.devices = v.devices ?? null;
      return s;
    }
    s.missed += 1;
    const since =
      s.answeredAt === null
        ? 'never answered'
        : `last answer ${Math.round((now - s.answeredAt) / 1000)} s ago`;
    s.level = s.missed >= 2 ? 'red' : 'amber';
    s.reason = `${v.reason} (${s.missed} poll${s.missed > 1 ? 's' : ''} in a row; ${since})`;
    // Figures of an earlier answer are no longer known: not shown.
    s.figures = {};
    s.devices = null;
    return s;
  }

  list(): ServiceStatus[] {
    return [...this.#services.values()].map((s) => ({ ...s, figures: { ...s.figures } }));
  }

  /** The worst level of the fleet ('unknown' before every service was polled once). */
  overall(): Level | 'unknown' {
    const levels = [...this.#services.values()].map((s) => s.level);
    if (levels.includes('red')) return 'red';
    if (levels.includes('unknown')) return 'unknown';
    return levels.includes('amber') ? 'amber' : 'green';
  }
}
