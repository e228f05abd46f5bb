import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot, tempDir, waitFor } from '@broadcast-ops/core/testing';
import { SECRET } from './helpers.ts';
import { IP_B, createNamespaces, inNamespace, sh, type Group, type NamespacePair } from './netns.ts';

/**
 * The two-namespace rig of the agent tests (test/netns.ts): the broker in namespace B on B's link
 * address, agents and the admin observer (test/fixtures/ws-observer.mjs) as processes in either
 * namespace, REST calls with curl from namespace B, and an MPEG-TS reference file made by ffmpeg and
 * played byte-exact as 1316-byte datagrams (test/fixtures/udp-feed.mjs).
 */
const execAsync = promisify(execFile);
export const PORT = 8787;
export const BROKER = `http://${IP_B}:${PORT}`;
export const SRT_PORT = 9200;
export const UDP_IN = 9300;
const bin = join(repoRoot, 'packages/punch/bin/punch.mjs');
const fixture = (name: string) => join(repoRoot, 'packages/punch/test/fixtures', name);
const node = process.execPath;

export const count = (text: string, re: RegExp): number => (text.match(re) ?? []).length;
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Rig {
  ns: NamespacePair;
  dir: string;
  startBroker: (env?: string) => Group;
  rest: ReturnType<typeof restIn>;
  observe: (session: string, admin: string) => Group;
  agent: (ns: string, session: string, token: string, role: 'sender' | 'receiver', media: string) => Group;
  /** `punch agent` with these arguments (e.g. `--link …`), in a namespace. */
  agentWith: (ns: string, args: string) => Group;
  feed: (ref: string, seconds: number) => Group;
  /** An MPEG-TS file of `seconds` of test pattern at 1 Mbit/s. */
  reference: (seconds: number) => string;
  cleanup: () => void;
}

/** A REST call to the broker with curl from inside namespace `nsB`: status, parsed JSON and text. */
export function restIn(nsB: string, broker = BROKER) {
  return async (method: string, path: string, token?: string, body?: unknown) => {
    const args = ['netns', 'exec', nsB, 'curl', '-s', '-X', method, '-w', '\n%{http_code}'];
    if (token) args.push('-H', `authorization: Bearer ${token}`);
    if (body !== undefined) args.push('-H', 'content-type: application/json', '-d', JSON.stringify(body));
    const { stdout } = await execAsync('ip', [...args, broker + path]);
    const cut = stdout.lastIndexOf('\n');
    const text = stdout.slice(0, cut);
    return { status: Number(stdout.slice(cut + 1)), json: text ? JSON.parse(text) : undefined, text };
  };
}

export function createRig(tag: string): Rig {
  const tmp = tempDir(`punch-agent-${tag}-`);
  const ns = createNamespaces(tag);
  const groups: Group[] = [];
  const run = (namespace: string, cmd: string): Group => {
    const g = inNamespace(namespace, cmd, tmp.path);
    groups.push(g);
    return g;
  };
  return {
    ns,
    dir: tmp.path,
    startBroker: (env = '') =>
      run(
        ns.b,
        `PUNCH_SECRET=${SECRET} PUNCH_HOST=${IP_B} PUNCH_PORT=${PORT} PUNCH_DB=${join(tmp.path, 'punch.db')} ` +
          `LOG_LEVEL=info ${env} exec ${node} ${bin} serve`,
      ),
    rest: restIn(ns.b),
    observe: (session, admin) =>
      run(ns.b, `exec ${node} ${fixture('ws-observer.mjs')} ${BROKER} ${session} ${admin}`),
    agent: (namespace, session, token, role, media) =>
      run(
        namespace,
        `exec ${node} ${bin} agent --broker ${BROKER} --session ${session} --token ${token} --role ${role} ` +
          `--port ${SRT_PORT} ${media} --label ${role} --health 1`,
      ),
    agentWith: (namespace, args) => run(namespace, `exec ${node} ${bin} agent ${args}`),
    feed: (ref, seconds) =>
      run(ns.a, `exec ${node} ${fixture('udp-feed.mjs')} ${ref} ${UDP_IN} 4 ${seconds}`),
    reference: (seconds) => referenceFile(tmp.path, seconds),
    cleanup: () => {
      for (const g of groups) g.signal('SIGKILL');
      ns.remove();
      tmp.remove();
    },
  };
}

/** An MPEG-TS file in `dir`: `seconds` of ffmpeg's test pattern as MPEG-2 at 1 Mbit/s. */
export function referenceFile(dir: string, seconds: number): string {
  const ref = join(dir, `ref-${seconds}.ts`);
  sh('ffmpeg', [
    ...['-hide_banner', '-loglevel', 'error', '-nostdin', '-f', 'lavfi'],
    ...['-i', 'testsrc=size=320x240:rate=25', '-t', String(seconds)],
    ...['-c:v', 'mpeg2video', '-b:v', '1M', '-f', 'mpegts', ref],
  ]);
  return ref;
}

/**
 * A session `name` created through the broker's REST API (latency 200 ms) with a peer token for a sender and
 * one for a receiver (labelled so): the admin token and the two peer tokens.
 */
export async function senderReceiverSession(
  rest: Rig['rest'],
  name: string,
): Promise<{ admin: string; tSend: string; tRecv: string }> {
  const created = await rest('POST', '/api/session', undefined, { name, latency: 200 });
  if (created.status !== 201) throw new Error(`POST /api/session: ${created.status} ${created.text}`);
  const admin = created.json.token as string;
  const tokenFor = async (label: string) =>
    (await rest('POST', `/api/session/${name}/token`, admin, { label })).json.token as string;
  return { admin, tSend: await tokenFor('sender'), tRecv: await tokenFor('receiver') };
}

/** Wait for the broker's "listening" line. */
export async function listening(broker: Group): Promise<void> {
  await waitFor(() => /punch broker listening/.test(broker.output()), {
    timeoutMs: 30_000,
    what: 'the broker in namespace B to listen',
  });
}

/**
 * Whether `received` is `ref` repeated a whole number of times (udp-feed.mjs loops the file and stops at
 * the end of a pass), byte for byte; the number of passes, or -1.
 */
export function wholePasses(received: Buffer, ref: Buffer): number {
  if (received.length === 0 || received.length % ref.length !== 0) return -1;
  for (let off = 0; off < received.length; off += ref.length) {
    if (!received.subarray(off, off + ref.length).equals(ref)) return -1;
  }
  return received.length / ref.length;
}

export const readBytes = (file: string): Buffer => readFileSync(file);

/** `DELETE` the session as its admin: the exit codes of `agents` (each ends on `session_closed`), or null after 15 s. */
export async function deleteSession(
  rig: Pick<Rig, 'rest'>,
  session: string,
  admin: string,
  agents: Group[],
): Promise<(number | null)[] | null> {
  const del = await rig.rest('DELETE', `/api/session/${session}`, admin);
  if (del.status !== 204) throw new Error(`DELETE /api/session/${session}: ${del.status} ${del.text}`);
  return Promise.race([
    Promise.all(agents.map((g) => g.exited)),
    new Promise<null>((r) => setTimeout(() => r(null), 15_000)),
  ]);
}
