/** The matrix's network-namespace isolation of its Node lines (scripts/node-matrix.ts), with real processes. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { requireTool, tempDir } from '@broadcast-ops/core/testing';
import { isolatedCommand, isolationWorks } from '../../node-matrix.ts';

test('isolated lines: two suites listening on the same fixed port at once each get their own loopback', async () => {
  requireTool('unshare');
  assert.ok(isolationWorks(), 'unshare --net needs root here (npm test runs as root in CI)');
  // Each child binds 127.0.0.1:47999, holds it until both have bound (a file each writes), then exits 0; in a
  // shared namespace the second bind fails with EADDRINUSE and exits 3.
  const dir = tempDir('isolated-lines-');
  const script = `
    const net = require('node:net'), fs = require('node:fs');
    const [mine, theirs] = process.argv.slice(1);
    const s = net.createServer().once('error', () => process.exit(3));
    s.listen(47999, '127.0.0.1', () => {
      fs.writeFileSync(mine, 'bound');
      const until = Date.now() + 20000;
      const t = setInterval(() => {
        if (fs.existsSync(theirs)) { clearInterval(t); s.close(() => process.exit(0)); }
        else if (Date.now() > until) process.exit(4);
      }, 20);
    });`;
  const runOne = (mine: string, theirs: string): Promise<number | null> =>
    new Promise((resolve) => {
      const [cmd, args] = isolatedCommand(process.execPath, ['-e', script, mine, theirs]);
      spawn(cmd, args, { stdio: 'inherit' }).on('exit', (code) => resolve(code));
    });
  const a = join(dir.path, 'a');
  const b = join(dir.path, 'b');
  try {
    assert.deepEqual(await Promise.all([runOne(a, b), runOne(b, a)]), [0, 0]);
  } finally {
    dir.remove();
  }
});
