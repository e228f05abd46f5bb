/**
 * The anchor of bench/punch-http: a bare fastify route answering POST /api/session with a fixed 201 body of
 * the same shape and size as the broker's create response (JSON body parsed, nothing else done).
 * Usage: node --import tsx bench/punch-http/bare-server.ts <port>
 */
import Fastify from 'fastify';

const FIXED = {
  session: 'bench-000000',
  token:
    'p_eyJzZXNzaW9uIjoiYmVuY2gtMDAwMDAwIiwicm9sZSI6ImFkbWluIiwic3RyZWFtIjpudWxsLCJleHAiOjE3OTU0MDAyNDAsInNpZCI6IkFBQUFBQUFBQUFBQSJ9.eWesqmthVdojiipZuNwZI20zdEdeYcdG4gyUcmHZZls',
  url: 'http://127.0.0.1:8787/s/bench-000000',
  qr: 'http://127.0.0.1:8787/s/bench-000000/qr',
  streams: ['default'],
  latency: 200,
  ttl: 1800,
  state: 'WAITING',
  created: '2026-11-23T01:47:19.081Z',
  expiresAt: 1795400240000,
};

const app = Fastify({ logger: false });
app.post('/api/session', (_request, reply) => {
  void reply.code(201).send(FIXED);
});
app.get('/api/health', () => ({ status: 'ok' }));
await app.listen({ host: '127.0.0.1', port: Number(process.argv[2] ?? 0) });
process.on('SIGTERM', () => {
  void app.close().then(() => process.exit(0));
});
