import * as z from '@broadcast-ops/core/zod';
import { MAX_NAME_LENGTH, PUNCH_VERSION, errorBody } from './schemas.ts';

/**
 * The OpenAPI 3.1 document, generated from the route table (docs/protocol.md "Route table"): every route
 * is declared once, with the zod schemas that validate its requests, and this module turns those
 * declarations into the document. Nothing here lists a path or an operationId of its own. JSON Schema
 * 2020-12 is OpenAPI 3.1's dialect.
 */
export type Json = Record<string, unknown>;

export type HttpMethod = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/**
 * Who may call a route: `public` (no token; `security: []`), `token` (any token of the session), or
 * `{admin}` (an admin token; the string names the action in the 403's message). Token routes answer
 * 401/403/410/429/500 as `COMMON_RESPONSES` documents.
 */
export type RouteAuth = 'public' | 'token' | { admin: string };

/** A parameter documented as given (path parameters, and query parameters a handler reads leniently). */
export interface ParamDoc {
  name: string;
  in: 'path' | 'query';
  schema: z.ZodMiniType | Json;
  required?: boolean;
  description?: string;
}

/** A response: a JSON body from a zod schema (`json`), or other content as JSON Schema, and headers. */
export interface ResponseDoc {
  description: string;
  json?: z.ZodMiniType;
  content?: Record<string, { schema: Json }>;
  headers?: Record<string, Json>;
}

/** What the document says about one route: the declaration's data half (the handler is io's). */
export interface RouteDoc {
  method: HttpMethod;
  /** fastify's form: `/api/session/:name`. */
  path: string;
  /** `null`: served but not in the document (the create page, its assets, aliases). */
  operationId: string | null;
  summary?: string;
  auth: RouteAuth;
  /** Documented, not validated: path parameters (a token names its session) and lenient query ones. */
  parameters?: readonly ParamDoc[];
  /** The query, validated (400 INVALID_MESSAGE naming the field) and documented one parameter each. */
  query?: z.ZodMiniObject;
  /** The JSON body, validated like the query; `required: false` validates a missing body as `{}`. */
  body?: { schema: z.ZodMiniType; required: boolean };
  /** The statuses this route answers besides those its `auth` implies. */
  responses: Readonly<Record<string, ResponseDoc>>;
  /** fastify answers HEAD from the GET route; documented when set. */
  head?: { operationId: string; responses: Readonly<Record<string, ResponseDoc>> };
  /** A WebSocket upgrade on the HTTP server (io/ws-server.ts), not a fastify route: no token responses. */
  upgrade?: true;
}

const retryAfter = { 'Retry-After': { schema: { type: 'integer' } } };

/** An error answer: the broker's one error body (io/http-errors.ts punchErrorBody). */
export function errorResponse(description: string, headers?: Record<string, Json>): ResponseDoc {
  return { description, json: errorBody, ...(headers ? { headers } : {}) };
}

/** An error answer with `Retry-After` (seconds). */
export function retryLaterResponse(description: string): ResponseDoc {
  return errorResponse(description, retryAfter);
}

export const VERSION_HEADER: Record<string, Json> = {
  'Punch-Version': {
    description: 'Protocol version, major.minor',
    schema: { type: 'string', const: PUNCH_VERSION },
  },
};

export const RATE_LIMITED = retryLaterResponse('RATE_LIMITED (header Retry-After, seconds)');
export const SERVER_ERROR = errorResponse(
  'SERVER_ERROR: unexpected failure (logged; no internals in the message)',
);

/** What every token route answers besides its own statuses. */
export const COMMON_RESPONSES: Readonly<Record<string, ResponseDoc>> = {
  '401': errorResponse('UNAUTHORIZED (code AUTH_FAILED): token missing, malformed or forged'),
  '403': errorResponse(
    'FORBIDDEN (code AUTH_FAILED): token for another session or stream, or a peer token where admin is needed',
  ),
  '410': errorResponse('SESSION_EXPIRED: token expired, or the session is closed or unknown'),
  '429': RATE_LIMITED,
  '500': SERVER_ERROR,
};

/** `:name`, a session's name in the path (checked by the token, which names its session). */
export const NAME_PARAM: ParamDoc = {
  name: 'name',
  in: 'path',
  schema: z.string().check(z.maxLength(MAX_NAME_LENGTH)),
};

/** fastify's `/a/:b` as OpenAPI's `/a/{b}`. */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z_]\w*)/g, '{$1}');
}

