import { join } from 'node:path';
import { repoRoot, requireTool, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { referenceFile, restIn, SRT_PORT, UDP_IN } from './agent-netns.ts';
import { SECRET } from './helpers.ts';
import { inNamespace, sh, type Group } from './netns.ts';
import { createRelayTopology, type RelayTopology } from './relay-netns.ts';

/**
 * Broker instances and relays on Redis with real agents, in network namespaces (docs/relay.md "Relays on
 * Redis"): the three namespaces of relay-netns.ts (peer A and peer B each on a link of its own to the
 * server namespace R), where R forwards between the links and has one server address, SERVER, on its
 * loopback: a `redis-server`, the `punch serve` instances and `punch relay` processes all run in R and bind
 * SERVER, so both peers reach every server at the same address and the relay answers each peer from the
 * address it sends to. A and B route everything through R. The direct path between A and B is cut in R's
 * forward chain (nftables: UDP between the two links dropped and counted), as a NAT that never opens a hole
 * would. Names carry the pid; the test removes what it created.
 */
export const SERVER = '198.18.3.1';
const REDIS_PORT = 6379;
const node = process.execPath;
const bin = join(repoRoot, 'packages/punch/bin/punch.mjs');
const fixture = (name: string) => join(repoRoot, 'packages/punch/test/fixtures', name);

export interface SessionView {
  state: string;
  streams: {
    default: {
      state: string;
      path: string;
      relay: { state: string; address: string; ports: { peer_a: number; peer_b: number } };
    };
  };
}

/** A session whose one stream the broker moved to a relay, with its agents connected over it. */
export interface RelayedLink {
  admin: string;
  sender: Group;
  receiver: Group;
  observer: Group;
  /** The receiver's output file. */
  rx: string;
  /** The session's view on the instance it was created on. */
  view: () => Promise<SessionView>;
  /** The agents' and the observer's output, after `servers` (the server processes' output). */
  diag: () => string;
}

export interface RedisNetns {
  topo: RelayTopology;
  dir: string;
  /** `punch serve` on Redis in R, on SERVER:`port`, with extra `KEY=value` settings. */
  broker: (port: number, env?: string) => Group;
  /** `punch relay` on Redis in R, on SERVER, its output (stdout and stderr) to `logFile` only. */
  relay: (logFile: string, env?: string) => Group;
  rest: (port: number) => ReturnType<typeof restIn>;
  /**
   * tshark in R writing every UDP datagram to `pcap` (a 32 MiB capture buffer, so that a starved tshark
   * drops nothing); resolves once it captures.
   */
  capture: (pcap: string) => Promise<Group>;
  /** A shell command in a namespace, killed at cleanup. */
  run: (ns: string, cmd: string) => Group;
  /** The `/metrics` text of the instance on `port` ('' while it does not answer). */
  metrics: (port: number) => string;
  /** udp-feed.mjs in A: the file as 1316-byte datagrams, `perTick` every 10 ms, to the sender's UDP input. */
  feed: (ref: string, perTick: number) => Group;
  /**
   * Creates session `name` on the instance on `ports.session`, runs the observer there, the sender in A
   * (signalling through `ports.sender`) and the receiver in B (through `ports.receiver`), and waits for
   * RELAYING then CONNECTED.
   */
  relayedLink: (
    name: string,
    ports: { session: number; sender: number; receiver: number },
    servers: () => string,
  ) => Promise<RelayedLink>;
  /** UDP datagrams from one peer link to the other that R dropped (the direct rendezvous attempts). */
  directDrops: () => number;
  /** From now on, TCP to SERVER:`from` goes to SERVER:`to` (a load balancer taking a dead backend out). */
  redirect: (from: number, to: number) => void;
  /** An MPEG-TS test pattern of `seconds` at about 1 Mbit/s. */
  reference: (seconds: number) => string;
  cleanup: () => void;
}

export async function createRedisNetns(tag: string): Promise<RedisNetns> {
  requireTool('redis-server');
  const topo = createRelayTopology(tag);
  const tmp = tempDir(`punch-${tag}-`);
  const groups: Group[] = [];
  const run = (ns: string, cmd: string): Group => {
    const g = inNamespace(ns, cmd, tmp.path);
    groups.push(g);
    return g;
  };
  const cleanup = () => {
    for (const g of groups) g.signal('SIGKILL');
    topo.remove();
    tmp.remove();
  };
  try {
    sh('ip', ['-n', topo.r, 'addr', 'add', `${SERVER}/32`, 'dev', 'lo']);
    sh('ip', ['netns', 'exec', topo.r, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    sh('ip', ['-n', topo.a, 'route', 'add', 'default', 'via', topo.relayA]);
    sh('ip', ['-n', topo.b, 'route', 'add', 'default', 'via', topo.relayB]);
    const nft = (...args: string[]) => sh('ip', ['netns', 'exec', topo.r, 'nft', ...args]);
    nft('add', 'table', 'inet', 'punchtest');
    nft('add', 'chain', 'inet', 'punchtest', 'between', '{ type filter hook forward priority 0 ; }');
    nft('add', 'rule', 'inet', 'punchtest', 'between', 'meta', 'l4proto', 'udp', 'counter', 'drop');
    const redis = run(
      topo.r,
      `exec redis-server --port ${REDIS_PORT} --bind 127.0.0.1 --save '' --appendonly no --daemonize no`,
    );
    await waitFor(() => /Ready to accept connections/.test(redis.output()), {
      timeoutMs: 20_000,
      what: () => `redis-server in R\n${redis.output()}`,
    });
    const redisEnv =
      `PUNCH_REDIS_URL=redis://127.0.0.1:${REDIS_PORT} PUNCH_REDIS_PREFIX=${tag}${process.pid}: ` +
      `PUNCH_REDIS_LEASE_MS=3000 LOG_LEVEL=info`;
    const rest = (port: number) => restIn(topo.r, `http://${SERVER}:${port}`);
    const observe = (port: number, session: string, admin: string) =>
      run(topo.r, `exec ${node} ${fixture('ws-observer.mjs')} http://${SERVER}:${port} ${session} ${admin}`);
    const agent = (
      ns: string,
      port: number,
      session: string,
      token: string,
      role: 'sender' | 'receiver',
      media: string,
    ) =>
      run(
        ns,
        `exec ${node} ${bin} agent --broker http://${SERVER}:${port} --session ${session} --token ${token} ` +
          `--role ${role} --port ${SRT_PORT} ${media} --label ${role} --health 1`,
      );
    const relayedLink = async (
      name: string,
      ports: { session: number; sender: number; receiver: number },
      servers: () => string,
    ): Promise<RelayedLink> => {
      const call = rest(ports.session);
      const created = await call('POST', '/api/session', undefined, { name, latency: 200 });
      if (created.status !== 201) throw new Error(`POST /api/session: ${created.status} ${created.text}`);
      const admin = created.json.token as string;
      const tokenFor = async (label: string) =>
        (await call('POST', `/api/session/${name}/token`, admin, { label })).json.token as string;
      const [tSend, tRecv] = [await tokenFor('sender'), await tokenFor('receiver')];
      const observer = observe(ports.session, name, admin);
      const rx = join(tmp.path, `rx-${name}.ts`);
      const receiver = agent(topo.b, ports.receiver, name, tRecv, 'receiver', `--output file:${rx}`);
      const sender = agent(topo.a, ports.sender, name, tSend, 'sender', `--input udp://127.0.0.1:${UDP_IN}`);
      const diag = () =>
        `${servers()}\n--- sender\n${sender.output().slice(-3000)}` +
        `\n--- receiver\n${receiver.output().slice(-4000)}\n--- observer\n${observer.output().slice(-3000)}`;
      for (const state of ['RELAYING', 'CONNECTED']) {
        await waitFor(() => observer.output().includes(`"state":"${state}"`), {
          timeoutMs: 60_000,
          what: () => `${state} at the observer${diag()}`,
        });
      }
      const view = async () => (await call('GET', `/api/session/${name}`, admin)).json as SessionView;
      return { admin, sender, receiver, observer, rx, view, diag };
    };
    return {
      topo,
      dir: tmp.path,
      broker: (port, env = '') =>
        run(
          topo.r,
          `${redisEnv} PUNCH_SECRET=${SECRET} PUNCH_HOST=${SERVER} PUNCH_PORT=${port} ${env} exec ${node} ${bin} serve`,
        ),
      relay: (logFile, env = '') =>
        run(
          topo.r,
          `${redisEnv} PUNCH_RELAY_HOST=${SERVER} PUNCH_RELAY_PUBLIC_ADDRESS=${SERVER} ${env} ` +
            `exec ${node} ${bin} relay > ${logFile} 2>&1`,
        ),
      rest,
      run,
      capture: async (pcap) => {
        const g = run(topo.r, `exec tshark -i any -B 32 -f udp -w ${pcap}`);
        await waitFor(() => /Capturing on/.test(g.output()), {
          timeoutMs: 20_000,
          what: () => `tshark capturing\n${g.output()}`,
        });
        return g;
      },
      metrics: (port) => {
        try {
          return sh('ip', ['netns', 'exec', topo.r, 'curl', '-s', `http://${SERVER}:${port}/metrics`]);
        } catch {
          return '';
        }
      },
      relayedLink,
      feed: (ref, perTick) =>
        run(topo.a, `exec ${node} ${fixture('udp-feed.mjs')} ${ref} ${UDP_IN} ${perTick} 0`),
      directDrops: () => Number(/packets (\d+)/.exec(nft('list', 'table', 'inet', 'punchtest'))?.[1] ?? -1),
      redirect: (from, to) => {
        nft('add', 'table', 'ip', 'punchlb');
        nft('add', 'chain', 'ip', 'punchlb', 'balance', '{ type nat hook prerouting priority -100 ; }');
        nft(
          ...['add', 'rule', 'ip', 'punchlb', 'balance', 'ip', 'daddr', SERVER, 'tcp', 'dport', String(from)],
          ...['dnat', 'to', `${SERVER}:${to}`],
        );
      },
      reference: (seconds) => referenceFile(tmp.path, seconds),
      cleanup,
    };
  } catch (err) {
    cleanup();
    throw err;
  }
}
