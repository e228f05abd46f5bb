import assert from 'node:assert/strict';
import { test } from 'node:test';
import { requireTool, waitFor } from '@broadcast-ops/core/testing';
import { classifyHealth } from '../../src/domain/health.ts';
import { SRT_PORT, UDP_IN, createRig, listening, sleep } from '../agent-netns.ts';
import { sh } from '../netns.ts';

/**
 * Health a broadcast engineer can trust, on a real SRT link (README "Health", docs/health.md): two agents in
 * two network namespaces (test/agent-netns.ts), the sender's side fed at about 4 Mbit/s. First the link is
 * clean: the receiver's figures show no loss, the verdict is healthy, no alarm and no warning advice. Then
 * 5 % random loss is added in the sender's namespace on its SRT packets: an nftables rule `udp dport <SRT
 * port> numgen random mod 100 < 5 drop` on output, each packet dropped independently with probability
 * 5 %, what `tc qdisc … netem loss 5%` does (this machine's kernel has no sch_netem module: `tc` answers
 * "Specified qdisc kind is unknown"). Over the next 10 s window the receiver's loss before ARQ reads about
 * 5 % (3.5-6.5 %), and the verdict is the spec's bands applied to the figures shown.
 */
interface Figures {
  reports: number;
  rtt: { min: number; avg: number; max: number };
  lossPct: number | null;
  retransmitPct: number;
  dropped: number;
  latency: number | null;
  marginMs: number | null;
}
interface HealthView {
  latency: number;
  assessment: {
    status: string;
    rtt: number;
    retransmit: number;
    ends: Partial<Record<'sender' | 'receiver', { w10: Figures; w60: Figures }>>;
    alarms: { drops: boolean; margin: boolean };
    advice: string[];
  } | null;
  history: Partial<Record<'sender' | 'receiver', { t: number; lossPct: number | null }[]>>;
}

test('health over a real SRT link: clean reads healthy; 5 % random loss reads about 5 % at the receiver, verdict per the spec bands', async (t) => {
  for (const tool of ['ip', 'nft', 'srt-live-transmit', 'ffmpeg', 'curl']) requireTool(tool);
  const rig = createRig('h');
  const { rest } = rig;
  try {
    const ref = rig.reference(6);
    const broker = rig.startBroker();
    await listening(broker);
    const created = await rest('POST', '/api/session', undefined, { name: 'hl', latency: 200 });
    assert.equal(created.status, 201, created.text);
    const admin = created.json.token as string;
    const tokenFor = async (label: string) =>
      (await rest('POST', '/api/session/hl/token', admin, { label })).json.token as string;
    const [tSend, tRecv] = [await tokenFor('sender'), await tokenFor('receiver')];
    const observer = rig.observe('hl', admin);
    const receiver = rig.agent(rig.ns.b, 'hl', tRecv, 'receiver', '--output udp://127.0.0.1:9400');
    const sender = rig.agent(rig.ns.a, 'hl', tSend, 'sender', `--input udp://127.0.0.1:${UDP_IN}`);
    const diag = () =>
      `\n--- sender\n${sender.output().slice(-3000)}\n--- receiver\n${receiver.output().slice(-3000)}`;
    await waitFor(() => /"state":"CONNECTED"/.test(observer.output()), {
      timeoutMs: 60_000,
      what: () => `CONNECTED at the observer${diag()}`,
    });
    rig.feed(ref, 90);
    const health = async (): Promise<HealthView> => {
      const r = await rest('GET', '/api/session/hl/health', admin);
      assert.equal(r.status, 200, r.text);
      return r.json as HealthView;
    };

    // Clean: 12 s of media, so the 10 s window holds only clean reports.
    await sleep(12_000);
    const clean = await health();
    const a = clean.assessment;
    assert.ok(a, `an assessment${diag()}`);
    const rx = a.ends.receiver?.w10;
    assert.ok(rx && a.ends.sender, `both ends, labelled by role: ${JSON.stringify(a.ends)}`);
    assert.ok(rx.reports >= 5, `reports in 10 s: ${rx.reports}`);
    assert.ok((rx.lossPct ?? 99) < 0.5, `clean loss ${rx.lossPct}`);
    assert.equal(rx.dropped, 0);
    assert.equal(rx.latency, 200, "the receiver's latency in force");
    assert.ok((rx.marginMs ?? 0) > 150, `margin ${rx.marginMs}`);
    assert.equal(a.status, 'healthy', JSON.stringify(a));
    assert.deepEqual(a.alarms, { drops: false, margin: false });
    assert.match(a.advice.join(' '), /^Healthy/);
    assert.ok((clean.history.receiver?.length ?? 0) >= 5 && (clean.history.sender?.length ?? 0) >= 5);
    assert.doesNotMatch(observer.output(), /"type":"health_alarm"/);
    assert.doesNotMatch(observer.output(), /"status":"(warning|critical)"/, 'no warning on a clean link');

    // 5 % random loss on the sender's SRT packets (data and retransmissions on their way to the receiver).
    const nft = (...args: string[]) => sh('ip', ['netns', 'exec', rig.ns.a, 'nft', ...args]);
    nft('add', 'table', 'inet', 'loss');
    nft('add', 'chain', 'inet', 'loss', 'out', '{ type filter hook output priority 0 ; }');
    nft(
      'add',
      'rule',
      'inet',
      'loss',
      'out',
      'udp',
      'dport',
      String(SRT_PORT),
      'numgen',
      'random',
      'mod',
      '100',
      '<',
      '5',
      'drop',
    );
    await sleep(12_000);
    const lossy = await health();
    const b = lossy.assessment;
    assert.ok(b, `an assessment under loss${diag()}`);
    const lrx = b.ends.receiver?.w10;
    t.diagnostic(`clean: ${JSON.stringify(rx)} ${a.status}`);
    t.diagnostic(`5 % loss: ${JSON.stringify(lrx)} sender ${JSON.stringify(b.ends.sender?.w10)} ${b.status}`);
    assert.ok(lrx && lrx.lossPct !== null, JSON.stringify(b.ends));
    assert.ok(
      lrx.lossPct >= 3.5 && lrx.lossPct <= 6.5,
      `receiver's loss before ARQ ${lrx.lossPct} % (5 % random drop)`,
    );
    assert.ok(
      lrx.retransmitPct >= 2.5 && lrx.retransmitPct <= 8,
      `receiver's retransmit share ${lrx.retransmitPct} %`,
    );
    // The verdict is the spec's bands applied to the figures the view shows.
    assert.equal(b.retransmit, Math.max(lrx.lossPct, lrx.retransmitPct));
    assert.equal(b.status, classifyHealth(b.rtt, b.retransmit));
    assert.notEqual(b.status, 'healthy');
    assert.match(b.advice.join(' '), /repairs \d+\.\d % of its packets/);
    assert.doesNotMatch(b.advice.join(' '), /raise (it|the latency)/i);
    // The admin connection's health_report carries the same verdict with the figures by role.
    const reports = observer
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{"type":"health_report"'))
      .map((l) => JSON.parse(l) as { streams: Record<string, { status: string; figures?: unknown }> });
    const last = reports.at(-1)?.streams['default'];
    assert.ok(last?.figures, 'health_report carries the figures');
    assert.notEqual(last.status, 'healthy');
  } finally {
    rig.cleanup();
  }
});
