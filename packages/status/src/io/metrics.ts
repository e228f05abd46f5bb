/**
 * The status service's own /metrics: per service its level (2 green, 1 amber, 0 red; absent until polled),
 * whether the last poll was answered, poll durations, and playout devices by state
 * (deploy/prometheus/broadcast-ops.rules.yml and deploy/grafana/broadcast-ops.json read these).
 */
import { Counter, Gauge, Histogram, createMetricsRegistry, type Registry } from '@broadcast-ops/core';
import type { Fleet } from '../domain/fleet.ts';

const LEVEL = { red: 0, amber: 1, green: 2 } as const;

export function statusMetrics(fleet: Fleet): {
  registry: Registry;
  onPoll: (service: { name: string }, answered: boolean, ms: number) => void;
} {
  const registry = createMetricsRegistry();
  new Gauge({
    name: 'broadcast_ops_status_service_level',
    help: "Each service's verdict from the status service's polls: 2 green, 1 amber, 0 red",
    labelNames: ['service'],
    registers: [registry],
    collect() {
      this.reset();
      for (const s of fleet.list()) if (s.level !== 'unknown') this.set({ service: s.name }, LEVEL[s.level]);
    },
  });
  new Gauge({
    name: 'broadcast_ops_status_playout_devices',
    help: 'playout-monitor devices by state (online: connected; offline: connection lost or no data within its stale timeout)',
    labelNames: ['service', 'state'],
    registers: [registry],
    collect() {
      this.reset();
      for (const s of fleet.list()) {
        if (!s.devices) continue;
        this.set({ service: s.name, state: 'online' }, s.devices.online);
        this.set({ service: s.name, state: 'offline' }, s.devices.offline);
      }
    },
  });
  const polls = new Counter({
    name: 'broadcast_ops_status_polls_total',
    help: 'Health polls by service and result (answered or no_answer)',
    labelNames: ['service', 'result'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'broadcast_ops_status_poll_duration_seconds',
    help: 'Time one poll of a service took (health, metrics and devices in parallel)',
    labelNames: ['service'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  return {
    registry,
    onPoll: (service, answered, ms) => {
      polls.inc({ service: service.name, result: answered ? 'answered' : 'no_answer' });
      duration.observe({ service: service.name }, ms / 1000);
    },
  };
}
