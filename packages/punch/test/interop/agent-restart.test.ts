import assert from 'node:assert/strict';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadFactor, requireTool, waitFor } from '@broadcast-ops/core/testing';
import { createRig, listening, sleep } from '../agent-netns.ts';

/**
 * README "Reconnection", end to end with the default rate limits: the receiver's agent (and its
 * srt-live-transmit) is SIGKILLed mid-stream and started again with the same join link. Its slot is
 * taken back at once by the same token whatever the new process's clientId, and media flows again within
 * 5 s of the restart (the acceptance figure; scaled by the suite's load factor only).
 */
test('punch agent: a receiver SIGKILLed and restarted with the same join link carries media again within 5 s', async () => {
  for (const tool of ['ip', 'srt-live-transmit', 'ffmpeg', 'curl']) requireTool(tool);
  const rig = createRig('r');
  try {
    const ref = rig.reference(4);
    await listening(rig.startBroker());
    const created = await rig.rest('POST', '/api/session', undefined, { name: 'rs', latency: 200 });
    assert.equal(created.status, 201, created.text);
    const admin = created.json.token as string;
    const invite = async (label: string): Promise<{ token: string; url: string }> => {
      const r = await rig.rest('POST', '/api/session/rs/token', admin, { label });
      return { token: String(r.json.token), url: String(r.json.url) };
    };
    const [tSend, joinLink] = [(await invite('sender')).token, (await invite('receiver')).url];
    assert.match(joinLink, /\/s\/rs\?t=p_/);
    const observer = rig.observe('rs', admin);
    const rx1 = join(rig.dir, 'rx1.ts');
    const rx2 = join(rig.dir, 'rx2.ts');
    const receiverArgs = (out: string) =>
      `--link '${joinLink}' --role receiver --port 9200 --output file:${out} --label receiver --health 1`;
    const receiver = rig.agentWith(rig.ns.b, receiverArgs(rx1));
    const sender = rig.agent(rig.ns.a, 'rs', tSend, 'sender', '--input udp://127.0.0.1:9300');
    await waitFor(() => /"state":"CONNECTED"/.test(observer.output()), {
      timeoutMs: 60_000,
      what: 'CONNECTED at the observer',
    });
    rig.feed(ref, 60);
    await waitFor(() => existsSync(rx1) && statSync(rx1).size > 200_000, {
      timeoutMs: 20_000,
      what: 'media',
    });

    receiver.signal('SIGKILL');
    await receiver.exited;
    await sleep(500);
    const restartedAt = Date.now();
    const again = rig.agentWith(rig.ns.b, receiverArgs(rx2));
    const diag = () => `\n--- sender\n${sender.output()}\n--- restarted receiver\n${again.output()}`;
    await waitFor(() => existsSync(rx2) && statSync(rx2).size > 50_000, {
      timeoutMs: 30_000,
      intervalMs: 50,
      what: () => `media at the restarted receiver${diag()}`,
    });
    const mediaAt = Date.now();
    const backAfterMs = mediaAt - restartedAt;
    // The agent's own recovery, without the process start (Node + tsx loading the sources here).
    const contact = /"time":"([^"]+)"[^\n]*"msg":"connected to broker"/.exec(again.output())?.[1];
    const sinceContact = contact ? mediaAt - Date.parse(contact) : Number.NaN;
    process.stdout.write(
      `# restart: media again ${backAfterMs} ms after the receiver agent was started again, ` +
        `${sinceContact} ms after its first broker contact (load factor ${loadFactor()})\n`,
    );
    if (process.env['PUNCH_TEST_VERBOSE']) process.stdout.write(diag());
    assert.ok(backAfterMs < 5000 * loadFactor(), `media again after ${backAfterMs} ms${diag()}`);
    // The slot was taken back, never refused (no STREAM_TAKEN / SESSION_FULL / 429 on the way).
    assert.doesNotMatch(again.output(), /STREAM_TAKEN|SESSION_FULL|"code":1006/, diag());
    const view = await rig.rest('GET', '/api/session/rs', admin);
    assert.equal(view.json.streams.default.state, 'connected');
  } finally {
    rig.cleanup();
  }
});
