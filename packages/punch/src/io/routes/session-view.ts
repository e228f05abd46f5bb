import type { SessionBroker } from '../../domain/broker.ts';
import { liveHealth } from '../../domain/health.ts';
import {
  pathOf,
  type PeerClaim,
  type SessionRecord,
  type StreamRecord,
  type StreamRelay,
} from '../../domain/session.ts';
import { relayPathView, type RelayPathReport } from '../../protocol/relay-path-view.ts';
import { iso } from './context.ts';

/**
 * The public part of a claim: the spec's view shows the address and label, never `meta` or `clientId`;
 * `present` (an added field) says whether its holder is connected now (README "Presence").
 */
function peerView(p: PeerClaim | null, present: boolean, mediaOnly: boolean) {
  if (!p) return null;
  const view = { ip: p.ip, port: p.port, label: p.label, role: p.role, present };
  // README "State from media": the link is up on the other end's word while this end's signalling is lost.
  return mediaOnly ? { ...view, signalling: 'lost, media reported by the other end' } : view;
}

/**
 * A stream's relay in the view: its state, the reason when refused or ended, its address and ports, and what
 * the relay measured while allocated (docs/relay.md "What the relay measures"; null before its first reading).
 */
function relayView(r: StreamRelay, figures: RelayPathReport | undefined, now: number) {
  return {
    state: r.state,
    reason: r.reason,
    address: r.address,
    ports: r.ports ? { peer_a: r.ports[0], peer_b: r.ports[1] } : null,
    since: iso(r.since),
    ...(r.state === 'allocated' ? { measured: figures ? relayPathView(figures, now) : null } : {}),
  };
}

/**
 * A session as `GET` and `PATCH /api/session/:name` answer it (spec "Endpoints"): every stream, or only
 * `onlyStream` for a token bound to one, with its peers, path, relay and current health.
 */
export function sessionViewOf(
  session: SessionRecord,
  onlyStream: string | null,
  broker: Pick<SessionBroker, 'isPresent' | 'isOvertime' | 'mediaWithoutSignalling'>,
  now: number,
  relayFigures: (stream: StreamRecord) => RelayPathReport | undefined = () => undefined,
) {
  const streams: Record<string, unknown> = {};
  for (const s of session.streams) {
    if (onlyStream !== null && s.name !== onlyStream) continue;
    // The spec's sample shows `waiting` and `connected`; `ready` is the matched state (README "States").
    // Health is shown only while current (README "Health"): `at` and `age` (seconds) say how current.
    const h = liveHealth(s.health, now);
    streams[s.name] = {
      state: s.state,
      peer_a: peerView(s.peerA, broker.isPresent(s, 'a'), broker.mediaWithoutSignalling(s, 'a')),
      peer_b: peerView(s.peerB, broker.isPresent(s, 'b'), broker.mediaWithoutSignalling(s, 'b')),
      // docs/relay.md "What the operator sees": the link's path, and the relay when there is one.
      path: pathOf(s),
      ...(s.relay ? { relay: relayView(s.relay, relayFigures(s), now) } : {}),
      health: h
        ? {
            rtt: h.rtt,
            retransmit: h.retransmit,
            bitrate: h.bitrate,
            at: iso(h.at),
            age: Math.max(0, Math.round((now - h.at) / 100) / 10),
          }
        : null,
    };
  }
  return {
    session: session.name,
    state: session.state,
    streams,
    latency: session.latency,
    created: iso(session.createdAt),
    expiresAt: session.expiresAt,
    // README "Lifetime": past its TTL and kept open by its media (admits no new peer until extended);
    // present only then, so the view keeps the spec's shape otherwise.
    ...(broker.isOvertime(session) ? { overtime: true } : {}),
  };
}