/** A zod schema as JSON Schema 2020-12 (its named parts collected into `defs` when given). */
export function jsonSchemaOf(
  schema: z.ZodMiniType,
  io: 'input' | 'output',
  defs?: Record<string, unknown>,
): Json {
  const js = z.toJSONSchema(schema, { io, target: 'draft-2020-12' }) as Json;
  if (defs) Object.assign(defs, (js['$defs'] ?? {}) as Record<string, unknown>);
  const { $schema: _s, $defs: _d, ...rest } = js;
  return rest;
}

function isZod(s: z.ZodMiniType | Json): s is z.ZodMiniType {
  return s instanceof z.ZodMiniType;
}

export function buildOpenApi(routes: readonly RouteDoc[], options: { serverUrl: string }): Json {
  const components: Record<string, unknown> = {};
  const convert = (schema: z.ZodMiniType, io: 'input' | 'output'): Json =>
    jsonSchemaOf(schema, io, components);
  const response = (r: ResponseDoc): Json => ({
    description: r.description,
    ...(r.headers ? { headers: r.headers } : {}),
    ...(r.json
      ? { content: { 'application/json': { schema: convert(r.json, 'output') } } }
      : r.content
        ? { content: r.content }
        : {}),
  });
  const responses = (rs: Readonly<Record<string, ResponseDoc>>): Json =>
    Object.fromEntries(Object.entries(rs).map(([status, r]) => [status, response(r)]));
  const parameter = (p: ParamDoc): Json => ({
    name: p.name,
    in: p.in,
    required: p.required ?? p.in === 'path',
    ...(p.description === undefined ? {} : { description: p.description }),
    schema: isZod(p.schema) ? convert(p.schema, 'input') : p.schema,
  });
  const parametersOf = (route: RouteDoc): Json[] => {
    const declared = (route.parameters ?? []).map(parameter);
    if (!route.query) return declared;
    const q = convert(route.query, 'input');
    const required = (q['required'] ?? []) as string[];
    const fromQuery = Object.entries((q['properties'] ?? {}) as Record<string, Json>).map(
      ([name, schema]) => ({
        name,
        in: 'query',
        required: required.includes(name),
        schema,
      }),
    );
    return [...declared, ...fromQuery];
  };

  const paths: Record<string, Record<string, Json>> = {};
  for (const route of routes) {
    checkPathParameters(route);
    if (route.operationId === null) continue;
    const isPublic = route.auth === 'public';
    const security = isPublic ? { security: [] } : {};
    const parameters = parametersOf(route);
    const operation: Json = {
      operationId: route.operationId,
      ...security,
      ...(route.summary === undefined ? {} : { summary: route.summary }),
      ...(parameters.length ? { parameters } : {}),
      ...(route.body
        ? {
            requestBody: {
              required: route.body.required,
              content: { 'application/json': { schema: convert(route.body.schema, 'input') } },
            },
          }
        : {}),
      responses: responses({
        ...route.responses,
        ...(isPublic || route.upgrade ? {} : COMMON_RESPONSES),
      }),
    };
    const item = (paths[openApiPath(route.path)] ??= {});
    const method = route.method.toLowerCase();
    if (item[method]) throw new Error(`route table: ${route.method} ${route.path} declared twice`);
    item[method] = operation;
    if (route.head) {
      item['head'] = {
        operationId: route.head.operationId,
        ...security,
        responses: responses(route.head.responses),
      };
    }
  }

  const doc: Json = {
    openapi: '3.1.0',
    info: {
      title: 'Punch session broker',
      version: PUNCH_VERSION,
      description:
        'Brokers SRT rendezvous sessions. Every response carries the header Punch-Version. Errors are ' +
        '`{error, code, message}`; see the package README for the status of each code.',
    },
    servers: [{ url: options.serverUrl }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'Punch token, prefix p_' } },
      schemas: components,
    },
    security: [{ bearer: [] }],
    paths,
  };
  // zod names its definitions under $defs; OpenAPI keeps them under components.schemas.
  return JSON.parse(JSON.stringify(doc).replaceAll('"#/$defs/', '"#/components/schemas/')) as Json;
}

/** Every `:param` of the path is documented as a path parameter, and no other. */
function checkPathParameters(route: RouteDoc): void {
  const inPath = [...route.path.matchAll(/:([A-Za-z_]\w*)/g)].map((m) => m[1]).sort();
  const documented = (route.parameters ?? [])
    .filter((p) => p.in === 'path')
    .map((p) => p.name)
    .sort();
  if (inPath.join() !== documented.join()) {
    throw new Error(
      `route table: ${route.method} ${route.path} documents path parameters [${documented.join()}]`,
    );
  }
}
