// A TSL destination that refuses every datagram (a UDP port nobody listens on: ICMP port unreachable,
// ECONNREFUSED on the next send) is warned about once per interval with a count, not once per datagram.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import pino from 'pino';
import { startRig, udpReceiver, until } from '../outputs/helpers.ts';

test('a refusing TSL destination: one warning per interval, each with the refused sends it stands for', async () => {
  const closed = await udpReceiver();
  const port = closed.port;
  await closed.close(); // nobody listens there now
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n'))
        if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  const intervalMs = 1000;
  const rig = await startRig(
    2,
    { tslUmdDestinations: [{ host: '127.0.0.1', port }] },
    { tslRefreshMs: 10, tslWarnIntervalMs: intervalMs, logger: pino({ level: 'debug' }, sink) },
  );
  const started = performance.now();
  try {
    const refusing = (): Record<string, unknown>[] =>
      lines.filter((l) => l['msg'] === 'TSL UMD destination refusing');
    await until(() => refusing().length >= 3 || undefined, 10_000, 'three warning lines');
    const elapsed = performance.now() - started;
    const warnings = refusing();
    const counts = warnings.map((w) => w['count'] as number);
    assert.equal(counts[0], 1, 'the first refusal is logged at once');
    assert.ok(
      counts.slice(1).every((c) => c > 5),
      `later lines stand for many refused sends (refresh every 10 ms): ${counts.join(', ')}`,
    );
    assert.ok(
      warnings.length <= Math.ceil(elapsed / intervalMs) + 1,
      `${warnings.length} lines in ${elapsed} ms`,
    );
    assert.equal(warnings[0]?.['port'], port);
    assert.equal(warnings[0]?.['code'], 'ECONNREFUSED');
    assert.equal(warnings[0]?.['level'], 40, 'warn');
    assert.equal(
      lines.filter((l) => l['msg'] === 'TSL UMD destination failing').length,
      0,
      'a refusal is not also logged per datagram as a failure',
    );
  } finally {
    await rig.close();
  }
});
