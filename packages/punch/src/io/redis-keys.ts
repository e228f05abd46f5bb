/** Every Redis key and channel of a deployment, under one prefix (`PUNCH_REDIS_PREFIX`, default `punch:`). */
export function redisKeys(prefix: string) {
  return {
    /** The owner lease: `<instance id>:<epoch>` of the instance that runs the broker, with a PX expiry. */
    leader: `${prefix}leader`,
    /** Incremented at each election: a lease token names its epoch, so a lapsed owner can tell it was replaced. */
    epoch: `${prefix}epoch`,
    /** Names of stored sessions (for loading them all). */
    sessions: `${prefix}sessions`,
    session: (name: string) => `${prefix}s:${name}`,
    /** The health check's probe write. */
    probe: `${prefix}probe`,
    /** Heartbeat of an instance (PX expiry): gone means the instance is gone. */
    instance: (id: string) => `${prefix}instance:${id}`,
    /** Pub/sub channel of an instance: forwarded requests, bridged WebSocket traffic. */
    bus: (id: string) => `${prefix}bus:${id}`,
    /** Per-client rate-limit counter of one group (fixed window, PX expiry). */
    rate: (group: string, client: string) => `${prefix}rl:${group}:${client}`,
    /** A relay's registration (docs/relay.md "Relays on Redis"): JSON with a PX expiry it keeps renewing. */
    relay: (id: string) => `${prefix}relay:${id}`,
    /** Ids of the relays that registered (a registration key gone: that relay is gone). */
    relays: `${prefix}relays`,
    /** Pub/sub channel of a relay: allocation and release requests. */
    relayRequests: (id: string) => `${prefix}relay-rq:${id}`,
    /** An allocation as its relay stored it (PX: the allocation's lifetime). */
    relayAllocation: (id: string) => `${prefix}ra:${id}`,
  };
}
