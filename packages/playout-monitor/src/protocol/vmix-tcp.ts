/**
 * vMix TCP API (port 8099) framing, pure (vMix help, "TCP API"; docs/TALLY.md). Messages are UTF-8 lines
 * ending `\r\n`: `<COMMAND> <OK|ER|length> [text]`. A numeric second field is the length in bytes of the data
 * that follows the line (`XML 1234\r\n<vmix>…`); a line break after that data, when sent, is an empty line
 * and ignored. `TALLY OK 0121…` (pushed after `SUBSCRIBE TALLY`, or the answer to `TALLY`) has one digit per
 * input, in input-number order: 0 off, 1 program, 2 preview.
 *
 * Every buffer is bounded: a line longer than `VMIX_TCP_MAX_LINE` bytes or data longer than
 * `VMIX_MAX_XML_BYTES` is an error (the link is then dropped by the io layer); bytes are held only until
 * their message is complete.
 */
import { decoded, reject, type DecodeError, type Decoded } from '@broadcast-ops/core/decoded';

/** One digit of `TALLY OK <digits>` (vMix help, "TCP API"): 0 off, 1 program, 2 preview. */
export type TallyDigit = 0 | 1 | 2;
import { VMIX_MAX_XML_BYTES } from './vmix.ts';

/** The longest line accepted: a `TALLY OK` line of 1,000 inputs is about 1 KB; ACTS lines are shorter. */
export const VMIX_TCP_MAX_LINE = 8192;
/** Inputs a tally line may name (vMix numbers inputs up to 1000). */
export const VMIX_TCP_MAX_TALLY_DIGITS = 1000;

export type VmixTcpMessage =
  | { command: string; status: 'OK' | 'ER'; text: string }
  | { command: string; status: 'data'; text: string; data: string };

export class VmixTcpFramer {
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  /** Set while the data of a length-prefixed answer is awaited. */
  #awaiting: { command: string; text: string; length: number } | undefined;
  #failed: string | undefined;

  /** Bytes held for an incomplete message. */
  get buffered(): number {
    return this.#pendingBytes;
  }

  /**
   * Feed bytes; returns the complete messages, or an error (after which the framer refuses more input: the
   * stream can no longer be trusted to be in step).
   */
  push(chunk: Uint8Array): { messages: VmixTcpMessage[] } | { error: string } {
    if (this.#failed !== undefined) return { error: this.#failed };
    this.#pending.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    this.#pendingBytes += chunk.byteLength;
    // Data still arriving (a large XML document in many chunks): join the chunks once, when it is complete.
    if (this.#awaiting && this.#pendingBytes < this.#awaiting.length) return { messages: [] };
    let buf =
      this.#pending.length === 1 ? (this.#pending[0] ?? Buffer.alloc(0)) : Buffer.concat(this.#pending);
    const messages: VmixTcpMessage[] = [];
    let off = 0;
    for (;;) {
      const awaiting = this.#awaiting;
      if (awaiting) {
        if (buf.length - off < awaiting.length) break;
        messages.push({
          command: awaiting.command,
          status: 'data',
          text: awaiting.text,
          data: buf.toString('utf8', off, off + awaiting.length),
        });
        off += awaiting.length;
        this.#awaiting = undefined;
        continue;
      }
      const lf = buf.indexOf(0x0a, off);
      if (lf < 0) {
        if (buf.length - off > VMIX_TCP_MAX_LINE) return this.#fail(`a line over ${VMIX_TCP_MAX_LINE} bytes`);
        break;
      }
      if (lf - off > VMIX_TCP_MAX_LINE) return this.#fail(`a line over ${VMIX_TCP_MAX_LINE} bytes`);
      const end = lf > off && buf[lf - 1] === 0x0d ? lf - 1 : lf;
      const line = buf.toString('utf8', off, end);
      off = lf + 1;
      if (line.trim() === '') continue;
      const parsed = parseLine(line);
      if ('error' in parsed) return this.#fail(parsed.error);
      if (parsed.length !== undefined) {
        if (parsed.length > VMIX_MAX_XML_BYTES)
          return this.#fail(`${parsed.command} data of ${parsed.length} bytes is over ${VMIX_MAX_XML_BYTES}`);
        this.#awaiting = { command: parsed.command, text: parsed.text, length: parsed.length };
        continue;
      }
      messages.push({ command: parsed.command, status: parsed.status, text: parsed.text });
    }
    buf = buf.subarray(off);
    this.#pending = buf.length > 0 ? [buf] : [];
    this.#pendingBytes = buf.length;
    return { messages };
  }

  #fail(error: string): { error: string } {
    this.#failed = error;
    this.#pending = [];
    this.#pendingBytes = 0;
    return { error };
  }
}

const COMMAND = /^[A-Za-z][A-Za-z0-9_]{0,31}$/;

function parseLine(
  line: string,
):
  | { command: string; status: 'OK' | 'ER'; text: string; length?: undefined }
  | { command: string; status: 'data'; text: string; length: number }
  | { error: string } {
  const [command = '', status = '', ...rest] = line.split(' ');
  const text = rest.join(' ');
  if (!COMMAND.test(command)) return { error: `not a vMix TCP answer: ${JSON.stringify(line.slice(0, 40))}` };
  if (status === 'OK' || status === 'ER') return { command, status, text };
  if (/^\d{1,9}$/.test(status)) return { command, status: 'data', text, length: Number(status) };
  return { error: `bad status ${JSON.stringify(status.slice(0, 20))} in a ${command} answer` };
}

/** The digits of a `TALLY OK <digits>` message, or an error naming what is wrong. */
export function parseTallyDigits(
  text: string,
): Decoded<TallyDigit[], DecodeError<'too-many-inputs' | 'bad-digit'>> {
  const t = text.trim();
  if (t.length > VMIX_TCP_MAX_TALLY_DIGITS) return reject('too-many-inputs', `a tally of ${t.length} inputs`);
  if (!/^[012]*$/.test(t))
    return reject('bad-digit', `tally digits other than 0, 1, 2: ${JSON.stringify(t.slice(0, 20))}`);
  return decoded(Array.from(t, (c) => Number(c) as TallyDigit));
}

/** Commands are single lines ending `\r\n`. */
export function vmixTcpCommand(command: 'SUBSCRIBE TALLY' | 'XML' | 'TALLY'): Buffer {
  return Buffer.from(`${command}\r\n`, 'utf8');
}
