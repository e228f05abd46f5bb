import assert from 'node:assert/strict';
import { once } from 'node:events';
import { PassThrough, Writable } from 'node:stream';
import { afterEach, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { ConfigError } from '../../src/config.ts';
import {
  SUPERVISED_ENV,
  runService,
  serviceContext,
  type Service,
  type ServiceDefinition,
} from '../../src/service.ts';

/** A log sink the test can read: every JSON line the service's logger wrote. */
function logSink(): { lines: Record<string, unknown>[]; stream: Writable } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString('utf8').split('\n'))
        if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  return { lines, stream };
}

interface Probe {
  events: string[];
  failStart?: boolean | 'config';
}

function definition(probe: Probe, sink: Writable): ServiceDefinition<{ port: number }> {
  return {
    bin: 'demo-svc',
    description: 'a service for the runService tests',
    configEnv: 'DEMO_SVC_CONFIG',
    loadConfig(file) {
      if (file === 'bad.yaml') throw new ConfigError('bad.yaml: port: expected a number');
      if (file === 'crash.yaml') throw new Error('disk on fire');
      probe.events.push(`config ${file ?? 'defaults'}`);
      return { port: 8080 };
    },
    logger: () => ({ service: 'demo', destination: sink }),
    create(ctx): Service {
      probe.events.push(`create clock=${ctx.clock.now()} flag=${String(ctx.values['loud'])}`);
      ctx.shutdown.add('side-car', () => {
        probe.events.push('close side-car');
      });
      return {
        start: () => {
          probe.events.push('start');
          if (probe.failStart === 'config')
            return Promise.reject(new ConfigError('cannot read tls.cert /etc/x.pem (ENOENT)'));
          return probe.failStart ? Promise.reject(new Error('port 8080 in use')) : Promise.resolve();
        },
        close: () => {
          probe.events.push('close service');
          return Promise.resolve();
        },
        health: () => ({ status: 'ok' }),
        describe: () => ({ url: 'http://127.0.0.1:8080/' }),
      };
    },
    startedMessage: 'demo listening',
    runOptions: { loud: { type: 'boolean', description: 'a service-specific flag' } },
  };
}

