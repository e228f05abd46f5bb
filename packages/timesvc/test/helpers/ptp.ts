import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { writeFileSync } from 'node:fs';
import { requireTool, startProcess, type RunningProcess } from '@broadcast-ops/core/testing';
import type { PtpConfig } from '../../src/io/ptp.ts';

const execFileAsync = promisify(execFile);

/**
 * pmc against a ptp4l in a network namespace, over ptp4l's Unix socket (`-u`, boundary hops 0): one GET per
 * command, the text answer. `client` is pmc's own socket path; `domain` the ptp4l's domainNumber (pmc's
 * management messages must carry it).
 */
export function pmc(at: PmcTarget, ...commands: string[]): string {
  return execFileSync(requireTool('ip'), pmcArgs(at, commands), { encoding: 'utf8', timeout: 10_000 });
}

/**
 * `pmc` without blocking the test's event loop: a test that simulates a device in its own process (the
 * serial GPS receiver of helpers/nmea-receiver.ts) keeps its timers while pmc runs. A synchronous pmc of a
 * second or two on a loaded machine held back its PPS edges and sentences, so the receiver lost PPS and
 * labelled edges a second late.
 */
export async function pmcAsync(at: PmcTarget, ...commands: string[]): Promise<string> {
  const { stdout } = await execFileAsync(requireTool('ip'), pmcArgs(at, commands), {
    encoding: 'utf8',
    timeout: 10_000,
  });
  return stdout;
}

export interface PmcTarget {
  ns: string;
  sock: string;
  client: string;
  domain?: number;
}

function pmcArgs(at: PmcTarget, commands: string[]): string[] {
  return [
    'netns',
    'exec',
    at.ns,
    requireTool('pmc'),
    '-u',
    '-b',
    '0',
    '-d',
    String(at.domain ?? 0),
    '-s',
    at.sock,
    '-i',
    at.client,
    ...commands,
  ];
}

/** One `name value` field of a pmc answer. */
export function field(out: string, name: string): string | undefined {
  return new RegExp(`^\\s*${name}\\s+(\\S+)`, 'm').exec(out)?.[1];
}

/**
 * timesvc's configuration for a PTP interop test: NTP on loopback (port 0) with the given `ntp:` lines, the
 * GPSDO (the dummy unless `gpsdoType`), PTP on `iface` with the given `ptp:` lines, the web UI on loopback (port 0 unless `web` lines are given).
 */
export function writePtpConfig(
  path: string,
  iface: string,
  o: { ptp?: string[]; gpsdo?: string[]; web?: string[]; ntp?: string[]; gpsdoType?: string } = {},
): void {
  const lines = ['ntp:', '  port: 0', '  interface: 127.0.0.1', '  ref_id: GPS', ...(o.ntp ?? [])];
  lines.push('gpsdo:', '  enabled: true', `  type: ${o.gpsdoType ?? 'dummy'}`, ...(o.gpsdo ?? []));
  lines.push('ptp:', '  enabled: true', `  interface: ${iface}`, ...(o.ptp ?? []));
  lines.push('web:', ...(o.web ?? ['  port: 0', '  bind_address: 127.0.0.1']), '');
  writeFileSync(path, lines.join('\n'));
}

/**
 * linuxptp's ptp4l in namespace `ns` on `iface`: UDP/IPv4, software timestamps, `--free_running=1` (it never
 * touches a clock: a rule of this lab), messages on stdout, its management socket at `sock`; `args` add the
 * role (`-s` slave only), the delay mechanism (`-E`/`-P`) and any configuration option.
 */
export function startPtp4l(ns: string, iface: string, sock: string, args: string[]): RunningProcess {
  return startProcess(requireTool('ip'), [
    'netns',
    'exec',
    ns,
    requireTool('ptp4l'),
    '-S',
    '-4',
    '-i',
    iface,
    '-m',
    '--free_running=1',
    '--tx_timestamp_timeout=50',
    `--uds_address=${sock}`,
    ...args,
  ]);
}

/** The announcer's configuration on loopback for in-process tests: fast intervals, everything else plain. */
export function loopbackPtpConfig(over: Partial<PtpConfig> = {}): PtpConfig {
  return {
    interface: 'lo',
    domain: 0,
    priority1: 128,
    priority2: 128,
    clock_class: 248,
    clock_accuracy: 0xfe,
    log_announce_interval: -3,
    log_sync_interval: -3,
    log_min_delay_req_interval: 0,
    transport_mode: 'multicast',
    delay_mechanism: 'E2E',
    profile: 'default',
    two_step_flag: true,
    dscp_event: 0,
    dscp_general: 0,
    announce_receipt_timeout: 2,
    listen_only: false,
    ...over,
  };
}
