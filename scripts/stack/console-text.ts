/**
 * What the launcher prints, pure: the ports another program holds, and the list of running services with
 * their URLs and ports (the landing page first).
 */
import type { Claim } from './plan.ts';
import type { StackService, UrlEntry } from './services.ts';

/** The ports in use by another program, each with the service that wants it, then the way out. */
export function busyPortsText(busy: readonly Claim[], moveHint: string): string {
  const w = Math.max(...busy.map((c) => `${c.port}/${c.proto}`.length));
  const sw = Math.max(...busy.map((c) => c.service.length));
  return [
    'start-stack: ports in use by another program:',
    ...busy.map((c) => `  ${`${c.port}/${c.proto}`.padEnd(w)}  ${c.service.padEnd(sw)}  ${c.label}`),
    moveHint,
  ].join('\n');
}

export interface ShownService {
  service: StackService;
  pid: number | undefined;
  up: boolean;
}

/**
 * The console's list once the services were asked for their health: the landing page first, then each
 * service with its state, pid and log, its URLs (`withToken` adds a page's token, console only) and ports.
 */
export function runningText(
  shown: readonly ShownService[],
  landingUrl: string,
  offset: number,
  withToken: (u: UrlEntry) => string,
): string {
  // Aligned output: one label column wide enough for the longest label.
  const labels = shown.flatMap((s) =>
    (s.service.start.urls ?? []).filter((u) => !u.template).map((u) => u.label),
  );
  const labelWidth = Math.max('Landing page'.length, ...labels.map((l) => l.length)) + 2;
  const nameWidth = Math.max(...shown.map((s) => s.service.name.length)) + 2;
  const lines = [
    `\nBroadcast-ops toolkit is running${offset ? ` (ports moved by ${offset})` : ''}. Start here:\n`,
    `  ${'Landing page'.padEnd(labelWidth + 2)}${landingUrl}\n`,
  ];
  for (const s of shown) {
    const name = s.service.name;
    lines.push(
      `  ${name.padEnd(nameWidth)}${s.up ? 'up' : 'NOT READY yet'}  (pid ${s.pid}, log data/logs/${name}.log)`,
    );
    for (const u of s.service.start.urls ?? [])
      if (!u.template) lines.push(`    ${u.label.padEnd(labelWidth)}${withToken(u)}`);
    for (const p of s.service.start.ports ?? [])
      if (p.port !== undefined)
        lines.push(
          `    ${p.label.padEnd(labelWidth)}${p.proto ?? ''} ${p.port}${p.outbound ? ' (sent to)' : ''}`,
        );
  }
  lines.push('\nPress Ctrl-C to stop.');
  return lines.join('\n');
}
