import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { AppError, type Logger } from '@broadcast-ops/core';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorBodyOf } from './http-api.ts';
import { unavailable } from './http-errors.ts';
import type { BusMessage, RedisCluster } from './redis-cluster.ts';

/**
 * HTTP requests on an instance that does not own the sessions are forwarded to the owner over the Redis
 * bus (docs/multi-instance.md "How it works"): method, URL, headers, body and the client's address as this
 * instance computed it (its `PUNCH_TRUST_PROXY` rules); the owner runs the request through its own app
 * (`inject`, with that address as the peer address and no `X-Forwarded-For`), so the checks, limits and
 * answers are those of a single broker. Health and metrics are answered by each instance itself.
 *
 * While Redis is unreachable, or no owner is known or answers within `timeoutMs`, requests fail with
 * `SERVER_ERROR` (503, `Retry-After: 5`): nothing was changed.
 */
export interface ForwardOptions {
  cluster: RedisCluster;
  app: FastifyInstance;
  logger: Logger;
  bodyLimit: number;
  clientOf: (request: FastifyRequest) => string;
  /** Whether this instance's broker is loaded and serving (it owns the sessions). */
  ownerReady: () => boolean;
  timeoutMs?: number;
}

const LOCAL = new Set(['/api/health', '/metrics']);
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'date',
  'x-forwarded-for',
  'upgrade',
]);

async function readBody(raw: IncomingMessage, limit: number): Promise<Buffer | 'too_large'> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of raw) {
    size += (chunk as Buffer).length;
    if (size > limit) return 'too_large';
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function sendError(reply: FastifyReply, e: AppError): FastifyReply {
  if (e.headers) void reply.headers(e.headers);
  return reply.status(e.status).send(errorBodyOf(e));
}

export function installForwarding(o: ForwardOptions): void {
  const { cluster, app } = o;
  const timeoutMs = o.timeoutMs ?? 5_000;
  const pending = new Map<string, (m: BusMessage) => void>();

  cluster.subscribe((m) => {
    if (m.t === 'http-reply') {
      pending.get(String(m['id']))?.(m);
      return;
    }
    if (m.t !== 'http') return;
    void serve(m);
  });

  /** Owner side: run a forwarded request and publish the answer to the instance that asked. */
  async function serve(m: BusMessage): Promise<void> {
    const reply = (answer: Record<string, unknown>): Promise<void> =>
      cluster.publish(String(m['from']), { t: 'http-reply', id: m['id'], ...answer }).catch(() => undefined);
    if (!cluster.isOwner || !o.ownerReady()) {
      await reply({ status: 0 });
      return;
    }
    try {
      const res = await app.inject({
        method: String(m['method']) as 'GET',
        url: String(m['url']),
        headers: m['headers'] as Record<string, string>,
        payload: Buffer.from(typeof m['body'] === 'string' ? m['body'] : '', 'base64'),
        remoteAddress: String(m['ip']),
      });
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(res.headers)) {
        if (v === undefined || HOP_BY_HOP.has(k)) continue;
        headers[k] = Array.isArray(v) ? v.join(', ') : String(v);
      }
      await reply({ status: res.statusCode, headers, body: res.rawPayload.toString('base64') });
    } catch (err) {
      o.logger.error({ err }, 'forwarded request failed on the owner');
      await reply({ status: 0 });
    }
  }

  /** Socket side: forward to the owner and wait for its answer. */
  function ask(owner: string, m: BusMessage): Promise<BusMessage | undefined> {
    const id = randomBytes(9).toString('base64url');
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        pending.delete(id);
        resolve(undefined);
      }, timeoutMs);
      pending.set(id, (answer) => {
        clearTimeout(timer);
        pending.delete(id);
        resolve(answer);
      });
      cluster
        .publish(owner, { ...m, id, from: cluster.id })
        .catch(() => pending.get(id)?.({ t: 'x', status: 0 }));
    });
  }

  app.addHook('onRequest', async (request, reply) => {
    const path = request.url.split('?')[0] ?? '';
    if (LOCAL.has(path)) return;
    if (!cluster.reachable)
      return sendError(reply, unavailable('the session store (Redis) is unreachable; retry'));
    if (cluster.isOwner) {
      if (!o.ownerReady())
        return sendError(reply, unavailable('this instance is loading the sessions; retry'));
      return;
    }
    const owner = cluster.leader;
    if (owner === null)
      return sendError(reply, unavailable('no broker instance owns the sessions yet; retry'));
    const body = await readBody(request.raw, o.bodyLimit);
    if (body === 'too_large') {
      return sendError(
        reply,
        new AppError('INVALID_MESSAGE', 400, `body: larger than the limit of ${o.bodyLimit} bytes`),
      );
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(request.headers)) {
      if (v === undefined || HOP_BY_HOP.has(k)) continue;
      headers[k] = Array.isArray(v) ? v.join(', ') : v;
    }
    const answer = await ask(owner, {
      t: 'http',
      method: request.method,
      url: request.url,
      headers,
      body: body.toString('base64'),
      ip: o.clientOf(request),
    });
    const status = Number(answer?.['status'] ?? 0);
    if (!answer || status === 0) {
      return sendError(reply, unavailable('the owning broker instance did not answer; retry'));
    }
    void reply.headers(answer['headers'] as Record<string, string>);
    return reply
      .status(status)
      .send(Buffer.from(typeof answer['body'] === 'string' ? answer['body'] : '', 'base64'));
  });
}
