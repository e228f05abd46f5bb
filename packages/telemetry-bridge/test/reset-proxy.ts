/**
 * A TCP proxy in front of the bridge that can break connections the way networks do: reset a connection
 * after N bytes towards the client (a drop in the middle of a snapshot or replay), or strand one (the
 * client's side is reset while the bridge's side stays open and silent: a half-open socket that lingers).
 * Plans apply to connections in the order they arrive; later ones pass through.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export interface ProxyPlan {
  /** Reset both sides once this many bytes went from the bridge to the client. */
  resetAfterBytes?: number;
}

export class ResetProxy {
  readonly #server: Server;
  readonly #plans: ProxyPlan[] = [];
  readonly #pairs: { client: Socket; upstream: Socket }[] = [];
  resets = 0;
  port = 0;

  constructor(targetPort: number) {
    this.#server = createServer((client) => {
      const plan = this.#plans.shift() ?? {};
      const upstream = createConnection({ host: '127.0.0.1', port: targetPort });
      const pair = { client, upstream };
      this.#pairs.push(pair);
      let down = 0;
      client.on('error', () => undefined);
      upstream.on('error', () => undefined);
      client.on('data', (d: Buffer) => upstream.write(d));
      upstream.on('data', (d: Buffer) => {
        if (plan.resetAfterBytes !== undefined && down + d.length >= plan.resetAfterBytes) {
          client.write(d.subarray(0, Math.max(0, plan.resetAfterBytes - down)));
          this.resets++;
          client.resetAndDestroy();
          upstream.resetAndDestroy();
          return;
        }
        down += d.length;
        client.write(d);
      });
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((r) => this.#server.listen(0, '127.0.0.1', r));
    this.port = (this.#server.address() as { port: number }).port;
    return this.port;
  }

  get url(): string {
    return `ws://127.0.0.1:${this.port}/`;
  }

  plan(...plans: ProxyPlan[]): void {
    this.#plans.push(...plans);
  }

  /** Reset the client side of the newest connection and leave the bridge side open and silent. */
  strandLast(): void {
    const pair = this.#pairs.at(-1);
    if (!pair) throw new Error('no connection to strand');
    pair.upstream.removeAllListeners('data');
    pair.upstream.removeAllListeners('close');
    pair.upstream.on('data', () => undefined);
    pair.client.removeAllListeners('close');
    pair.client.resetAndDestroy();
  }

  async close(): Promise<void> {
    for (const p of this.#pairs) {
      p.client.destroy();
      p.upstream.destroy();
    }
    await new Promise<void>((r) => this.#server.close(() => r()));
  }
}
