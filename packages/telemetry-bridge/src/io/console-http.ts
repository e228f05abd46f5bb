/**
 * The bridge's HTTP side on the client transport's port (docs/console.md): the web console at `GET /` (plain
 * files from `console/`), and the read-only state API beside the WebSocket upgrade:
 * - `GET /api/state?pattern=<p>&limit=<n>&after=<path>`: keys matching a pattern (docs/protocol.md
 *   "Patterns"), in path order, paged by count and bytes, with the hub's epoch and offset;
 * - `GET /api/state/<path>`: one key;
 * - `GET /api/hub`: link, adapters, clients, recent commands and the event log, for the console.
 * With `requireAuth` the API takes the same bearer tokens as the WebSocket handshake (`Authorization:
 * Bearer`, constant-time compare); the static console files hold no data and are served to anyone who names
 * this host. Every request must name this host (core's Host guard: an IP literal, `localhost`, this
 * machine's hostname or a configured name; else 421), so a rebinding DNS name cannot read it from another
 * site's page.
 */
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { bearerToken, sendError, type Logger } from '@broadcast-ops/core';
import { fail } from '../errors.ts';
import type { Hub } from '../domain/hub.ts';
import { patternMatches } from '../domain/topic-trie.ts';
import { MAX_PATH_LENGTH, PATH_RE, patternError } from '../protocol/envelope.ts';
import type { CommandTap } from './command-tap.ts';
import type { EventLog } from './event-log.ts';
import { listSegments } from './log-recovery.ts';
import { tokenAccepted } from './client-session.ts';
import { bridgeHttpApp } from './http-app.ts';
import type { StateEntry } from '../domain/state-store.ts';
import { buttonView, changedSince, isButtonPath, isVariablePath, variableView } from './button-state.ts';

/** Largest page of `/api/state`: keys, and bytes of value JSON (a page ends early once past it). */
export const STATE_PAGE_MAX_KEYS = 1000;
export const STATE_PAGE_DEFAULT_KEYS = 200;
export const STATE_PAGE_MAX_BYTES = 1024 * 1024;

const ASSETS: Record<string, { file: string; type: string }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/console.js': { file: 'console.js', type: 'text/javascript; charset=utf-8' },
  '/console.css': { file: 'console.css', type: 'text/css; charset=utf-8' },
};

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export interface ConsoleOptions {
  logger: Logger;
  hub: Hub;
  requireAuth: boolean;
  authTokens: readonly string[];
  /** Extra names the Host header may carry (besides IP literals, localhost and this machine's hostname). */
  allowedHosts?: readonly string[];
  eventLog: EventLog | undefined;
  commands: CommandTap;
  serverVersion: string;
}

function entryView(e: {
  path: string;
  value: unknown;
  owner: string;
  version: number;
  stale: boolean;
  offset: number;
  updatedAt: number;
}): Record<string, unknown> {
  return {
    path: e.path,
    value: e.value,
    owner: e.owner,
    version: e.version,
    stale: e.stale,
    offset: e.offset,
    updatedAt: e.updatedAt,
  };
}

