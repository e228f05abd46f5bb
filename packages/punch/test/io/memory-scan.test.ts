import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { waitFor } from '@broadcast-ops/core/testing';
import { encodings, scanMemory } from '../memory-scan.ts';

/**
 * The memory scanner of the relay's key-less test (test/memory-scan.ts) on a child process it planted
 * strings in: one held as a one-byte (Latin-1, so UTF-8 for ASCII) V8 string, one with a character outside
 * Latin-1, which V8 holds as a two-byte (UTF-16LE) string. Both strings reach the child on stdin, never on
 * its command line or environment. A third string, never sent, is not found.
 */
test('the memory scanner finds strings planted in a child process, as UTF-8 and as UTF-16LE, and not one never sent', async () => {
  const oneByte = `planted-${randomBytes(12).toString('hex')}`;
  const twoByte = `planted-${randomBytes(12).toString('hex')}-\u2603`;
  const absent = `absent-${randomBytes(12).toString('hex')}`;
  // Bounded: the child keeps the two lines in a global and ends when its stdin closes.
  const child = spawn(
    process.execPath,
    [
      '-e',
      `let t='';process.stdin.setEncoding('utf8');process.stdin.on('data',(d)=>{t+=d;if(t.split('\\n').length>2){globalThis.kept=t.split('\\n').slice(0,2).map((s)=>s.slice(0));process.stdout.write('ready\\n');}});process.stdin.on('end',()=>process.exit(0));`,
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  try {
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stdin.write(`${oneByte}\n${twoByte}\n`);
    await waitFor(() => out.includes('ready'), { timeoutMs: 20_000, what: 'the child to hold the strings' });
    const pid = child.pid;
    assert.ok(pid !== undefined);
    const [absentUtf8, absentUtf16] = encodings(absent) as [Buffer, Buffer];
    const scan = scanMemory(pid, [
      Buffer.from(oneByte, 'utf8'),
      Buffer.from(twoByte, 'utf16le'),
      absentUtf8,
      absentUtf16,
    ]);
    assert.ok(
      scan.regions > 10 && scan.bytes > 1024 * 1024,
      `scanned ${scan.regions} regions, ${scan.bytes} bytes`,
    );
    assert.ok((scan.hits[0] ?? []).length > 0, 'the one-byte string found as UTF-8');
    assert.ok((scan.hits[1] ?? []).length > 0, 'the two-byte string found as UTF-16LE');
    assert.deepEqual(scan.hits[2], [], 'a string never sent is not found (UTF-8)');
    assert.deepEqual(scan.hits[3], [], 'a string never sent is not found (UTF-16LE)');
  } finally {
    child.stdin.end();
    child.kill('SIGKILL');
  }
});
