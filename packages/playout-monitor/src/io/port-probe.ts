/** A configuration change is tried before it is saved: can its new ports be bound (playout-service.ts)? */
import { createSocket } from 'node:dgram';
import { createServer, isIP } from 'node:net';
import { fail } from '../errors.ts';

/** Bind `port` for a moment; refuse the configuration (409, nothing saved) when that fails. */
export async function probe(kind: 'udp' | 'tcp', address: string, port: number, what: string): Promise<void> {
  try {
    if (kind === 'udp') {
      const socket = createSocket(isIP(address) === 6 ? 'udp6' : 'udp4');
      await new Promise<void>((resolve, reject) => {
        socket.once('error', reject);
        socket.bind(port, address, () => resolve());
      }).finally(() => {
        try {
          socket.close();
        } catch {
          // never bound
        }
      });
    } else {
      const server = createServer();
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, address, () => resolve());
      });
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw fail('CONFIG_NOT_APPLICABLE', `${what} cannot be bound on ${address} (${code}); nothing was saved`);
  }
}
