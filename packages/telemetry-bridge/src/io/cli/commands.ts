/**
 * The bridge binary's sub-commands besides `run` (README "CLI"): `companion-sim`, a Bitfocus Companion
 * Satellite API simulator for tests and demos, and `replay`, the event log read back as JSON lines.
 */
import { ConfigError, configFileOf, type CliCommand } from '@broadcast-ops/core';
import { loadBridgeConfig } from '../../config.ts';
import { formatReplay, parseReplayFilter } from '../../replay.ts';
import {
  CompanionSimulator,
  NEWEST_API_VERSION,
  runCompanionSimDemo,
} from '@broadcast-ops/simulators/companion';

/** The environment variable naming the config file when `--config` is not given. */
export const CONFIG_ENV = 'BRIDGE_CONFIG_PATH';

function fail(err: unknown): void {
  process.stderr.write(`telemetry-bridge: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = err instanceof ConfigError ? 2 : 1;
}

export const commands: Record<string, CliCommand> = {
  'companion-sim': {
    summary: 'run a Bitfocus Companion Satellite API simulator (TCP and WebSocket), for tests and demos',
    options: {
      host: { type: 'string', description: 'listen address (default 127.0.0.1)' },
      'tcp-port': { type: 'string', description: 'TCP port (default 16622; "off" disables)' },
      'ws-port': { type: 'string', description: 'WebSocket port (default 16623; "off" disables)' },
      'api-version': {
        type: 'string',
        description: `Satellite ApiVersion to speak (default ${NEWEST_API_VERSION})`,
      },
      subscriptions: {
        type: 'boolean',
        description: 'advertise CAPS SUBSCRIPTIONS=1 (ApiVersion >= 1.10.0)',
      },
      'idle-timeout': {
        type: 'string',
        description: 'drop a client after this many ms without input (default 5000)',
      },
      'reply-delay': { type: 'string', description: 'delay every reply by this many ms (fault injection)' },
      demo: {
        type: 'boolean',
        description: 'scripted activity: labels, clock and tally outputs, brightness',
      },
      'log-lines': { type: 'boolean', description: 'print every received line as JSON on stdout' },
    },
    run: async ({ values }) => {
      const num = (k: string, d: number | null): number | null => {
        const v = values[k];
        if (v === undefined) return d;
        if (v === 'off') return null;
        const n = Number(v);
        if (!Number.isInteger(n) || n < 0 || n > 65535)
          throw new Error(`--${k} must be a port number or "off"`);
        return n;
      };
      try {
        const apiVersion =
          typeof values['api-version'] === 'string' ? values['api-version'] : NEWEST_API_VERSION;
        if (!/^1\.\d+\.\d+$/.test(apiVersion)) throw new Error('--api-version must look like 1.14.0');
        const sim = new CompanionSimulator({
          apiVersion,
          subscriptions: values['subscriptions'] === true,
          idleTimeoutMs: num('idle-timeout', 5000) ?? 5000,
          ...(typeof values['host'] === 'string' ? { host: values['host'] } : {}),
        });
        sim.replyDelayMs = num('reply-delay', 0) ?? 0;
        const ports = await sim.listen({ tcp: num('tcp-port', 16622), ws: num('ws-port', 16623) });
        if (values['demo'] === true) runCompanionSimDemo(sim);
        if (values['log-lines'] === true) {
          let seen = 0;
          setInterval(() => {
            for (const r of sim.received.slice(seen))
              process.stdout.write(
                JSON.stringify({ connection: r.connection, transport: r.transport, line: r.line }) + '\n',
              );
            seen = sim.received.length;
            // Bounded: the CLI keeps no history once printed.
            sim.received.splice(0, seen);
            seen = 0;
          }, 100);
        }
        process.stderr.write(
          `companion-sim: ApiVersion ${apiVersion}, tcp ${ports.tcp ?? 'off'}, ws ${ports.ws ?? 'off'}\n`,
        );
        const stop = (): void => {
          void sim.close().then(() => process.exit(0));
        };
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      } catch (err) {
        fail(err);
      }
    },
  },
  replay: {
    summary: 'print the event log as JSON lines, optionally filtered',
    options: {
      config: { type: 'string', short: 'c', description: 'config file whose eventLog.path to read' },
      dir: { type: 'string', description: 'event log directory (overrides the config)' },
      from: { type: 'string', description: 'only records with offset > this' },
      to: { type: 'string', description: 'only records with offset <= this' },
      type: { type: 'string', description: 'only this kind: state, event, command, ack, meta' },
      path: { type: 'string', description: 'only messages whose path matches this pattern (* and **)' },
      'correlation-id': { type: 'string', description: 'only messages with this correlation id' },
      summary: { type: 'boolean', description: 'print counts and the offset range instead of records' },
    },
    run: ({ values }) => {
      try {
        const dir =
          typeof values['dir'] === 'string'
            ? values['dir']
            : loadBridgeConfig(configFileOf(values, process.env, CONFIG_ENV)).eventLog.path;
        const filter = parseReplayFilter(values);
        for (const line of formatReplay(dir, filter, values['summary'] === true))
          process.stdout.write(line + '\n');
      } catch (err) {
        fail(err);
      }
    },
  },
};
