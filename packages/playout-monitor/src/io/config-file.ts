/**
 * Saving the configuration: the whole document is written to a temporary file in the same directory,
 * flushed to disk, then renamed over the old file, so a crash or a full disk leaves either the old or
 * the new file, never half of one. The mode of the existing file is kept (0600 when new: it may hold
 * vMix passwords).
 */
import { constants } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { MonitorConfig } from '../config.ts';

export async function writeConfigAtomically(path: string, config: MonitorConfig): Promise<void> {
  // node:fs/promises loads with the first save, not at every start (docs/at-rest.md "What was cut").
  const { open, rename, rm, stat } = await import('node:fs/promises');
  const text = JSON.stringify(config, null, 2) + '\n';
  let mode = 0o600;
  try {
    mode = (await stat(path)).mode & 0o777;
  } catch {
    /* new file */
  }
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.${Date.now()}.tmp`);
  const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode);
  try {
    await fh.writeFile(text, 'utf8');
    await fh.sync();
  } catch (err) {
    await fh.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await fh.close();
  try {
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  // Make the rename itself durable.
  const dir = await open(dirname(path), constants.O_RDONLY);
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}

/** Secrets are never sent back: passwords become this marker; a PUT with the marker keeps the old value. */
export const REDACTED = '********';

export function redactConfig(config: MonitorConfig): MonitorConfig {
  return {
    ...config,
    servers: config.servers.map((s) =>
      s.type === 'http_mixer' && s.password !== undefined ? { ...s, password: REDACTED } : s,
    ),
  };
}

/** Put back the stored password where a client sent the marker for the same device id. */
export function restoreSecrets(incoming: unknown, current: MonitorConfig): unknown {
  if (typeof incoming !== 'object' || incoming === null) return incoming;
  const servers = (incoming as { servers?: unknown }).servers;
  if (!Array.isArray(servers)) return incoming;
  return {
    ...incoming,
    servers: servers.map((s: unknown) => {
      if (typeof s !== 'object' || s === null) return s;
      const entry = s as { id?: unknown; password?: unknown };
      if (entry.password !== REDACTED) return s;
      const old = current.servers.find((c) => c.id === entry.id);
      const password = old?.type === 'http_mixer' ? old.password : undefined;
      const copy: Record<string, unknown> = { ...entry };
      if (password === undefined) delete copy['password'];
      else copy['password'] = password;
      return copy;
    }),
  };
}
