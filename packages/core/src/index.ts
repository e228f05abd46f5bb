export * from './clock.ts';
export * from './config.ts';
export * from './errors.ts';
export * from './http.ts';
export * from './logger.ts';
export * from './metrics.ts';
export * from './shutdown.ts';
export * from './cli.ts';
