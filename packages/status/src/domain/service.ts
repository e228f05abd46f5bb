/**
 * The services the status service watches, as the domain reads them. The configuration (../config.ts) validates
 * the file into these shapes; the domain declares them, so it never imports the configuration loader
 * (docs/ARCHITECTURE.md "Rules the build enforces").
 */

export const SERVICE_KINDS = ['punch', 'telemetry-bridge', 'playout-monitor', 'timesvc', 'http'] as const;
export type ServiceKind = (typeof SERVICE_KINDS)[number];

/** A link shown on a service's card (a `template` one is shown as text, not linked). */
export interface ServiceLink {
  label: string;
  url: string;
  page?: boolean | undefined;
  template?: boolean | undefined;
}

/** A port to point equipment at, shown on a service's card. */
export interface ServicePort {
  label: string;
  proto?: 'tcp' | 'udp' | undefined;
  port?: number | undefined;
  outbound?: boolean | undefined;
  use: string;
}

/** What the fleet keeps of one configured service. */
export interface WatchedService {
  name: string;
  kind: ServiceKind;
  /** The health URL polled every interval. */
  health: string;
  page?: string | undefined;
  title?: string | undefined;
  links?: ServiceLink[] | undefined;
  ports?: ServicePort[] | undefined;
  docs?: string | undefined;
}
