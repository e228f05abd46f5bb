import { z } from 'zod';
import {
  PUNCH_VERSION,
  connectResponse,
  createSessionResponse,
  errorBody,
  healthResponse,
  inviteList,
  sessionView,
  tokenResponse,
  type Schemas,
} from './schemas.ts';

/**
 * OpenAPI 3.1 document generated from the zod schemas that validate the requests (schemas.ts), so the
 * published contract and the validation are one source. JSON Schema 2020-12 is OpenAPI 3.1's dialect.
 */
type Json = Record<string, unknown>;

export function buildOpenApi(schemas: Schemas, options: { serverUrl: string; maxBodyBytes: number }): Json {
  const components: Record<string, unknown> = {};
  const convert = (schema: z.ZodType, io: 'input' | 'output'): Json => {
    const js = z.toJSONSchema(schema, { io, target: 'draft-2020-12' }) as Json;
    const defs = (js['$defs'] ?? {}) as Record<string, unknown>;
    for (const [k, v] of Object.entries(defs)) components[k] = v;
    const { $schema: _s, $defs: _d, ...rest } = js;
    return rest;
  };
  const json = (schema: z.ZodType, io: 'input' | 'output' = 'output') => ({
    content: { 'application/json': { schema: convert(schema, io) } },
  });
  const err = (description: string) => ({ description, ...json(errorBody) });
  const versionHeader = {
    'Punch-Version': {
      description: 'Protocol version, major.minor',
      schema: { type: 'string', const: PUNCH_VERSION },
    },
  };
  const nameParam = {
    name: 'name',
    in: 'path',
    required: true,
    schema: convert(z.string().max(64), 'input'),
  };
  const connectQuery = convert(schemas.connectQuery, 'input');
  const common = {
    '401': err('UNAUTHORIZED (code AUTH_FAILED): token missing, malformed or forged'),
    '403': err(
      'FORBIDDEN (code AUTH_FAILED): token for another session or stream, or a peer token where admin is needed',
    ),
    '410': err('SESSION_EXPIRED: token expired, or the session is closed or unknown'),
    '429': {
      ...err('RATE_LIMITED (header Retry-After, seconds)'),
      headers: { 'Retry-After': { schema: { type: 'integer' } } },
    },
    '500': err('SERVER_ERROR: unexpected failure (logged; no internals in the message)'),
  };
  const storeFailed = {
    ...err('STORE_UNAVAILABLE: the change could not be saved (nothing changed; header Retry-After)'),
    headers: { 'Retry-After': { schema: { type: 'integer' } } },
  };
  const html = (description: string) => ({
    description,
    content: { 'text/html': { schema: { type: 'string' } } },
  });
  const pageQuery = {
    name: 't',
    in: 'query',
    required: false,
    description: 'Access token; a peer token is carried into the QR code, an admin token never is',
    schema: { type: 'string' },
  };

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
    },
    security: [{ bearer: [] }],
    paths: {
      '/api/session': {
        post: {
          operationId: 'createSession',
          security: [],
          summary: 'Create a session; the response carries the admin token (once)',
          requestBody: { required: true, ...json(schemas.createSessionRequest, 'input') },
          responses: {
            '201': { description: 'Created', headers: versionHeader, ...json(createSessionResponse) },
            '400': err('INVALID_REQUEST (code INVALID_MESSAGE): bad field or non-JSON body'),
            '413': err(`PAYLOAD_TOO_LARGE (code INVALID_MESSAGE): body over ${options.maxBodyBytes} bytes`),
            '415': err('UNSUPPORTED_MEDIA_TYPE (code INVALID_MESSAGE): Content-Type is not application/json'),
            '403': err('TURNSTILE_FAILED'),
            '409': err('SESSION_EXISTS'),
            '429': common['429'],
            '500': common['500'],
            '503': err('SESSION_LIMIT or STORE_UNAVAILABLE (header Retry-After)'),
          },
        },
      },
      '/api/session/{name}': {
        get: {
          operationId: 'getSession',
          parameters: [nameParam],
          responses: { '200': { description: 'Session view', ...json(sessionView) }, ...common },
        },
        patch: {
          operationId: 'extendSession',
          summary: 'Extend a live session (admin token): it expires ttl seconds from now; tokens stay valid',
          parameters: [nameParam],
          requestBody: { required: true, ...json(schemas.extendRequest, 'input') },
          responses: {
            '200': { description: 'Extended; the session view', ...json(sessionView) },
            '400': err(
              'INVALID_REQUEST (code INVALID_MESSAGE): ttl missing, not an integer, or above the maximum',
            ),
            ...common,
            '503': storeFailed,
          },
        },
        delete: {
          operationId: 'closeSession',
          parameters: [nameParam],
          responses: {
            '204': { description: 'Closed; peers receive session_closed' },
            ...common,
            '503': storeFailed,
          },
        },
      },
      '/api/session/{name}/connect': {
        get: {
          operationId: 'connectionStrings',
          summary: 'Connection strings for both peers (admin token: they contain the passphrase)',
          parameters: [
            nameParam,
            ...Object.entries((connectQuery['properties'] ?? {}) as Record<string, Json>).map(
              ([n, schema]) => ({
                name: n,
                in: 'query',
                required: false,
                schema,
              }),
            ),
          ],
          responses: {
            '200': { description: 'Strings per format', ...json(connectResponse) },
            '400': err('INVALID_REQUEST (code INVALID_MESSAGE): unknown stream or role'),
            '409': err('STREAM_NOT_READY: both peers must register first'),
            ...common,
          },
        },
      },
      '/api/session/{name}/health': {
        get: {
          operationId: 'streamHealth',
          summary:
            "One stream's health (docs/health.md): verdict, advice, alarms, each end's figures over 10 s and 60 s by role, and 10 minutes of reports per end",
          parameters: [
            nameParam,
            { name: 'stream', in: 'query', required: false, schema: { type: 'string' } },
          ],
          responses: {
            '200': {
              description:
                '{session, latency, stream, assessment (null before any report), history: {sender?, receiver?}}',
              content: { 'application/json': { schema: { type: 'object' } } },
            },
            '400': err('INVALID_REQUEST (code INVALID_MESSAGE): unknown stream'),
            ...common,
          },
        },
      },
      '/api/session/{name}/token': {
        post: {
          operationId: 'issuePeerToken',
          summary: 'Issue a peer token scoped to one stream (admin only)',
          parameters: [nameParam],
          requestBody: { required: false, ...json(schemas.tokenRequest, 'input') },
          responses: {
            '201': { description: 'Peer token', ...json(tokenResponse) },
            '400': err(
              'INVALID_REQUEST (code INVALID_MESSAGE): unknown stream, or the session holds its maximum of invites',
            ),
            ...common,
          },
        },
      },
      '/api/session/{name}/invites': {
        get: {
          operationId: 'listInvites',
          summary: 'Every peer token issued for the session, oldest first, with its state (admin only)',
          parameters: [nameParam],
          responses: { '200': { description: 'Invites', ...json(inviteList) }, ...common },
        },
      },
      '/api/session/{name}/invites/{id}': {
        delete: {
          operationId: 'revokeInvite',
          summary:
            'Revoke an invite (admin only): its token is refused from now on and its connections are closed (4401)',
          parameters: [
            nameParam,
            { name: 'id', in: 'path', required: true, schema: { type: 'string' }, description: 'Invite id' },
          ],
          responses: {
            '204': { description: 'Revoked (also when it already was)' },
            '400': err('INVALID_REQUEST (code INVALID_MESSAGE): no such invite in this session'),
            ...common,
          },
        },
      },
      '/api/health': {
        get: {
          operationId: 'health',
          security: [],
          responses: {
            '200': { description: 'Up, store saving', headers: versionHeader, ...json(healthResponse) },
            '503': { description: 'Degraded: the store cannot save changes', ...json(healthResponse) },
          },
        },
        head: {
          operationId: 'healthHead',
          security: [],
          responses: { '200': { description: 'Up' }, '503': { description: 'Degraded' } },
        },
      },
      '/metrics': {
        get: {
          operationId: 'metrics',
          security: [],
          summary: 'Prometheus metrics (text exposition format 0.0.4)',
          responses: {
            '200': { description: 'Metrics', content: { 'text/plain': { schema: { type: 'string' } } } },
          },
        },
      },
      '/s/{name}': {
        get: {
          operationId: 'sessionPage',
          security: [],
          summary: 'Join page (HTML, mobile-first); the same prompt for unknown names without a valid token',
          parameters: [nameParam, pageQuery],
          responses: {
            '200': html('Join page'),
            '410': html('The token is genuine but its session is closed or expired'),
            '429': common['429'],
          },
        },
      },
      '/s/{name}/qr': {
        get: {
          operationId: 'sessionQr',
          security: [],
          summary: 'SVG QR code of the join page URL (with ?t= only for a valid peer token)',
          parameters: [nameParam, pageQuery],
          responses: {
            '200': { description: 'QR code', content: { 'image/svg+xml': { schema: { type: 'string' } } } },
            '429': common['429'],
          },
        },
      },
      '/agent/': {
        get: {
          operationId: 'agentInfo',
          security: [],
          summary:
            'The single-file agent this broker serves: version, file, url, alias, bytes, sha256 (README "The agent without a checkout")',
          responses: {
            '200': {
              description: 'About the agent file',
              content: { 'application/json': { schema: { type: 'object' } } },
            },
            '503': { description: 'The agent could not be built (the message says why)' },
          },
        },
      },
      '/agent/{file}': {
        get: {
          operationId: 'agentDownload',
          security: [],
          summary:
            'The agent as one ES module for `node` (no token): punch-agent-<version>.mjs, or the alias punch-agent.mjs',
          parameters: [{ name: 'file', in: 'path', required: true, schema: { type: 'string' } }],
          responses: {
            '200': {
              description: 'The agent',
              content: { 'text/javascript': { schema: { type: 'string' } } },
            },
            '304': { description: 'Unchanged (If-None-Match with its ETag, the SHA-256)' },
            '404': { description: 'Another file or version: the message names the one served' },
            '503': { description: 'The agent could not be built (the message says why)' },
          },
        },
      },
      '/api/ws/{name}': {
        get: {
          operationId: 'signalling',
          summary:
            'WebSocket signalling (upgrade; wss:// with the built-in TLS). Token in Authorization: Bearer, in Sec-WebSocket-Protocol as bearer.<token> beside punch.v1 (browsers), or ?token=. ' +
            'Messages, order, close codes: README "WebSocket signalling"',
          parameters: [
            nameParam,
            {
              name: 'token',
              in: 'query',
              required: false,
              schema: { type: 'string' },
              description: 'Access token',
            },
          ],
          responses: {
            '101': {
              description:
                'Switching Protocols. A bad token is answered after the upgrade: `error` AUTH_FAILED or SESSION_EXPIRED, then close 4401/4403/4410',
            },
            '404': { description: 'Not a signalling path' },
            '429': { description: 'Per-client WebSocket connect limit; Retry-After' },
          },
        },
      },
      '/api/openapi.json': {
        get: { operationId: 'openapi', security: [], responses: { '200': { description: 'This document' } } },
      },
    },
  };
  (doc['components'] as Json)['schemas'] = components;
  // zod names its definitions under $defs; OpenAPI keeps them under components.schemas.
  return JSON.parse(JSON.stringify(doc).replaceAll('"#/$defs/', '"#/components/schemas/')) as Json;
}
