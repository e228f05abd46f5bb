import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import * as tls from 'node:tls';
import {
  AEAD_AES_SIV_CMAC_256,
  NTS_EXPORTER_LABEL,
  NTS_KE_ALPN,
  aeadKeyLength,
  buildKeRequest,
  exporterContext,
  parseKeResponse,
  scanRecords,
} from '../protocol/nts-ke.ts';

/**
 * NTS-KE client (RFC 8915 §4): TLS 1.3 with ALPN ntske/1, the server certificate verified against the
 * trusted roots (see `trustedRoots`) and the host name or IP address, one request, one bounded response,
 * then the keys exported with the RFC 8915 §5.1 label and context. See docs/nts.md "NTS client".
 */

export interface KeClientOptions {
  host: string;
  port: number;
  /** PEM file of extra trust anchors (nts.ca_path); the system store is used as well. */
  caFile?: string | undefined;
  timeoutMs?: number;
}

export interface KeClientResult {
  aead: number;
  c2s: Buffer;
  s2c: Buffer;
  cookies: Uint8Array[];
  /** Where to send NTP: the Server/Port records, else the KE host and port 123. */
  ntpHost: string;
  ntpPort: number;
}

const MAX_RESPONSE = 65_536;

/**
 * The trust anchors: Node's bundled roots plus the operating system's store (tls.getCACertificates
 * where the Node line has it, else the Debian/RHEL bundle file), plus the configured CA file.
 */
export function trustedRoots(caFile?: string): string[] {
  const roots: string[] = [];
  const get = (tls as { getCACertificates?: (type: string) => string[] }).getCACertificates;
  if (typeof get === 'function') {
    roots.push(...get('default'), ...get('system'));
  } else {
    roots.push(...tls.rootCertificates);
    for (const f of ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt']) {
      try {
        roots.push(readFileSync(f, 'utf8'));
        break;
      } catch {
        /* not on this system */
      }
    }
  }
  if (caFile) roots.push(readFileSync(caFile, 'utf8'));
  return roots;
}

export function ntsKeyExchange(options: KeClientOptions): Promise<KeClientResult> {
  const offered = [AEAD_AES_SIV_CMAC_256];
  return new Promise((resolve, reject) => {
    const socket = tls.connect({
      host: options.host,
      port: options.port,
      ALPNProtocols: [NTS_KE_ALPN],
      minVersion: 'TLSv1.3',
      ca: trustedRoots(options.caFile),
      ...(isIP(options.host) ? {} : { servername: options.host }),
    });
    let settled = false;
    const done = (err: Error | undefined, result?: KeClientResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (err) reject(err);
      else if (result) resolve(result);
    };
    const timer = setTimeout(() => {
      done(new Error(`NTS-KE with ${options.host}:${options.port} timed out`));
    }, options.timeoutMs ?? 10_000);
    const chunks: Buffer[] = [];
    let size = 0;
    socket.on('secureConnect', () => {
      if (socket.alpnProtocol !== NTS_KE_ALPN) {
        done(new Error('NTS-KE server did not negotiate ALPN ntske/1'));
        return;
      }
      socket.write(buildKeRequest(offered));
    });
    socket.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_RESPONSE) {
        done(new Error('NTS-KE response too large'));
        return;
      }
      chunks.push(chunk);
      const scan = scanRecords(Buffer.concat(chunks));
      if (!scan.ok) {
        done(new Error(`NTS-KE response malformed: ${scan.error.message}`));
        return;
      }
      if (!scan.value.complete) return;
      const parsed = parseKeResponse(scan.value.records, offered);
      if (!parsed.ok) {
        done(new Error(`NTS-KE refused: ${parsed.error.message}`));
        return;
      }
      const response = parsed.value;
      const length = aeadKeyLength(response.aead) ?? 32;
      try {
        const c2s = socket.exportKeyingMaterial(
          length,
          NTS_EXPORTER_LABEL,
          exporterContext(response.aead, 'c2s'),
        );
        const s2c = socket.exportKeyingMaterial(
          length,
          NTS_EXPORTER_LABEL,
          exporterContext(response.aead, 's2c'),
        );
        done(undefined, {
          aead: response.aead,
          c2s,
          s2c,
          cookies: response.cookies,
          ntpHost: response.server ?? options.host,
          ntpPort: response.port ?? 123,
        });
      } catch (err) {
        done(err as Error);
      }
    });
    socket.on('error', (err: Error) => {
      done(err);
    });
    socket.on('end', () => {
      done(new Error('NTS-KE server closed before End of Message'));
    });
    socket.on('close', () => {
      done(new Error('NTS-KE connection closed before End of Message'));
    });
  });
}
