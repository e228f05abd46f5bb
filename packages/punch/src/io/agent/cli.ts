import { createLogger, type CliCommand } from '@broadcast-ops/core';

/** The agent's last line for a `session_closed` reason (spec: admin_closed, ttl_expired, error). */
function closedText(reason: string): string {
  switch (reason) {
    case 'admin_closed':
      return 'session closed by the operator; agent done';
    case 'ttl_expired':
      return 'session reached the end of its lifetime with no media flowing; agent done';
    default:
      return `session closed by the broker (${reason}); agent done`;
  }
}

/** `punch agent`: one end of an SRT link, driven by the broker (docs/agent.md). */
async function agent(values: Record<string, unknown>): Promise<void> {
  // Loaded when the sub-command runs: `punch serve` names this command at every start and uses none of it
  // (docs/at-rest.md "What was cut").
  const { PunchAgent, parseJoinLink, streamOfToken } = await import('./agent.ts');
  const str = (k: string): string | undefined => (typeof values[k] === 'string' ? values[k] : undefined);
  const fail = (message: string, code = 2): void => {
    process.stderr.write(`punch agent: ${message}\n`);
    process.exitCode = code;
  };
  let target: { broker: string; session: string; token: string; stream?: string | undefined };
  try {
    const link = str('link');
    if (link) target = parseJoinLink(link);
    else {
      const broker = str('broker');
      const session = str('session');
      const token = str('token') ?? process.env['PUNCH_TOKEN'];
      if (!broker || !session || !token) {
        fail('give --link <join link>, or --broker <url> --session <name> --token <token> (or PUNCH_TOKEN)');
        return;
      }
      target = { broker: broker.replace(/\/+$/, ''), session, token, stream: streamOfToken(token) };
    }
  } catch (err) {
    fail((err as Error).message);
    return;
  }
  const role = str('role');
  if (role !== 'sender' && role !== 'receiver') {
    fail('--role must be sender or receiver');
    return;
  }
  const port = Number(str('port') ?? '');
  if (!Number.isInteger(port) || port < 1024 || port > 65535) {
    fail('--port must be the local UDP port for SRT, 1024-65535');
    return;
  }
  const media = role === 'sender' ? str('input') : str('output');
  if (!media || !/^(udp:\/\/[^\s]+:\d+|file:.+|-)$/.test(media)) {
    fail(
      role === 'sender'
        ? '--input must be udp://127.0.0.1:<port> (e.g. from ffmpeg), file:<path> or - (stdin)'
        : '--output must be udp://<host>:<port>, file:<path> or - (stdout)',
    );
    return;
  }
  const healthS = Number(str('health') ?? '2');
  if (!(healthS >= 1 && healthS <= 5)) {
    fail('--health must be 1-5 seconds');
    return;
  }
  const onTally = str('on-tally')
    ?.trim()
    .split(/\s+/)
    .filter((w) => w !== '');
  if (str('on-tally') !== undefined && !onTally?.length) {
    fail('--on-tally must name a command (program and arguments, no shell)');
    return;
  }
  const tallyTimeoutS = Number(str('on-tally-timeout') ?? '5');
  if (!(tallyTimeoutS > 0 && tallyTimeoutS <= 300)) {
    fail('--on-tally-timeout must be 0-300 seconds (more than 0)');
    return;
  }
  // The stream's bit rate as the encoder sends it (bits/s), declared to the broker as `meta.bitrate`: a relay
  // caps the stream from it (docs/relay.md "The cap per session"). Optional.
  const bitrate = str('bitrate') === undefined ? undefined : Number(str('bitrate'));
  if (bitrate !== undefined && !(Number.isInteger(bitrate) && bitrate >= 10_000 && bitrate <= 100_000_000)) {
    fail('--bitrate must be the encoder bit rate in bits/s, 10000-100000000 (e.g. 8000000 for 8 Mbit/s)');
    return;
  }
  // Logs go to stderr: stdout may carry the media.
  const logger = createLogger({
    service: 'punch-agent',
    level: process.env['LOG_LEVEL'] ?? 'info',
    destination: { write: (s: string) => process.stderr.write(s) },
  });
  const a = new PunchAgent({
    ...target,
    stream: str('stream') ?? target.stream,
    role,
    port,
    media,
    label: str('label'),
    ...(bitrate !== undefined ? { bitrate } : {}),
    logger,
    healthMs: healthS * 1000,
    ...(str('srt') ? { srtBinary: str('srt') } : {}),
    ...(onTally ? { onTally: { argv: onTally, timeoutMs: tallyTimeoutS * 1000 } } : {}),
  });
  const stop = (): void => {
    a.stop();
    process.exit(130);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const exit = await a.start();
  if (exit.code !== 0) fail(exit.message, exit.code);
  else logger.info({ reason: exit.closeReason }, closedText(exit.closeReason));
  // Let the logger flush, then leave even if stdin is still open.
  setTimeout(() => process.exit(exit.code), 200);
}

/** The `agent` command, shared by `punch agent` (src/main.ts) and the single-file agent (src/io/agent/standalone.ts). */
export const AGENT_COMMAND: CliCommand = {
  summary: 'Run one end of an SRT link: register, wait for the partner, run srt-live-transmit',
  options: {
    link: { type: 'string', description: 'Join link from the console: http(s)://host/s/<name>?t=<token>' },
    broker: { type: 'string', description: 'Broker URL (instead of --link), with --session and --token' },
    session: { type: 'string', description: 'Session name (with --broker)' },
    token: { type: 'string', description: 'Peer token (with --broker; or PUNCH_TOKEN)' },
    stream: { type: 'string', description: "Stream slot (default: the token's stream or the only one)" },
    role: { type: 'string', description: 'sender or receiver' },
    port: { type: 'string', description: 'Local UDP port for SRT (1024-65535)' },
    input: { type: 'string', description: 'Sender media: udp://127.0.0.1:<port>, file:<path> or -' },
    output: { type: 'string', description: 'Receiver media: udp://<host>:<port>, file:<path> or -' },
    label: { type: 'string', description: 'Name shown on the console' },
    bitrate: { type: 'string', description: 'Encoder bit rate, bits/s (caps a relayed stream)' },
    health: { type: 'string', description: 'Seconds between health reports, 1-5 (default 2)' },
    srt: { type: 'string', description: 'Path of srt-live-transmit (default: from PATH)' },
    'on-tally': {
      type: 'string',
      description: 'Command run on each tally change, PUNCH_TALLY=program|preview|off|unknown (no shell)',
    },
    'on-tally-timeout': { type: 'string', description: 'Seconds an --on-tally run may take (default 5)' },
  },
  run: ({ values }) => agent(values),
};
