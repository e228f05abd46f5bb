import { AppError, sendError } from '@broadcast-ops/core';
import type { FastifyReply } from 'fastify';
import type { ResponseDoc } from '../../protocol/openapi.ts';
import { AGENT_ALIAS, AgentBundle, AgentBundleError, type AgentFile } from '../agent-bundle.ts';
import { fail } from '../http-errors.ts';
import type { RouteContext } from './context.ts';
import { publicRoute, type RouteSpec } from './route-table.ts';

/**
 * The single-file agent (docs/agent.md "Without a checkout"), public and without a token: it holds no
 * secret, and a download URL never carries one (the join link goes on the agent's command line, not to
 * the server). `GET /agent/` describes it (JSON); `GET /agent/punch-agent-<version>.mjs` is this broker's
 * version, `GET /agent/punch-agent.mjs` the same file under a stable name. Bucket `page`.
 */
const notBuilt: ResponseDoc = { description: 'The agent could not be built (the message says why)' };

export function agentRoutes(ctx: RouteContext, bundle?: AgentBundle): RouteSpec[] {
  const agent = bundle ?? new AgentBundle(ctx.deps.logger.child({ component: 'agent-bundle' }));

  const built = async (reply: FastifyReply): Promise<AgentFile | undefined> => {
    try {
      return await agent.get();
    } catch (err) {
      const message =
        err instanceof AgentBundleError
          ? err.message
          : 'the agent bundle could not be built (see the broker log)';
      if (!(err instanceof AgentBundleError)) ctx.deps.logger.error({ err }, 'agent bundle build failed');
      // 503 as before: the bundle may build on a later download.
      void sendError(reply, new AppError('SERVER_ERROR', 503, message));
      return undefined;
    }
  };

  const index = async ({ reply }: { reply: FastifyReply }) => {
    const f = await built(reply);
    if (!f) return reply;
    return reply.header('cache-control', 'no-cache').send({
      version: f.version,
      file: f.file,
      url: `${ctx.deps.baseUrl()}/agent/${f.file}`,
      alias: `${ctx.deps.baseUrl()}/agent/${AGENT_ALIAS}`,
      bytes: f.body.length,
      sha256: f.sha256,
      needs: 'Node.js 20 or later and srt-live-transmit',
      run: `node ${f.file} --link '<join link>' --role sender|receiver --port <UDP port> (--input|--output) <media>`,
    });
  };
  const info = {
    method: 'GET',
    auth: 'public',
    limit: 'page',
    summary:
      'The single-file agent this broker serves: version, file, url, alias, bytes, sha256 (README "The agent without a checkout")',
    responses: {
      '200': {
        description: 'About the agent file',
        content: { 'application/json': { schema: { type: 'object' } } },
      },
      '503': notBuilt,
    },
    handler: index,
  } as const;

  return [
    publicRoute({ ...info, path: '/agent/', operationId: 'agentInfo' }),
    // The same without the slash, not documented twice.
    publicRoute({ ...info, path: '/agent', operationId: null }),

    publicRoute({
      method: 'GET',
      path: '/agent/:file',
      operationId: 'agentDownload',
      summary:
        'The agent as one ES module for `node` (no token): punch-agent-<version>.mjs, or the alias punch-agent.mjs',
      auth: 'public',
      limit: 'page',
      parameters: [{ name: 'file', in: 'path', schema: { type: 'string' } }],
      responses: {
        '200': {
          description: 'The agent',
          content: { 'text/javascript': { schema: { type: 'string' } } },
        },
        '304': { description: 'Unchanged (If-None-Match with its ETag, the SHA-256)' },
        '404': { description: 'Another file or version: the message names the one served' },
        '503': notBuilt,
      },
      handler: async ({ request, params, reply }) => {
        const name = params['file'];
        if (name !== agent.file && name !== AGENT_ALIAS) {
          return sendError(
            reply,
            fail(
              'NOT_FOUND',
              `this broker serves the agent as /agent/${agent.file} (or /agent/${AGENT_ALIAS})`,
            ),
          );
        }
        const f = await built(reply);
        if (!f) return reply;
        const etag = `"${f.sha256}"`;
        void reply
          .header('cache-control', 'no-cache')
          .header('etag', etag)
          .header('x-content-type-options', 'nosniff')
          .header('content-disposition', `attachment; filename="${f.file}"`);
        if (request.headers['if-none-match'] === etag) return reply.status(304).send();
        return reply.type('text/javascript; charset=utf-8').send(f.body);
      },
    }),
  ];
}