export function buildConsoleApp(o: ConsoleOptions): FastifyInstance {
  // Host guard first (core's, 421): every route below, and unknown routes, answer only to this host's names.
  const app = bridgeHttpApp(o.logger, o.allowedHosts);
  const files = new Map<string, Buffer>();
  for (const [route, a] of Object.entries(ASSETS)) {
    files.set(route, readFileSync(new URL(`../../console/${a.file}`, import.meta.url)));
  }
  for (const [route, a] of Object.entries(ASSETS)) {
    app.get(route, async (_req, reply) =>
      reply
        .header('content-type', a.type)
        .header('content-security-policy', CSP)
        .header('x-content-type-options', 'nosniff')
        .header('cache-control', 'no-cache')
        .send(files.get(route)),
    );
  }

  // No icon: answered, so browsers do not log a 404 for it.
  app.get('/favicon.ico', async (_req, reply) => reply.status(204).send());

  const guard = async (req: FastifyRequest, reply: FastifyReply): Promise<boolean> => {
    if (o.requireAuth && !tokenAccepted(bearerToken(req.headers.authorization), o.authTokens)) {
      await sendError(
        reply,
        fail('UNAUTHORIZED', 'missing or invalid bearer token', {
          headers: { 'www-authenticate': 'Bearer' },
        }),
      );
      return false;
    }
    void reply.header('cache-control', 'no-store');
    return true;
  };

  app.get('/api/state', async (req, reply) => {
    if (!(await guard(req, reply))) return reply;
    const q = req.query as Record<string, string | undefined>;
    const pattern = q['pattern'] ?? '**';
    const bad = patternError(pattern);
    if (bad !== undefined) return sendError(reply, fail('INVALID_REQUEST', bad));
    const limitRaw = q['limit'] === undefined ? STATE_PAGE_DEFAULT_KEYS : Number(q['limit']);
    if (!Number.isInteger(limitRaw) || limitRaw < 1 || limitRaw > STATE_PAGE_MAX_KEYS)
      return sendError(reply, fail('INVALID_REQUEST', `limit must be an integer 1-${STATE_PAGE_MAX_KEYS}`));
    const after = q['after'];
    if (after !== undefined && after.length > MAX_PATH_LENGTH)
      return sendError(reply, fail('INVALID_REQUEST', 'after is not a key path'));
    const offset = o.hub.offset;
    const matching: string[] = [];
    for (const e of o.hub.store.entries()) {
      if ((after === undefined || e.path > after) && patternMatches(pattern, e.path)) matching.push(e.path);
    }
    matching.sort();
    const entries: Record<string, unknown>[] = [];
    let bytes = 0;
    for (const path of matching) {
      const e = o.hub.store.get(path);
      if (!e) continue;
      if (
        entries.length >= limitRaw ||
        (entries.length > 0 && bytes + e.valueJson.length > STATE_PAGE_MAX_BYTES)
      )
        break;
      bytes += e.valueJson.length;
      entries.push(entryView(e));
    }
    const more = entries.length < matching.length;
    const last = entries.at(-1);
    return reply.send({
      epoch: o.hub.epoch,
      offset,
      pattern,
      total: matching.length,
      entries,
      ...(more && last ? { next: String(last['path']) } : {}),
    });
  });

  app.get('/api/state/*', async (req, reply) => {
    if (!(await guard(req, reply))) return reply;
    const path = (req.params as Record<string, string>)['*'] ?? '';
    if (path.length > MAX_PATH_LENGTH || !PATH_RE.test(path))
      return sendError(reply, fail('INVALID_REQUEST', 'not a key path'));
    const e = o.hub.store.get(path);
    if (!e) return sendError(reply, fail('NOT_FOUND', `no key ${path}`));
    return reply.send({ epoch: o.hub.epoch, offset: o.hub.offset, ...entryView(e) });
  });

  // Companion's button state and variables as JSON, with `seq` and `since` (docs/console.md "Button state API").
  const changedRoute = (
    url: string,
    field: string,
    matches: (path: string) => boolean,
    view: (e: StateEntry) => { path: string },
  ): void => {
    app.get(url, async (req, reply) => {
      if (!(await guard(req, reply))) return reply;
      const epoch = o.hub.epoch;
      const seq = o.hub.offset;
      const r = changedSince(
        o.hub.store.entries(),
        epoch,
        req.query as Record<string, string>,
        matches,
        view,
      );
      if ('error' in r) return sendError(reply, fail('INVALID_REQUEST', r.error));
      return reply.send({ epoch, seq, full: r.full, [field]: r.items });
    });
  };
  changedRoute('/api/buttons', 'buttons', isButtonPath, buttonView);
  changedRoute('/api/variables', 'variables', isVariablePath, variableView);

  app.get('/api/hub', async (req, reply) => {
    if (!(await guard(req, reply))) return reply;
    const log = o.eventLog;
    let segments: { name: string; bytes: number }[] = [];
    if (log) {
      const list = listSegments(log.dir);
      segments = list.map((s, i) => {
        // The newest segment is preallocated ahead of its writes: its used bytes come from the log itself.
        if (i === list.length - 1) return { name: s.name, bytes: log.segmentBytes };
        let bytes = 0;
        try {
          bytes = statSync(join(log.dir, s.name)).size;
        } catch {
          bytes = 0;
        }
        return { name: s.name, bytes };
      });
    }
    const stats = o.hub.stats();
    return reply.send({
      version: o.serverVersion,
      epoch: o.hub.epoch,
      offset: o.hub.offset,
      stats,
      adapters: o.hub.adapters(),
      clients: o.hub.clientViews(),
      commands: o.commands.recent(),
      eventLog: log
        ? {
            enabled: true,
            epoch: log.epoch,
            offset: o.hub.offset,
            segments,
            lastSyncAt: log.lastSyncAt,
            syncs: log.syncs,
            healthy: log.healthy,
            recovery: log.report,
          }
        : { enabled: false },
    });
  });
  return app;
}
