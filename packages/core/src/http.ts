import { STATUS_CODES } from 'node:http';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import Fastify, {
  LogController,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import type { Logger } from 'pino';
import { AppError, genericError, isAppError, type GenericErrorCode } from './errors.ts';

export interface HttpAppOptions {
  logger: Logger;
  /** Largest accepted request body in bytes (fastify rejects larger ones with 413 before parsing). */
  bodyLimit?: number;
  trustProxy?: boolean;
  /**
   * The body of every error this app sends; default `err.toBody()`. A service whose public API promises
   * extra fields adds them here (punch's `code`), keeping `error` and `message`; it may set headers.
   */
  errorBody?: ErrorBodyShaper;
  /**
   * How long `close()` lets in-flight requests finish before it ends every connection left (default
   * CLOSE_GRACE_MS). See closeConnectionsOnClose.
   */
  closeGraceMs?: number;
  /** Extra fastify options. */
  fastify?: Omit<FastifyServerOptions, 'logger' | 'loggerInstance' | 'bodyLimit' | 'trustProxy'>;
}

/** The default bound on in-flight requests at close: under core's Shutdown deadline (10 s). */
export const CLOSE_GRACE_MS = 5000;

/** The one error body of every HTTP surface: `{error: CODE, message}` (AppError.toBody adds `details`). */
export interface ErrorBody {
  error: string;
  message: string;
  details?: Record<string, unknown>;
}

/** Shapes an error's body for one app (see HttpAppOptions.errorBody). */
export type ErrorBodyShaper = (err: AppError, reply: FastifyReply) => ErrorBody;

const BODY_SHAPER = Symbol('errorBody');

/**
 * Send an error: its status, its headers and the app's error body. The one way a handler answers with an
 * error body (throwing an AppError does the same through the error handler); no service builds one by hand.
 */
export function sendError(reply: FastifyReply, err: AppError): FastifyReply {
  if (err.headers) void reply.headers(err.headers);
  const shaper = Reflect.get(reply.server, BODY_SHAPER) as ErrorBodyShaper | undefined;
  return reply.status(err.status).send(shaper ? shaper(err, reply) : err.toBody());
}

/** The toolkit's 404 for a request: NOT_FOUND, "no route GET /path" (query string left out). */
export function notFoundError(method: string, url: string): AppError {
  return genericError('NOT_FOUND', `no route ${method} ${url.split('?')[0] ?? ''}`);
}

/** The toolkit's 404 body: `{error: "NOT_FOUND", message: "no route GET /path"}`. */
export function notFoundBody(method: string, url: string): ErrorBody {
  return notFoundError(method, url).toBody();
}

/** Fastify not-found handler answering notFoundError; createHttpApp installs it unless the app sets its own. */
export function notFoundHandler(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return sendError(reply, notFoundError(request.method, request.url));
}

/** Generic codes of the 4xx statuses fastify answers by itself; any other 4xx becomes INVALID_REQUEST. */
const GENERIC_OF_STATUS: Readonly<Record<number, GenericErrorCode>> = {
  400: 'INVALID_REQUEST',
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'RATE_LIMITED',
};

/**
 * Any error thrown in a fastify app as the AppError it is answered with. Fastify's own errors (`FST_ERR_*`:
 * body too large, wrong media type, empty or malformed JSON, validation, route not found) become generic
 * codes with a message naming the problem; their `FST_ERR_*` code is never sent. Anything that is not a
 * client error is SERVER_ERROR, its details left to the log.
 */
export function appErrorOf(err: unknown, bodyLimit?: number): AppError | undefined {
  if (isAppError(err)) return err;
  const e = (typeof err === 'object' && err !== null ? err : {}) as {
    statusCode?: unknown;
    code?: unknown;
    message?: unknown;
    validation?: unknown;
  };
  const status = typeof e.statusCode === 'number' ? e.statusCode : 500;
  if (status < 400 || status >= 500) return undefined;
  const fastifyMessage = typeof e.message === 'string' ? e.message.replace(/\bFST_ERR_\w*:?\s*/g, '') : '';
  switch (e.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return genericError(
        'PAYLOAD_TOO_LARGE',
        bodyLimit === undefined
          ? 'body: larger than the limit'
          : `body: larger than the limit of ${bodyLimit} bytes`,
      );
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return genericError('UNSUPPORTED_MEDIA_TYPE', 'body: Content-Type must be application/json');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return genericError('INVALID_REQUEST', 'body: empty, though Content-Type is application/json');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return genericError('INVALID_REQUEST', 'body: not valid JSON');
    default:
      break;
  }
  if (err instanceof SyntaxError) return genericError('INVALID_REQUEST', 'body: not valid JSON');
  if (e.validation !== undefined)
    return genericError('INVALID_REQUEST', fastifyMessage || 'request: invalid');
  const code = GENERIC_OF_STATUS[status] ?? 'INVALID_REQUEST';
  return genericError(code, fastifyMessage === '' ? undefined : fastifyMessage);
}

type SchemaCompilers = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>;

/**
 * fastify's own schema compilers (@fastify/ajv-compiler for request validation, fast-json-stringify for
 * response serialisation), loaded the first time a route declares such a schema rather than when fastify
 * starts (about 240 modules, their load time and their resident memory: docs/at-rest.md).
 * The factories are fastify's defaults, resolved through fastify itself and built once, so a route compiles
 * exactly as before. One difference fastify makes for a factory passed in: it no longer lower-cases the
 * property names of a `headers` schema (lib/validation.js); no route here declares one, and one that
 * does writes its header names in lower case, as Node delivers them.
 */
function lazySchemaCompilers(): SchemaCompilers {
  const fromFastify = createRequire(createRequire(import.meta.url).resolve('fastify'));
  // fastify's factory types are overloaded (AJV and JTD); both are passed through unchanged.
  type Factory = (externalSchemas: unknown, options: unknown) => unknown;
  const once = (name: string): Factory => {
    let factory: Factory | undefined;
    return (externalSchemas, options) => {
      factory ??= (fromFastify(name) as () => Factory)();
      return factory(externalSchemas, options);
    };
  };
  const serializers = once('@fastify/fast-json-stringify-compiler');
  type Serialize = (data: unknown) => string;
  type SerializerCompiler = (routeSchema: unknown) => Serialize;
  return {
    buildValidator: once('@fastify/ajv-compiler'),
    // A route's response schema is compiled by its first response, not when the route is registered: fastify
    // compiles them all at start, which loaded fast-json-stringify and ajv-formats (145 modules) before
    // punch could answer its health check, for the one route that serialises from its schema. A schema
    // fast-json-stringify refuses now fails that route's first response instead of the start.
    buildSerializer: (externalSchemas: unknown, options: unknown): SerializerCompiler => {
      let compiler: SerializerCompiler | undefined;
      return (routeSchema) => {
        let serialize: Serialize | undefined;
        return (data) => {
          compiler ??= serializers(externalSchemas, options) as SerializerCompiler;
          serialize ??= compiler(routeSchema);
          return serialize(data);
        };
      };
    },
  } as unknown as SchemaCompilers;
}

/**
 * A fastify instance with the toolkit's defaults: our pino logger, a body limit, an error handler that
 * answers AppError with its status and body, fastify's own errors with generic codes (appErrorOf) and
 * everything else with 500 SERVER_ERROR without leaking internals, and the 404 handler above (an app that
 * calls setNotFoundHandler itself keeps its own). The Host guard is host-guard.ts's installHostGuard.
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
    schemaController: { compilersFactory: lazySchemaCompilers() },
    ...options.fastify,
  };
  const app = Fastify(serverOptions) as unknown as FastifyInstance;
  const closing = closeConnectionsOnClose(app, options.closeGraceMs ?? CLOSE_GRACE_MS);
  // During shutdown, answers to in-flight requests carry `Connection: close` so their keep-alive sockets
  // end with the response and close() can finish instead of waiting for an idle client.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing()) void reply.header('connection', 'close');
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
  if (options.errorBody) Reflect.set(app, BODY_SHAPER, options.errorBody);
  app.setErrorHandler((err, request, reply) => {
    const known = appErrorOf(err, request.routeOptions.bodyLimit);
    if (known) return sendError(reply, known);
    request.log.error({ err }, 'unhandled error');
    return sendError(reply, genericError('SERVER_ERROR'));
  });
  return app;
}

/**
 * `close()` ends in bounded time whoever is connected; returns whether the app is closing.
 *
 * - A connection that has not sent a byte is ended at once. A browser opens such sockets ahead of need
 *   (Chromium's preconnect) and may keep them for minutes. Node counts a connection as active from its
 *   accept, not from its first request, so `closeIdleConnections()` (fastify's `forceCloseConnections:
 *   'idle'`) leaves it, and `server.close()` stops the header-timeout checks that would have ended it: one
 *   page open on an operator's PC held every stop until Shutdown's deadline and exit 1.
 * - A connection accepted while closing is ended at once.
 * - In-flight requests may finish for `graceMs`. Then every connection still open is destroyed: a
 *   request whose handler never answers, headers sent a byte at a time, an upgraded socket its owner left.
 */
function closeConnectionsOnClose(app: FastifyInstance, graceMs: number): () => boolean {
  const open = new Set<Socket>();
  let closing = false;
  let grace: NodeJS.Timeout | undefined;
  app.server.on('connection', (socket: Socket) => {
    if (closing) {
      socket.destroy();
      return;
    }
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  app.addHook('preClose', (done) => {
    closing = true;
    for (const socket of open) if (socket.bytesRead === 0) socket.destroy();
    grace = setTimeout(() => {
      for (const socket of open) socket.destroy();
    }, graceMs);
    grace.unref();
    done();
  });
  // The server's own close, not fastify's onClose: an app whose server another owner listens on and
  // closes (the bridge's client transport) runs its onClose hooks without waiting for that close.
  app.server.on('close', () => clearTimeout(grace));
  return () => closing;
}

/**
 * Refuse a WebSocket upgrade (or any request handled on the raw socket) with an error's status and the
 * one body shape, then close the socket: the upgrade path's sendError.
 */
export function rejectUpgrade(socket: Duplex, err: AppError): void {
  const json = JSON.stringify(err.toBody());
  const headers = Object.entries(err.headers ?? {})
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? 'Error'}\r\n${headers}` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\nConnection: close\r\n\r\n${json}`,
  );
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
