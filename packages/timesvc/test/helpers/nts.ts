import { execFileSync } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '@broadcast-ops/core';
import { requireTool } from '@broadcast-ops/core/testing';
import { configSchema, type TimesvcConfig } from '../../src/config.ts';
import { NtsPeerSecurity, type NtsPeerOptions } from '../../src/io/nts-peer.ts';
import { createTimesvc, type TimesvcService } from '../../src/io/service.ts';

/** A self-signed P-256 certificate for 127.0.0.1 / ::1 / localhost (openssl, as in docs/nts.md "Testing"). */
export function makeCertificate(dir: string, name = 'server', days = 30): { cert: string; key: string } {
  const openssl = requireTool('openssl');
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  execFileSync(
    openssl,
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      String(days),
      '-keyout',
      key,
      '-out',
      cert,
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1',
    ],
    { stdio: 'ignore' },
  );
  return { cert, key };
}

/** timesvc with NTS on loopback ephemeral ports (NTP and NTS-KE), local stratum so it serves time at once. */
export async function startNtsService(
  pair: { cert: string; key: string },
  overrides: { ntp?: Record<string, unknown>; nts?: Record<string, unknown> } = {},
): Promise<{ service: TimesvcService; ntpPort: number; kePort: number; config: TimesvcConfig }> {
  const config = configSchema.parse({
    ntp: { port: 0, interface: '127.0.0.1', local_stratum: true, stratum: 3, ...overrides.ntp },
    nts: {
      enabled: true,
      ke_port: 0,
      cert_path: pair.cert,
      key_path: pair.key,
      cookie_key: 'ab'.repeat(32),
      ...overrides.nts,
    },
    web: { port: 0, bind_address: '127.0.0.1' },
  });
  const service = await createTimesvc(config, silentLogger());
  await service.start();
  const ntpPort = service.server()?.addresses[0]?.port ?? 0;
  const kePort = service.nts()?.ke.port ?? 0;
  return { service, ntpPort, kePort, config };
}

/** chrony.conf lines for an NTS client of 127.0.0.1 (own socket, pid and drift files in `dir`). */
export function chronyNtsClientConf(
  dir: string,
  kePort: number,
  cert: string,
  extra: string[] = [],
): string[] {
  return [
    `server 127.0.0.1 iburst nts ntsport ${kePort} minpoll -2 maxpoll -2`,
    `ntstrustedcerts ${cert}`,
    'nocerttimecheck 1',
    `ntsdumpdir ${dir}`,
    'port 0',
    'cmdport 0',
    `bindcmdaddress ${join(dir, 'run', 'chronyd.sock')}`,
    `pidfile ${join(dir, 'chronyd.pid')}`,
    `driftfile ${join(dir, 'chronyd.drift')}`,
    ...extra,
    '',
  ];
}

/** A free loopback port for a daemon that cannot be told to use port 0 and report it (chronyd). */
export { freePort } from '@broadcast-ops/core/testing';

/** The upstream-peer NTS component for a local NTS-KE server at 127.0.0.1:`kePort` trusting `cert`. */
export function localNtsPeerSecurity(
  kePort: number,
  cert: string,
  extra: Partial<NtsPeerOptions> = {},
): NtsPeerSecurity {
  return new NtsPeerSecurity({
    host: '127.0.0.1',
    kePort,
    caFile: cert,
    logger: silentLogger(),
    now: () => performance.now(),
    ...extra,
  });
}

/** One NTP exchange with 127.0.0.1:`port`: the first datagram back, or undefined after `timeoutMs`. */
export function udpExchange(packet: Buffer, port: number, timeoutMs = 1500): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const s = createSocket('udp4');
    const timer = setTimeout(() => {
      s.close();
      resolve(undefined);
    }, timeoutMs);
    s.on('message', (m) => {
      clearTimeout(timer);
      s.close();
      resolve(m);
    });
    s.send(packet, port, '127.0.0.1');
  });
}

/** A timesvc YAML config at `file`: NTS on loopback ephemeral ports, local stratum, cookie key left unset. */
export function writeNtsConfig(file: string, pair: { cert: string; key: string }): string {
  writeFileSync(
    file,
    [
      'ntp:',
      '  port: 0',
      '  interface: 127.0.0.1',
      '  local_stratum: true',
      'nts:',
      '  enabled: true',
      '  ke_port: 0',
      `  cert_path: ${pair.cert}`,
      `  key_path: ${pair.key}`,
      'web:',
      '  port: 0',
      '  bind_address: 127.0.0.1',
      '',
    ].join('\n'),
  );
  return file;
}
