export * from './types.ts';
export { ButtonsPlaceholderAdapter, NOT_IMPLEMENTED } from './placeholder.ts';
export { ButtonsSimulatorAdapter } from './simulator.ts';
