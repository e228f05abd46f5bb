/**
 * Which credential holds which client namespace, kept across restarts (README "Clients and namespaces").
 * Only SHA-256 digests of the bearer tokens are stored, never a token; the file is created 0600 and replaced
 * atomically (temporary file, fsync, rename, directory fsync), so a crash leaves the old or the new binding.
 */
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { IdentityStore } from '../domain/client-registry.ts';
import { syncDir } from './log-recovery.ts';

export const IDENTITY_FILE = 'identities.json';

export function identityFile(dir: string): IdentityStore {
  const path = join(dir, IDENTITY_FILE);
  return {
    load(): Map<string, string> {
      let text: string;
      try {
        text = readFileSync(path, 'utf8');
      } catch {
        return new Map();
      }
      try {
        const o = JSON.parse(text) as Record<string, unknown>;
        const m = new Map<string, string>();
        for (const [ns, d] of Object.entries(o))
          if (typeof d === 'string' && /^[0-9a-f]{64}$/.test(d)) m.set(ns, d);
        return m;
      } catch {
        // Unreadable: no binding is known, so restored namespaces stay reserved (client-registry.ts).
        return new Map();
      }
    },
    save(bindings: Map<string, string>): void {
      const tmp = `${path}.tmp`;
      const fd = openSync(tmp, 'w', 0o600);
      try {
        writeSync(fd, JSON.stringify(Object.fromEntries(bindings)));
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(tmp, path);
      syncDir(dir);
    },
  };
}
