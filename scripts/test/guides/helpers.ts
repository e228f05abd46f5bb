// Shared by the task-guide walks in this folder (no tests here): the guide's text cut into steps and code
// snippets, and the services started as a user starts them (the compiled bins through npx, on plain node).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  repoRoot,
  requireTool,
  startProcess,
  waitFor,
  type RunningProcess,
} from '@broadcast-ops/core/testing';
import { killQuietly, userEnv } from '../npm-start-helpers.ts';

export interface Guide {
  file: string;
  text: string;
  /** The text of numbered step n (`1. **Try it.** …` up to the next step or heading). */
  step: (n: number) => string;
  /** Inline code spans of a piece of the guide, whitespace (line breaks included) collapsed to one space. */
  inline: (part?: string) => string[];
  /** Fenced code blocks with their info string. */
  fenced: (part?: string) => { lang: string; code: string }[];
}

export function readGuide(name: string): Guide {
  const file = join('docs/guides', name);
  const text = readFileSync(join(repoRoot, file), 'utf8');
  const fencedOf = (part = text): { lang: string; code: string }[] =>
    [...part.matchAll(/^( *)```(\w*)\n([\s\S]*?)^\1```$/gm)].map((m) => ({
      lang: m[2] ?? '',
      code: (m[3] ?? '').replace(new RegExp(`^${m[1] ?? ''}`, 'gm'), ''),
    }));
  const withoutFences = (part: string): string => part.replace(/^( *)```\w*\n[\s\S]*?^\1```$/gm, '');
  return {
    file,
    text,
    step: (n) => {
      const m = new RegExp(String.raw`^${n}\. [\s\S]*?(?=^\d+\. |^#|^\S|(?![\s\S]))`, 'm').exec(text);
      if (!m) throw new Error(`${file}: no step ${n}`);
      return m[0];
    },
    inline: (part = text) =>
      [...withoutFences(part).matchAll(/`([^`]+)`/g)].map((m) => (m[1] ?? '').replace(/\s+/g, ' ').trim()),
    fenced: fencedOf,
  };
}

/** The one inline code span of `part` that matches, or a failure naming what the guide no longer says. */
export function inlineMatching(guide: Guide, part: string, pattern: RegExp): string {
  const found = guide.inline(part).filter((c) => pattern.test(c));
  if (found.length !== 1) {
    throw new Error(
      `${guide.file}: expected one inline code span matching ${pattern}, found ${found.length}`,
    );
  }
  return found[0] ?? '';
}

/** A command line from a guide as argv (the guide's commands use no quoting), with words replaced. */
export function argv(command: string, replace: Record<string, string> = {}): string[] {
  return command
    .split(' ')
    .filter(Boolean)
    .map((w) => replace[w] ?? w);
}

/** Dotted paths of every leaf and object in a parsed config (`companion.enabled`, `ntp.upstream_peers`). */
export function keyPaths(value: unknown, prefix = ''): Set<string> {
  const out = new Set<string>();
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return out;
  for (const [k, v] of Object.entries(value)) {
    const path = prefix ? `${prefix}.${k}` : k;
    out.add(path);
    for (const p of keyPaths(v, path)) out.add(p);
  }
  return out;
}

/** A user's environment (this Node first on PATH, no `source` condition: the bins run dist/ on plain node). */
export function plainEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return { ...userEnv(), ...extra };
}

const BUILD_LOCK = join(
  tmpdir(),
  `broadcast-ops-guides-build-${Buffer.from(repoRoot).toString('hex').slice(-24)}`,
);

/**
 * `npm ci` builds dist/ (the prepare script runs scripts/build.mjs); the walks run what it built. The build is
 * skipped when up to date; a lock keeps two guide files from rebuilding (and emptying dist/) at once.
 */
export async function ensureBuilt(): Promise<void> {
  await waitFor(
    () => {
      try {
        mkdirSync(BUILD_LOCK);
        writeFileSync(join(BUILD_LOCK, 'pid'), String(process.pid));
        return true;
      } catch {
        // A lock left by a test process that died is taken over.
        const pid = Number(readFileSyncOr(join(BUILD_LOCK, 'pid')));
        if (pid > 0 && !alive(pid)) rmLock();
        return false;
      }
    },
    { timeoutMs: 300_000, intervalMs: 200, what: 'the build lock' },
  );
  try {
    const r = spawnSync(process.execPath, [join(repoRoot, 'scripts/build.mjs')], {
      cwd: repoRoot,
      env: plainEnv(),
      encoding: 'utf8',
      timeout: 600_000,
    });
    if (r.status !== 0) throw new Error(`scripts/build.mjs failed: ${r.stdout}${r.stderr}`);
  } finally {
    rmLock();
  }
}

function readFileSyncOr(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function rmLock(): void {
  try {
    rmSync(BUILD_LOCK, { recursive: true, force: true });
  } catch {
    /* gone */
  }
}

/** A long-running command in its own process group (setsid), so that npx, its shell and node all end together. */
export interface Service extends RunningProcess {
  /** SIGTERM to the group, SIGKILL after 15 s; resolves when the group leader has exited. */
  end: () => Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Process groups started and not yet ended: killed when the test process exits, whatever a test left behind
 * (each test also ends its own in `finally`). No signal handler: one would keep a wedged test process alive.
 */
const groups = new Set<number>();
process.once('exit', () => {
  for (const pid of groups) killQuietly(-pid, 'SIGKILL');
});

export function startCommand(args: string[], env: NodeJS.ProcessEnv = {}, cwd = repoRoot): Service {
  requireTool('setsid');
  const p = startProcess('setsid', args, { env: plainEnv(env), cwd });
  const pid = p.child.pid ?? 0;
  if (pid > 0) groups.add(pid);
  void p.exited.then(() => {
    // The leader is gone; anything it left in its group is ended with it.
    killQuietly(-pid, 'SIGKILL');
    groups.delete(pid);
  });
  return {
    ...p,
    end: async () => {
      if (pid > 0) killQuietly(-pid, 'SIGTERM');
      const timer = setTimeout(() => killQuietly(-pid, 'SIGKILL'), 15_000);
      const r = await p.exited;
      clearTimeout(timer);
      killQuietly(-pid, 'SIGKILL'); // anything of the group still left
      return r;
    },
  };
}

/** Ends every service given, in reverse order of start, whatever happened before. */
export async function endAll(services: Service[]): Promise<void> {
  for (const s of [...services].reverse()) await s.end();
}

/** Runs a command to its end (in its own process group, killed with it on timeout). */
export function runCommand(
  args: string[],
  options: { env?: NodeJS.ProcessEnv; input?: string; timeoutMs?: number; cwd?: string } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  requireTool('setsid');
  return new Promise((resolve) => {
    const child = spawn('setsid', args, {
      cwd: options.cwd ?? repoRoot,
      env: { ...process.env, ...plainEnv(options.env) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    const cap = 4 * 1024 * 1024;
    child.stdout.on('data', (d: Buffer) => {
      if (stdout.length < cap) stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      if (stderr.length < cap) stderr += d.toString();
    });
    child.stdin.end(options.input ?? '');
    if (child.pid) groups.add(child.pid);
    const timer = setTimeout(() => killQuietly(-(child.pid ?? 0), 'SIGKILL'), options.timeoutMs ?? 120_000);
    // 'exit' can come before the last of the output has been read (seen on a loaded machine: a curl's whole
    // answer missing); the streams' end is awaited too, but not for ever, since a command may leave a
    // background process holding them open.
    const ended = (stream: NodeJS.ReadableStream): Promise<void> =>
      new Promise((done) => stream.once('close', () => done()));
    const drained = Promise.all([ended(child.stdout), ended(child.stderr)]);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (child.pid) groups.delete(child.pid);
      const grace = new Promise((done) => setTimeout(done, 5000).unref());
      void Promise.race([drained, grace]).then(() =>
        resolve({ code: code ?? (signal ? 128 : null), stdout, stderr }),
      );
    });
  });
}

/** The JSON log line of a service whose `msg` matches, once it has been printed. */
export async function logLine(
  p: RunningProcess,
  msg: RegExp,
  timeoutMs = 60_000,
): Promise<Record<string, unknown>> {
  await p.waitForOutput(new RegExp(`"msg":"${msg.source}`), timeoutMs);
  for (const line of p.output().split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const o = JSON.parse(line) as Record<string, unknown>;
      if (typeof o['msg'] === 'string' && msg.test(o['msg'])) return o;
    } catch {
      /* not a log line */
    }
  }
  throw new Error(`no log line ${msg}\n${p.output().slice(-4000)}`);
}

/** Status and parsed body (the text when it is not JSON); the caller states the shape it expects. */
export async function getJson(
  url: string,
  init: RequestInit = {},
): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(30_000) });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON: the text */
  }
  return { status: res.status, body };
}

/** Repository paths a guide names (packages/…, docs/…, config/…, examples/…, scripts/…, deploy/…). */
export function repoPaths(guide: Guide): string[] {
  const re = /(?<![\w/.-])(?:packages|docs|config|examples|scripts|deploy)\/[\w./@-]*\w/g;
  return [...new Set([...guide.text.matchAll(re)].map((m) => m[0]))];
}

/** Of these paths, those a fresh clone would not have: not tracked by git (or not there at all). */
export function notInClone(paths: string[]): string[] {
  return paths.filter(
    (p) => spawnSync('git', ['ls-files', '--error-unmatch', '--', p], { cwd: repoRoot }).status !== 0,
  );
}
