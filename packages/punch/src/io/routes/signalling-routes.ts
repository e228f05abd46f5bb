import { NAME_PARAM } from '../../protocol/openapi.ts';
import { upgradeRoute, type RouteSpec } from './route-table.ts';

/**
 * The signalling WebSocket (README "WebSocket signalling"): an upgrade that io/ws-server.ts answers on the
 * HTTP server, before fastify. Declared here so that the OpenAPI document lists it with the other routes.
 */
export function signallingRoutes(): RouteSpec[] {
  return [
    upgradeRoute({
      method: 'GET',
      path: '/api/ws/:name',
      operationId: 'signalling',
      upgrade: true,
      summary:
        'WebSocket signalling (upgrade; wss:// with the built-in TLS). Token in Authorization: Bearer, in Sec-WebSocket-Protocol as bearer.<token> beside punch.v1 (browsers), or ?token=. ' +
        'Messages, order, close codes: README "WebSocket signalling"',
      auth: 'token',
      parameters: [
        NAME_PARAM,
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
    }),
  ];
}
