/**
 * Roles and permissions of the web API (README "Web API: roles"). Every route names one permission;
 * `public` needs no token. The table is the contract the route-by-role tests check.
 */
export const ROLES = ['admin', 'operator', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

export type Permission = 'public' | 'read' | 'operate' | 'config';

const GRANTS: Record<Role, readonly Permission[]> = {
  viewer: ['read'],
  operator: ['read', 'operate'],
  admin: ['read', 'operate', 'config'],
};

export function allowed(role: Role, permission: Permission): boolean {
  return permission === 'public' || GRANTS[role].includes(permission);
}

export interface RouteSpec {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  url: string;
  permission: Permission;
  /** Changes state: the Host header is checked too. */
  changesState?: boolean;
}

/** Every route of the web API with its permission (WebSockets are GET upgrades). */
export const ROUTES: readonly RouteSpec[] = [
  { method: 'GET', url: '/api/health', permission: 'public' },
  { method: 'GET', url: '/metrics', permission: 'public' },
  { method: 'POST', url: '/api/auth/login', permission: 'public' },
  { method: 'GET', url: '/api/auth/lab-credential', permission: 'public' },
  { method: 'GET', url: '/api/auth/me', permission: 'read' },
  { method: 'GET', url: '/api/status', permission: 'read' },
  { method: 'GET', url: '/api/status/clock', permission: 'read' },
  { method: 'GET', url: '/api/status/ntp', permission: 'read' },
  { method: 'GET', url: '/api/status/nts', permission: 'read' },
  { method: 'GET', url: '/api/status/ptp', permission: 'read' },
  { method: 'GET', url: '/api/status/gpsdo', permission: 'read' },
  { method: 'GET', url: '/api/peers', permission: 'read' },
  { method: 'GET', url: '/api/clients', permission: 'read' },
  { method: 'GET', url: '/api/satellites', permission: 'read' },
  { method: 'GET', url: '/api/logs', permission: 'read' },
  { method: 'GET', url: '/api/ws/status', permission: 'read' },
  { method: 'GET', url: '/api/ws/logs', permission: 'read' },
  { method: 'POST', url: '/api/nts/reload-certificate', permission: 'operate', changesState: true },
  { method: 'GET', url: '/api/config', permission: 'config' },
  { method: 'PUT', url: '/api/config', permission: 'config', changesState: true },
  { method: 'POST', url: '/api/config/ntp/peers', permission: 'config', changesState: true },
  { method: 'DELETE', url: '/api/config/ntp/peers/:address', permission: 'config', changesState: true },
];
