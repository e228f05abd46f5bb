#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx: no build step, so a fresh clone works after `npm ci`.
import { register } from 'tsx/esm/api';

register();
await import('../src/main.ts');
