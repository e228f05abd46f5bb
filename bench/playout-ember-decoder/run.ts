// Measures whether emberplus-connection's BER decoder (berDecode, public API) can be made safe by
// validating every declared BER length against the frame first. Each input runs in a child process
// capped at 256 MB heap and 5 s; the figures are printed beside the anchor (the playout monitor's bounded decoder,
// packages/playout-monitor/src/protocol/glow.ts) measured in the same run. Run: npx tsx bench/playout-ember-decoder/run.ts
import { spawnSync } from 'node:child_process';
import { decodeGlowRequests } from '@broadcast-ops/playout-monitor/testing';

const CASES: Record<string, string> = {
  // The reported frame's payload: a Glow Root declaring 16 bytes where 5 follow.
  'declared length past the frame': '60106b0ea00c62',
  // Every length nested properly (passes a length pre-validation), REAL value with a zero significand.
  'lengths valid, REAL with zero significand': '60176b15a0136911a0040d020101a1093107a2050903800000',
  // Well-formed GetDirectory with indefinite lengths everywhere (as libember encodes).
  'indefinite lengths, well-formed': '60806b80a0806280a0030201200000000000000000',
};

const child = `
const { berDecode } = require('emberplus-connection');
const t0 = performance.now();
try { berDecode(Buffer.from(process.argv[1], 'hex')); console.log('returned ' + (performance.now() - t0).toFixed(2) + ' ms'); }
catch (e) { console.log('threw ' + e.message.slice(0, 60) + ' in ' + (performance.now() - t0).toFixed(2) + ' ms'); }
`;

for (const [name, hex] of Object.entries(CASES)) {
  const r = spawnSync(process.execPath, ['--max-old-space-size=256', '-e', child, hex], {
    timeout: 5000,
    encoding: 'utf8',
    cwd: process.cwd(),
  });
  const lib = r.error
    ? `no answer within 5 s (killed: ${r.signal ?? 'timeout'})`
    : r.status !== 0
      ? `crashed (exit ${r.status}, signal ${r.signal})`
      : r.stdout.trim();
  const t0 = performance.now();
  const result = decodeGlowRequests(Buffer.from(hex, 'hex'));
  const ours = result.ok ? `returned ${JSON.stringify(result.value)}` : `refused (${result.error.message})`;
  const ms = (performance.now() - t0).toFixed(2);
  console.log(
    `${name}\n  emberplus-connection berDecode: ${lib}\n  anchor, protocol/glow.ts:      ${ours} in ${ms} ms`,
  );
}
