import Fastify, {
  LogController,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import type { Logger } from 'pino';
import { isAppError } from './errors.ts';

export interface HttpAppOptions {
  logger: Logger;
  /** Largest accepted request body in bytes (fastify rejects larger ones with 413 before parsing). */
  bodyLimit?: number;
  trustProxy?: boolean;
  /** Extra fastify options. */
  fastify?: Omit<FastifyServerOptions, 'logger' | 'loggerInstance' | 'bodyLimit' | 'trustProxy'>;
}

/** The one error body of every HTTP surface: `{error: CODE, message}` (AppError.toBody adds `details`). */
export interface ErrorBody {
  error: string;
  message: string;
  details?: Record<string, unknown>;
}

/** The toolkit's 404: `{error: "NOT_FOUND", message: "no route GET /path"}` (query string left out). */
export function notFoundBody(method: string, url: string): ErrorBody {
  return { error: 'NOT_FOUND', message: `no route ${method} ${url.split('?')[0] ?? ''}` };
}

/** Fastify not-found handler answering with notFoundBody; createHttpApp installs it unless the app sets its own. */
export function notFoundHandler(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return reply.status(404).send(notFoundBody(request.method, request.url));
}

/**
 * A fastify instance with the toolkit's defaults: our pino logger, a body limit, an error handler that
 * turns AppError into `{error, message}` with its status and everything else into 500 without leaking
 * internals, and the 404 handler above (an app that calls setNotFoundHandler itself keeps its own).
 * Services build their app in one function and call `listen` only from main.ts.
 */
export function createHttpApp(options: HttpAppOptions): FastifyInstance {
  const serverOptions: FastifyServerOptions = {
    loggerInstance: options.logger.child({ component: 'http' }),
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: options.bodyLimit ?? 64 * 1024,
    trustProxy: options.trustProxy ?? false,
    // Idle keep-alive sockets are closed at shutdown; in-flight requests are allowed to finish.
    forceCloseConnections: 'idle',
    ...options.fastify,
  };
  const app = Fastify(serverOptions) as unknown as FastifyInstance;
  // During shutdown, answers to in-flight requests carry `Connection: close` so their keep-alive sockets
  // end with the response and close() can finish instead of waiting for an idle client.
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) void reply.header('connection', 'close');
    done(null, payload);
  });
  // The default 404 is installed at boot unless the app has set its own by then (fastify allows one per
  // context, and throws on a second).
  let ownNotFound = false;
  const setNotFoundHandler = app.setNotFoundHandler.bind(app);
  Reflect.set(app, 'setNotFoundHandler', (...args: unknown[]) => {
    ownNotFound = true;
    return Reflect.apply(setNotFoundHandler, app, args) as FastifyInstance;
  });
  app.after(() => {
    if (!ownNotFound) setNotFoundHandler(notFoundHandler);
  });
  app.setErrorHandler((err, request, reply) => {
    if (isAppError(err)) {
      if (err.headers) void reply.headers(err.headers);
      return reply.status(err.status).send(err.toBody());
    }
    const e = err as { statusCode?: number; code?: string; message?: string };
    if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
      return reply
        .status(e.statusCode)
        .send({ error: e.code ?? 'BAD_REQUEST', message: e.message ?? 'bad request' });
    }
    request.log.error({ err }, 'unhandled error');
    return reply.status(500).send({ error: 'SERVER_ERROR', message: 'internal server error' });
  });
  return app;
}

/** The URL a listening fastify app answers on, for printing and tests. */
export function listeningUrl(app: FastifyInstance): string {
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('server is not listening on TCP');
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${address.port}`;
}

/**
 * `Authorization: Bearer <token>` → token (RFC 6750 §2.1; scheme case-insensitive); anything else → undefined.
 * Shared by every service that takes bearer tokens, so they all accept and refuse the same headers.
 */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return m?.[1];
}
