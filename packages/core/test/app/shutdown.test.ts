/** Shutdown's order, bound and join, and the logger's line shape, in this process (the SIGTERM run is io/). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLogger, silentLogger } from '../../src/logger.ts';
import { Shutdown } from '../../src/shutdown.ts';

test('closers run in reverse order and a hung closer makes the exit code 1 after the bound', async () => {
  const order: string[] = [];
  const codes: number[] = [];
  const sd = new Shutdown({
    logger: silentLogger(),
    timeoutMs: 100,
    exit: (c) => codes.push(c),
    signals: [],
  });
  sd.add('first', () => {
    order.push('first');
  });
  sd.add('second', async () => {
    order.push('second');
    await new Promise(() => undefined); // never resolves
  });
  const code = await sd.run('test');
  assert.equal(code, 1);
  assert.deepEqual(order, ['second']);
  assert.deepEqual(codes, [1]);
});

test('a second shutdown call joins the first', async () => {
  let closes = 0;
  const codes: number[] = [];
  const sd = new Shutdown({ logger: silentLogger(), exit: (c) => codes.push(c), signals: [] });
  sd.add('x', () => {
    closes++;
  });
  const [a, b] = await Promise.all([sd.run('one'), sd.run('two')]);
  assert.equal(a, 0);
  assert.equal(b, 0);
  assert.equal(closes, 1);
  assert.deepEqual(codes, [0]);
});

test('logger: JSON lines with numeric level, ISO time, service, component; secrets redacted', () => {
  const lines: string[] = [];
  const logger = createLogger({
    service: 'svc',
    destination: { write: (s: string) => void lines.push(s) },
  });
  logger
    .child({ component: 'comp' })
    .info({ passphrase: 'hunter2hunter2', nested: { token: 'p_x' } }, 'hello');
  const rec = JSON.parse(lines[0]!) as Record<string, unknown>;
  assert.equal(rec['level'], 30);
  assert.match(String(rec['time']), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.equal(rec['service'], 'svc');
  assert.equal(rec['component'], 'comp');
  assert.equal(rec['msg'], 'hello');
  assert.equal(rec['passphrase'], '[redacted]');
  assert.deepEqual(rec['nested'], { token: '[redacted]' });
  assert.ok(!lines[0]!.includes('hunter2'));
});
