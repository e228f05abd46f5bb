/**
 * Host and Origin on the WebSocket upgrade (docs/protocol.md "Host and Origin"), the rule as a table: a
 * browser page from another origin is refused, the bridge's own origin and configured origins are let in, a
 * client without Origin (not a browser) is let in. Against real upgrades: test/io/origin.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { upgradeAllowed, isLoopback, normaliseOrigin } from '../../src/io/request-origin.ts';

test('upgradeAllowed: the rule as a table', () => {
  const cases: [Record<string, string>, string[], boolean][] = [
    [{ host: '127.0.0.1:8765' }, [], true],
    [{ host: '127.0.0.1:8765', origin: 'http://127.0.0.1:8765' }, [], true],
    [{ host: 'LOCALHOST:8765', origin: 'http://localhost:8765' }, [], true],
    [{ host: '127.0.0.1:8765', origin: 'http://127.0.0.1:9999' }, [], false],
    [{ host: '127.0.0.1:8765', origin: 'https://evil.example' }, [], false],
    [{ host: '127.0.0.1:8765', origin: 'https://panel.example:8443' }, ['https://panel.example:8443'], true],
    [{ host: '127.0.0.1:8765', origin: 'null' }, [], false],
    [{ host: '127.0.0.1:8765', origin: 'file://' }, [], false],
    [{ host: 'evil.example:8765' }, [], false],
    [{ host: 'evil.example:8765', origin: 'http://evil.example:8765' }, [], false],
    [{ host: '192.0.2.1:80', origin: 'http://192.0.2.1' }, [], true],
  ];
  for (const [headers, allowed, ok] of cases) {
    assert.equal(upgradeAllowed(headers, [], allowed).ok, ok, JSON.stringify(headers));
  }
  assert.equal(normaliseOrigin('http://a.example/x'), undefined);
  assert.equal(isLoopback('127.0.0.1'), true);
  assert.equal(isLoopback('::1'), true);
  assert.equal(isLoopback('0.0.0.0'), false);
});
