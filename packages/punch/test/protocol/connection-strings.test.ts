import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { connectionStrings, type ConnectionParams } from '../../src/protocol/connection-strings.ts';

const PASS = 'Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z';
const base: ConnectionParams = {
  remoteIp: '198.51.100.20',
  remotePort: 7001,
  localPort: 7002,
  latencyMs: 250,
  passphrase: PASS,
  role: 'sender',
};

/** Split a command line as a POSIX shell would for double-quoted words (all our strings need). */
function shellWords(cmd: string): string[] {
  const words: string[] = [];
  for (const m of cmd.matchAll(/(?:[^\s"]+|"[^"]*")+/g)) words.push(m[0].replaceAll('"', ''));
  return words;
}

/** The srt:// URI of a command (the single word starting with srt://, or uri="..." of GStreamer). */
function srtUri(cmd: string): URL {
  const words = shellWords(cmd).map((w) => w.replace(/^uri=/, ''));
  const uris = words.filter((w) => w.startsWith('srt://'));
  assert.equal(uris.length, 1, cmd);
  return new URL(uris[0] ?? '');
}

function query(u: URL): Record<string, string> {
  return Object.fromEntries(u.searchParams);
}

describe('connection strings: parse each format and check its content', () => {
  for (const role of ['sender', 'receiver'] as const) {
    const s = connectionStrings({ ...base, role });

    test(`live-transmit (${role}): ms latency, libsrt keys, local port in "port"`, () => {
      const words = shellWords(s['live-transmit']);
      assert.equal(words[0], 'srt-live-transmit');
      // Source then destination: the SRT URI is the output of a sender and the input of a receiver.
      assert.equal(words.length, 3);
      // The sender's UDP input listens on loopback only: nobody on the network can inject into the link.
      if (role === 'sender') assert.equal(words[1], 'udp://127.0.0.1:<IN_PORT>');
      else assert.equal(words[2], 'udp://127.0.0.1:<OUT_PORT>');
      const u = srtUri(s['live-transmit']);
      assert.equal(u.hostname, '198.51.100.20');
      assert.equal(u.port, '7001');
      assert.deepEqual(query(u), {
        mode: 'rendezvous',
        port: '7002',
        latency: '250',
        passphrase: PASS,
        conntimeo: '120000',
        payloadsize: '1316',
      });
    });

    test(`transcoder (${role}): ffmpeg MPEG-TS through srt-live-transmit`, () => {
      const [left, right] = s.transcoder.split(' | ');
      assert.ok(left && right);
      const ffmpeg = role === 'sender' ? left : right;
      const slt = role === 'sender' ? right : left;
      assert.equal(shellWords(ffmpeg)[0], 'ffmpeg');
      assert.ok(shellWords(ffmpeg).includes('mpegts'));
      assert.equal(shellWords(slt)[0], 'srt-live-transmit');
      assert.ok(shellWords(slt).includes('file://con'));
      // The sender cuts its stdin into 1316-byte SRT messages (7 TS packets); the receiver reads them.
      assert.equal(shellWords(slt).includes('-chunk:1316'), role === 'sender');
      const u = srtUri(slt);
      assert.equal(u.hostname, '198.51.100.20');
      assert.equal(u.port, '7001');
      const q = query(u);
      assert.equal(q['mode'], 'rendezvous');
      assert.equal(q['latency'], '250'); // ms: srt-live-transmit sets SRTO_LATENCY as given
      assert.equal(q['passphrase'], PASS);
      assert.equal(q['conntimeo'], '120000');
      assert.equal(q['payloadsize'], '1316');
      assert.equal(q['port'], '7002');
    });

    test(`studio-app (${role}): µs latency, connect_timeout, localip/localport`, () => {
      const u = new URL(s['studio-app']);
      assert.equal(u.protocol, 'srt:');
      assert.equal(u.hostname, '198.51.100.20');
      assert.equal(u.port, '7001');
      assert.deepEqual(query(u), {
        mode: 'rendezvous',
        localip: '0.0.0.0',
        localport: '7002',
        latency: '250000',
        passphrase: PASS,
        connect_timeout: '120000',
      });
    });

    test(`pipeline (${role}): ms latency, conntimeo, localaddress/localport, mode=rendezvous`, () => {
      const words = shellWords(s.pipeline);
      assert.equal(words[0], 'gst-launch-1.0');
      assert.ok(words.includes(role === 'sender' ? 'srtsink' : 'srtsrc'));
      // Seven TS packets per buffer: the muxer's PAT/PMT are not dropped as separate header buffers.
      if (role === 'sender') assert.match(s.pipeline, / ! mpegtsmux alignment=7 ! srtsink uri="/);
      const u = srtUri(s.pipeline);
      assert.equal(u.hostname, '198.51.100.20');
      assert.equal(u.port, '7001');
      assert.deepEqual(query(u), {
        mode: 'rendezvous',
        localaddress: '0.0.0.0',
        localport: '7002',
        latency: '250',
        passphrase: PASS,
        conntimeo: '120000',
      });
    });

    test(`mixer (${role}): one "Field: value" per line`, () => {
      const fields = Object.fromEntries(
        s.mixer.split('\n').map((l) => {
          const i = l.indexOf(': ');
          return [l.slice(0, i), l.slice(i + 2)];
        }),
      );
      assert.deepEqual(fields, {
        Hostname: '198.51.100.20',
        Port: '7001',
        'Local Port': '7002',
        'Latency (ms)': '250',
        Passphrase: PASS,
        Mode: 'Rendezvous',
        'Key Length': '0 (auto)',
      });
    });
  }

  test('IPv6 peers are bracketed in URIs, bare in the mixer text, and bind the IPv6 wildcard', () => {
    const s = connectionStrings({ ...base, remoteIp: '2001:db8::1' });
    const u = srtUri(s['live-transmit']);
    assert.equal(u.hostname, '[2001:db8::1]');
    // OBS binds IPv4 only for rendezvous: the string says so instead of a URL that cannot work.
    assert.match(s['studio-app'], /IPv4 only/);
    assert.ok(!s['studio-app'].includes('srt://'));
    assert.match(s.mixer, /^Hostname: 2001:db8::1$/m);
  });

  test('never streamid or pbkeylen (docs/connection-strings.md)', () => {
    for (const v of Object.values(connectionStrings(base))) assert.doesNotMatch(v, /streamid|pbkeylen/);
  });
});