describe('runService', () => {
  afterEach(() => {
    process.exitCode = undefined;
  });

  test('a configuration error prints one line naming the binary and exits 2; nothing is created', async () => {
    const probe: Probe = { events: [] };
    const sink = logSink();
    const errors: string[] = [];
    const running = await runService(definition(probe, sink.stream), {
      argv: ['--config', 'bad.yaml'],
      env: {},
      stderr: (l) => errors.push(l),
      signals: [],
    });
    assert.equal(running, undefined);
    assert.equal(process.exitCode, 2);
    assert.deepEqual(errors, ['demo-svc: bad.yaml: port: expected a number\n']);
    assert.deepEqual(probe.events, []);
  });

  test('an unexpected error while loading the configuration exits 1, not 2', async () => {
    const errors: string[] = [];
    await runService(definition({ events: [] }, logSink().stream), {
      argv: [],
      env: { DEMO_SVC_CONFIG: 'crash.yaml' },
      stderr: (l) => errors.push(l),
      signals: [],
    });
    assert.equal(process.exitCode, 1);
    assert.deepEqual(errors, ['demo-svc: disk on fire\n']);
  });

  test('a service that cannot start logs why, closes everything it opened (last first) and exits 1 without process.exit', async () => {
    const probe: Probe = { events: [], failStart: true };
    const sink = logSink();
    const exits: number[] = [];
    const running = await runService(definition(probe, sink.stream), {
      argv: [],
      env: {},
      exit: (c) => exits.push(c),
      signals: [],
    });
    assert.equal(running, undefined);
    assert.equal(process.exitCode, 1);
    assert.deepEqual(exits, []);
    assert.deepEqual(probe.events.slice(-3), ['start', 'close service', 'close side-car']);
    const failed = sink.lines.find((l) => l['msg'] === 'start-up failed');
    assert.equal(failed?.['err'], 'port 8080 in use');
    assert.equal(
      sink.lines.find((l) => l['msg'] === 'demo listening'),
      undefined,
    );
  });

  test('a ConfigError from start prints one line like a configuration error, closes what was opened and exits 2', async () => {
    const probe: Probe = { events: [], failStart: 'config' };
    const sink = logSink();
    const errors: string[] = [];
    const running = await runService(definition(probe, sink.stream), {
      argv: [],
      env: {},
      stderr: (l) => errors.push(l),
      signals: [],
    });
    assert.equal(running, undefined);
    assert.equal(process.exitCode, 2);
    assert.deepEqual(errors, ['demo-svc: cannot read tls.cert /etc/x.pem (ENOENT)\n']);
    assert.deepEqual(probe.events.slice(-3), ['start', 'close service', 'close side-car']);
    assert.equal(sink.lines.find((l) => l['msg'] === 'start-up failed')?.['err'], errors[0]?.slice(10, -1));
  });

  test('started: config from the environment, the injected clock, run flags, the describe() log line; a signal closes and exits 0', async () => {
    const probe: Probe = { events: [] };
    const sink = logSink();
    const exits: number[] = [];
    const clock = new ManualClock(1_700_000_000_000);
    const running = await runService(definition(probe, sink.stream), {
      argv: ['run', '--loud'],
      env: { DEMO_SVC_CONFIG: 'site.yaml' },
      clock,
      exit: (c) => exits.push(c),
      signals: ['SIGUSR2'],
    });
    assert.ok(running);
    assert.deepEqual(probe.events, ['config site.yaml', 'create clock=1700000000000 flag=true', 'start']);
    const started = sink.lines.find((l) => l['msg'] === 'demo listening');
    assert.equal(started?.['url'], 'http://127.0.0.1:8080/');
    assert.equal(started?.['service'], 'demo');
    process.kill(process.pid, 'SIGUSR2');
    assert.equal(await running.shutdown.run('test'), 0);
    assert.deepEqual(exits, [0]);
    assert.deepEqual(probe.events.slice(-2), ['close service', 'close side-car']);
  });

  test('an unknown flag of the run command is refused before anything is loaded', async () => {
    const probe: Probe = { events: [] };
    const running = await runService(definition(probe, logSink().stream), {
      argv: ['--nope'],
      env: {},
      signals: [],
      stderr: () => undefined,
    });
    assert.equal(running, undefined);
    assert.equal(process.exitCode, 2);
    assert.deepEqual(probe.events, []);
  });

  test('SIGHUP calls reload while the service runs (a failing reload is logged, not fatal); none without reload, none after close', async () => {
    const before = process.listenerCount('SIGHUP');
    const plain = await runService(definition({ events: [] }, logSink().stream), {
      argv: [],
      env: {},
      exit: () => undefined,
      signals: [],
    });
    assert.ok(plain);
    assert.equal(process.listenerCount('SIGHUP'), before, 'no reload: SIGHUP keeps its default');
    await plain.shutdown.run('test');

    const reloads: string[] = [];
    const sink = logSink();
    const base = definition({ events: [] }, sink.stream);
    const running = await runService(
      {
        ...base,
        create: async (ctx) => ({
          ...(await base.create(ctx)),
          reload: (reason) => {
            reloads.push(reason);
            if (reloads.length === 2) throw new Error('certificate unreadable');
          },
        }),
      },
      { argv: [], env: {}, exit: () => undefined, signals: [] },
    );
    assert.ok(running);
    process.emit('SIGHUP', 'SIGHUP');
    process.emit('SIGHUP', 'SIGHUP');
    assert.deepEqual(reloads, ['SIGHUP', 'SIGHUP']);
    assert.equal(sink.lines.find((l) => l['msg'] === 'reload failed')?.['err'], 'certificate unreadable');
    await running.shutdown.run('test');
    assert.equal(process.listenerCount('SIGHUP'), before);
    process.emit('SIGHUP', 'SIGHUP');
    assert.equal(reloads.length, 2);
  });

  test('serviceContext: defaults for a service built outside runService, each part replaceable', async () => {
    const clock = new ManualClock(42);
    const ctx = serviceContext({ port: 1 }, { clock, env: { A: '1' } });
    assert.deepEqual(ctx.config, { port: 1 });
    assert.equal(ctx.clock.now(), 42);
    assert.deepEqual(ctx.env, { A: '1' });
    assert.equal(ctx.configFile, undefined);
    assert.deepEqual(ctx.values, {});
    const closed: string[] = [];
    ctx.shutdown.add('x', () => {
      closed.push('x');
    });
    assert.equal(await ctx.shutdown.abort('test'), 0);
    assert.deepEqual(closed, ['x']);
  });

  test('supervised: the supervisor pipe ending (its process gone, even by SIGKILL) closes the service and exits 0', async () => {
    const probe: Probe = { events: [] };
    const sink = logSink();
    const exits: number[] = [];
    const pipe = new PassThrough();
    const running = await runService(definition(probe, sink.stream), {
      argv: ['run'],
      env: { [SUPERVISED_ENV]: 'stdin' },
      exit: (c) => exits.push(c),
      signals: [],
      supervisorPipe: pipe,
    });
    assert.ok(running);
    pipe.write('ignored'); // data on the pipe is not a reason to stop
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(exits, []);
    const ended = once(pipe, 'end');
    pipe.end();
    await ended;
    assert.equal(await running.shutdown.run('joined'), 0);
    assert.deepEqual(exits, [0]);
    assert.deepEqual(probe.events.slice(-2), ['close service', 'close side-car']);
    assert.ok(sink.lines.some((l) => l['msg'] === 'shutting down' && l['reason'] === 'supervisor gone'));
    assert.ok(pipe.destroyed, 'the pipe is let go once closing');
  });

  test('not supervised: the same pipe ending changes nothing', async () => {
    const probe: Probe = { events: [] };
    const exits: number[] = [];
    const pipe = new PassThrough();
    const running = await runService(definition(probe, logSink().stream), {
      argv: ['run'],
      env: {},
      exit: (c) => exits.push(c),
      signals: [],
      supervisorPipe: pipe,
    });
    assert.ok(running);
    pipe.end();
    await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(exits, []);
    await running.shutdown.run('test');
  });
});
