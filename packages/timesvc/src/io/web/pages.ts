/**
 * The dashboard (`public/`): `/` and its script and style sheet. Only the files present at start are
 * served (no request path reaches the file system). Scripts are separate files so the
 * Content-Security-Policy forbids inline code; the page talks only to its own origin.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { sendError } from '@broadcast-ops/core';
import { fail } from '../../errors.ts';

export const PUBLIC_DIR = fileURLToPath(new URL('../../../public/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

const CSP =
  "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

export function registerPages(app: FastifyInstance, dir = PUBLIC_DIR): void {
  const files = new Map<string, { body: Buffer; type: string }>();
  for (const name of readdirSync(dir)) {
    const type = TYPES[extname(name)];
    if (type) files.set(name, { body: readFileSync(join(dir, name)), type });
  }
  const serve = (name: string) => async (_req: unknown, reply: FastifyReply) => {
    const f = files.get(name);
    if (!f) return sendError(reply, fail('NOT_FOUND', `no page ${name}`));
    return reply
      .header('content-type', f.type)
      .header('cache-control', 'no-cache')
      .header('content-security-policy', CSP)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .send(f.body);
  };
  app.get('/', serve('index.html'));
  for (const name of files.keys()) app.get(`/${name}`, serve(name));
}
