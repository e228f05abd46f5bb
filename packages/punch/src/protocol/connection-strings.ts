import { isIPv6 } from 'node:net';
import type { ConnectFormat } from './schemas.ts';

/**
 * Connection strings per output format (spec "GET /api/session/:name/connect"). Policy: emit strings that
 * work in the real applications, keeping all spec-mandated content (other peer's IP and port, rendezvous,
 * latency, passphrase, connect timeout 120000, packet size 1316). The facts each string relies on, with
 * their sources, and the deviations from the spec's literal wording are in docs/connection-strings.md.
 */
export const CONNECT_TIMEOUT_MS = 120_000;
export const PACKET_SIZE = 1316;

export interface ConnectionParams {
  /** The other peer's public IP. */
  remoteIp: string;
  /** The other peer's SRT port. */
  remotePort: number;
  /** This peer's local UDP port (identical to remotePort in a normal deployment, spec "What the service does"). */
  localPort: number;
  latencyMs: number;
  passphrase: string;
  /** This peer's SRT role. */
  role: 'sender' | 'receiver';
}

/** `srt://IP:PORT`, IPv6 literals in brackets (RFC 3986 §3.2.2). */
function srtBase(ip: string, port: number): string {
  return `srt://${isIPv6(ip) ? `[${ip}]` : ip}:${port}`;
}

/** Query for srt-live-transmit (libsrt option names; latency in ms, SRTO_LATENCY). */
export function liveTransmitUri(p: ConnectionParams): string {
  return (
    `${srtBase(p.remoteIp, p.remotePort)}?mode=rendezvous&port=${p.localPort}&latency=${p.latencyMs}` +
    `&passphrase=${p.passphrase}&conntimeo=${CONNECT_TIMEOUT_MS}&payloadsize=${PACKET_SIZE}`
  );
}

/**
 * Said instead of an OBS URL for IPv6 peers: OBS Studio's SRT rendezvous code (its obs-ffmpeg SRT
 * protocol, libsrt with an `AF_INET` local bind) cannot bind an IPv6 local address, so no URL would work.
 */
export const STUDIO_APP_IPV4_ONLY =
  'studio-app (OBS Studio) supports SRT rendezvous over IPv4 only: both peers here use IPv6. ' +
  'Use the live-transmit or pipeline string, or `punch agent`, on this end instead.';

/** OBS Studio ≥ 30 custom server URL: FFmpeg-style µs latency; rendezvous needs localip and localport. */
export function studioAppUri(p: ConnectionParams): string {
  if (isIPv6(p.remoteIp)) return STUDIO_APP_IPV4_ONLY;
  return (
    `${srtBase(p.remoteIp, p.remotePort)}?mode=rendezvous&localip=0.0.0.0` +
    `&localport=${p.localPort}&latency=${p.latencyMs * 1000}&passphrase=${p.passphrase}` +
    `&connect_timeout=${CONNECT_TIMEOUT_MS}`
  );
}

/** GStreamer srtsrc/srtsink URI: latency in ms, libsrt names, explicit local bind (else it binds the remote IP). */
export function pipelineUri(p: ConnectionParams): string {
  return (
    `${srtBase(p.remoteIp, p.remotePort)}?mode=rendezvous&localaddress=${isIPv6(p.remoteIp) ? '::' : '0.0.0.0'}` +
    `&localport=${p.localPort}&latency=${p.latencyMs}&passphrase=${p.passphrase}&conntimeo=${CONNECT_TIMEOUT_MS}`
  );
}

/**
 * transcoder: FFmpeg's own srt:// handler cannot do rendezvous between two hosts: libavformat/libsrt.c calls
 * `srt_bind()` with the address of the URL host, i.e. the remote peer (each side then handshakes with
 * itself). So the transcoder string pipes MPEG-TS between ffmpeg and srt-live-transmit, which binds the
 * local port correctly. srt-live-transmit reads its `file://con` input in chunks of `-chunk` bytes
 * (default 1456, one SRT message each): `-chunk:1316` makes every SRT payload seven whole TS packets;
 * `payloadsize=1316` in the URI only caps the message size and has no effect on a stream input.
 */
function transcoder(p: ConnectionParams): string {
  const uri = liveTransmitUri(p);
  return p.role === 'sender'
    ? `ffmpeg -re -i <INPUT> -c copy -f mpegts - | srt-live-transmit -chunk:${PACKET_SIZE} file://con "${uri}"`
    : `srt-live-transmit "${uri}" file://con | ffmpeg -i - -c copy -f mpegts <OUTPUT>`;
}

/**
 * live-transmit: the sender's UDP input listens on loopback only (`udp://127.0.0.1:<IN_PORT>`), so nobody
 * on the network can inject into the encrypted link; an encoder on another machine needs the address of
 * the interface it sends to instead (docs/connection-strings.md).
 */
function liveTransmit(p: ConnectionParams): string {
  const uri = liveTransmitUri(p);
  return p.role === 'sender'
    ? `srt-live-transmit udp://127.0.0.1:<IN_PORT> "${uri}"`
    : `srt-live-transmit "${uri}" udp://127.0.0.1:<OUT_PORT>`;
}

/**
 * pipeline: `mpegtsmux alignment=7` makes every buffer seven TS packets (1316 bytes), one SRT message each.
 * Without it a receiving `srtsrc ! tsdemux` recorded nothing from a live x264 sender (GStreamer 1.22;
 * docs/connection-strings.md).
 */
function pipeline(p: ConnectionParams): string {
  const uri = pipelineUri(p);
  return p.role === 'sender'
    ? `gst-launch-1.0 <SOURCE> ! mpegtsmux alignment=7 ! srtsink uri="${uri}"`
    : `gst-launch-1.0 srtsrc uri="${uri}" ! tsdemux ! <SINK>`;
}

/** vMix has GUI fields only: one "Field: value" per line (spec wording; vMix labels the mode field "Type"). */
function mixer(p: ConnectionParams): string {
  return [
    `Hostname: ${p.remoteIp}`,
    `Port: ${p.remotePort}`,
    `Local Port: ${p.localPort}`,
    `Latency (ms): ${p.latencyMs}`,
    `Passphrase: ${p.passphrase}`,
    'Mode: Rendezvous',
    'Key Length: 0 (auto)',
  ].join('\n');
}

/** All five formats; key order is stable. */
export function connectionStrings(p: ConnectionParams): Record<ConnectFormat, string> {
  return {
    transcoder: transcoder(p),
    'studio-app': studioAppUri(p),
    mixer: mixer(p),
    pipeline: pipeline(p),
    'live-transmit': liveTransmit(p),
  };
}
