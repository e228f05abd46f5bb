// Entry point of `npx telemetry-bridge`: the only module that reads the environment and opens ports.
import { ConfigError, Shutdown, createLogger, runCli } from '@broadcast-ops/core';
import { loadBridgeConfig } from './config.ts';
import { formatReplay, parseReplayFilter } from './replay.ts';
import { startBridge } from './service.ts';
import { CompanionSimulator, NEWEST_API_VERSION } from './simulators/companion-sim.ts';
import { DEMO_VARIABLES, runCompanionSimDemo } from './simulators/companion-sim-demo.ts';

function configPath(values: Record<string, unknown>): string | undefined {
  const v = values['config'];
  if (typeof v === 'string') return v;
  const env = process.env['BRIDGE_CONFIG_PATH'];
  return env === undefined || env === '' ? undefined : env;
}

function fail(err: unknown): void {
  process.stderr.write(`telemetry-bridge: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = err instanceof ConfigError ? 2 : 1;
}

await runCli(
  'telemetry-bridge',
  'state-first telemetry hub: state store, router, commands, event log, client WebSocket',
  {
    run: {
      summary: 'run the bridge (default command)',
      options: {
        config: {
          type: 'string',
          short: 'c',
          description: 'JSON or YAML config file (or $BRIDGE_CONFIG_PATH)',
        },
        'companion-sim': {
          type: 'boolean',
          description:
            'demo: when companion.enabled is false, run a scripted Companion simulator in-process and connect to it',
        },
      },
      run: async ({ values }) => {
        let config;
        try {
          config = loadBridgeConfig(configPath(values));
        } catch (err) {
          fail(err);
          return;
        }
        const logger = createLogger({
          service: 'telemetry-bridge',
          level: config.logging.level,
          pretty: config.logging.pretty || process.env['LOG_PRETTY'] === '1',
          redact: ['authToken', '*.authToken', 'authTokens', '*.authTokens'],
        });
        const shutdown = new Shutdown({ logger }).install();
        let sim: CompanionSimulator | undefined;
        if (values['companion-sim'] === true && !config.companion.enabled) {
          // No Companion configured: the demo talks to the simulator over the real Satellite protocol.
          sim = new CompanionSimulator({ companionVersion: 'telemetry-bridge companion-sim' });
          const ports = await sim.listen({ tcp: null, ws: 0 });
          runCompanionSimDemo(sim);
          config = {
            ...config,
            companion: {
              ...config.companion,
              enabled: true,
              host: '127.0.0.1',
              port: ports.ws ?? 0,
              transport: 'ws' as const,
              device: {
                ...config.companion.device,
                variables:
                  config.companion.device.variables.length > 0
                    ? config.companion.device.variables
                    : DEMO_VARIABLES.map((v) => ({ ...v })),
              },
            },
          };
          logger.info({ port: ports.ws }, 'no Companion configured: using the Companion simulator (demo)');
          shutdown.add('companion-sim', () => sim?.close());
        }
        let bridge;
        try {
          bridge = await startBridge({ config, logger });
        } catch (err) {
          logger.fatal({ err }, 'could not start');
          process.exitCode = 1;
          await sim?.close();
          shutdown.uninstall();
          return;
        }
        shutdown.add('bridge', () => bridge.close());
        logger.info(
          {
            name: config.name,
            environment: config.environment,
            clients: bridge.clientUrl,
            console: bridge.consoleUrl,
            metrics: bridge.metricsUrl,
            health: bridge.healthUrl,
            epoch: bridge.hub.epoch,
            offset: bridge.hub.offset,
          },
          'telemetry bridge listening',
        );
      },
    },
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
              : loadBridgeConfig(configPath(values)).eventLog.path;
          const filter = parseReplayFilter(values);
          for (const line of formatReplay(dir, filter, values['summary'] === true))
            process.stdout.write(line + '\n');
        } catch (err) {
          fail(err);
        }
      },
    },
  },
  process.argv.slice(2),
  'run',
);
