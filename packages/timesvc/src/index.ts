// Public surface of @broadcast-ops/timesvc (for the web API, a GPSDO source, PTP).
export * from './protocol/ntp-packet.ts';
export * from './domain/clock-manager.ts';
export * from './domain/ntp-responder.ts';
export * from './domain/ntp-peer.ts';
export * from './domain/rate-limiter.ts';
export * from './domain/access-list.ts';
export * from './domain/ip-address.ts';
export * from './domain/selection.ts';
export * from './domain/clock-filter.ts';
export { configSchema, loadTimesvcConfig, type TimesvcConfig } from './config.ts';
export { createTimesvc, type TimesvcService } from './io/service.ts';
export { ServedClock, hiresClock, servedBaseClock } from './io/served-clock.ts';
export { TIMESVC_ERRORS } from './errors.ts';
export { createTimesvcApp, timesvcLogger, type TimesvcApp, type TimesvcAppOptions } from './app.ts';
