import assert from 'node:assert/strict';
import { test } from 'node:test';
import { classifyStderrLine } from '../../src/io/agent/srt-stats.ts';

/**
 * The agent's reading of srt-live-transmit's stderr (docs/agent.md, docs/relay.md "Detection"). The lines
 * are the tool's own (apps/srt-live-transmit.cpp in Haivision/srt: `cerr << "SRT source disconnected"`
 * and the lines beside it); a broken link must never read as connected, since the tool keeps running.
 */
test('srt-live-transmit stderr: connected, disconnected (never read as connected), errors, the rest ignored', () => {
  for (const line of ['SRT source connected', 'SRT target connected', 'Accepted SRT source connection'])
    assert.equal(classifyStderrLine(line), 'connected', line);
  for (const line of ['SRT source disconnected', 'SRT target disconnected\n', '  SRT source disconnected  '])
    assert.equal(classifyStderrLine(line), 'disconnected', line);
  assert.equal(
    classifyStderrLine('ERROR: Cannot connect: Connection setup failure: connection timed out'),
    'error',
  );
  for (const line of ["Media path: 'udp://:9300' --> 'srt://1.2.3.4:9200'", 'Connecting to 1.2.3.4:9200', ''])
    assert.equal(classifyStderrLine(line), null, line);
});
