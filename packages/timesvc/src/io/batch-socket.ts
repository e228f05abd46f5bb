import { type LoggedClient, nativeClients } from '../domain/client-log.ts';
import { ipv6Text } from '../domain/ip-address.ts';
import { optionalAddon } from './native-addon.ts';
import { layoutMismatch, type NativeLayout } from './native-served.ts';

export { ipv6Text };

/** Most clients one report holds (GET /api/clients; native/mmsg.c MAX_CLIENTS_REPORTED). */
export const MAX_CLIENT_REPORT = 1000;

/**
 * The batched UDP socket of the NTP server (native/mmsg.c; docs/performance.md "Batched socket path"):
 * the addon owns the socket, libuv tells it when datagrams are waiting, and each `recv()` takes up to
 * `batch` datagrams with one recvmmsg(2), each with its kernel receive timestamp; `send()` hands all the
 * replies of a batch to one sendmmsg(2) per chunk of 8. All memory is allocated here, once: the receive
 * and send slots, lengths, addresses and timestamps are shared with the addon.
 *
 * Where the addon is missing (not Linux, no compiler at install) `batchSocketsAvailable()` is false and
 * the server falls back to Node's dgram sockets (ntp-server.ts).
 */

interface MmsgAddon {
  bind(family: 4 | 6, address: string, port: number, rcvbuf: number, timestamps: boolean): number;
  localPort(fd: number): number;
  closeFd(fd: number): void;
  attach(
    fd: number,
    batch: number,
    slot: number,
    rxBuf: Uint8Array,
    rxLen: Int32Array,
    rxAddr: Uint8Array,
    rxStamp: Float64Array,
    txBuf: Uint8Array,
    txLen: Int32Array,
    txFrom: Int32Array,
    txFlags: Uint8Array,
    onBatch: (count: number) => void,
  ): object;
  recv(handle: object): number;
  send(handle: object, count: number, seconds: number, fraction: number): number;
  close(handle: object): void;
  startNative(
    handle: object,
    originNs: bigint,
    options: Float64Array,
    policy: Float64Array,
    networks: Uint8Array,
    served: Float64Array,
  ): void;
  setServed(handle: object, served: Float64Array): void;
  setNtsKeys(handle: object, current: number, ids: Float64Array, keys: Uint8Array): boolean;
  ntsActive(handle: object, cutoffMs: number): number;
  stats(handle: object, out: Float64Array): void;
  clients(handle: object, max: number, keys: Uint8Array, nums: Float64Array): number;
  testClients(
    policy: Float64Array,
    records: Uint8Array,
    times: Float64Array,
    denied: Uint8Array,
    decisions: Uint8Array,
    max: number,
    keys: Uint8Array,
    nums: Float64Array,
  ): number;
  testLimiter(policy: Float64Array, records: Uint8Array, times: Float64Array): Uint8Array;
  testAccess(networks: Uint8Array, records: Uint8Array): Uint8Array;
  /** Optional in the type: a build older than the sources has none (native-served.ts layoutMismatch). */
  layout?: () => NativeLayout;
  testRespond(
    served: Float64Array,
    request: Uint8Array,
    record: Uint8Array,
    atMs: number,
    out: Uint8Array,
  ): number;
}

/**
 * Loaded only when its layout() agrees with the sources (native-served.ts layoutMismatch): a stale build would
 * read the served clock and the policy from the wrong places. Refused with a warning on stderr; the server
 * then answers from JavaScript.
 */
const addon = optionalAddon<MmsgAddon>('ntp_mmsg', (a) => {
  if (typeof a.recv !== 'function') return false;
  const why = layoutMismatch(typeof a.layout === 'function' ? a.layout() : undefined);
  if (why === undefined) return true;
  process.emitWarning(`build/Release/ntp_mmsg.node not used: ${why}; rebuild it (npm ci)`, 'TimesvcAddon');
  return false;
});

/** Whether the batched socket addon loaded. */
export function batchSocketsAvailable(): boolean {
  return addon() !== undefined;
}

/** The addon's pure entry points, for tests of the native responder against the JavaScript one. */
export function nativeResponderForTests():
  Pick<MmsgAddon, 'testLimiter' | 'testClients' | 'testAccess' | 'testRespond' | 'layout'> | undefined {
  return addon();
}

/** Datagrams per recvmmsg (and replies per batch). */
export const DEFAULT_BATCH = 64;
/**
 * Bytes per datagram slot. NTP requests are 48 bytes plus extension fields; an NTS request with a full set
 * of cookie placeholders is about 1 KB. A longer datagram is reported truncated (length -1) and dropped.
 */
export const DEFAULT_SLOT = 2048;
/** Bytes per address record (native/mmsg.c recv()). */
export const ADDR_BYTES = 24;
/** txFlags bit: the addon writes the transmit timestamp (bytes 40–47) just before sending. */
export const TX_STAMP = 1;

export interface BatchSocketOptions {
  family: 4 | 6;
  address: string;
  port: number;
  recvBufferSize: number;
  /** Ask the kernel for SO_TIMESTAMPNS receive timestamps. */
  timestamps: boolean;
  batch?: number;
  slot?: number;
}

export class BatchSocket {
  readonly family: 4 | 6;
  readonly address: string;
  readonly port: number;
  readonly batch: number;
  readonly slot: number;
  readonly timestamps: boolean;
  readonly rxBuf: Uint8Array;
  /** Length of received datagram i, or -1 when it was longer than a slot. */
  readonly rxLen: Int32Array;
  readonly rxAddr: Uint8Array;
  /** Kernel receive time of datagram i, Unix ms (CLOCK_REALTIME); NaN when the kernel gave none. */
  readonly rxStamp: Float64Array;
  readonly txBuf: Uint8Array;
  readonly txLen: Int32Array;
  /** Index of the received datagram whose source reply i goes to. */
  readonly txFrom: Int32Array;
  readonly txFlags: Uint8Array;
  /** rxBuf as a Buffer (same memory), for code that wants Buffer methods. */
  readonly rxBuffer: Buffer;
  readonly txBuffer: Buffer;
  readonly #a: MmsgAddon;
  #handle: object | undefined;
  #native = false;

  private constructor(a: MmsgAddon, o: BatchSocketOptions, fd: number, onBatch: (count: number) => void) {
    this.#a = a;
    this.family = o.family;
    this.address = o.address;
    this.timestamps = o.timestamps;
    this.batch = o.batch ?? DEFAULT_BATCH;
    this.slot = o.slot ?? DEFAULT_SLOT;
    this.rxBuf = new Uint8Array(this.batch * this.slot);
    this.rxLen = new Int32Array(this.batch);
    this.rxAddr = new Uint8Array(this.batch * ADDR_BYTES);
    this.rxStamp = new Float64Array(this.batch);
    this.txBuf = new Uint8Array(this.batch * this.slot);
    this.txLen = new Int32Array(this.batch);
    this.txFrom = new Int32Array(this.batch);
    this.txFlags = new Uint8Array(this.batch);
    this.rxBuffer = Buffer.from(this.rxBuf.buffer, this.rxBuf.byteOffset, this.rxBuf.byteLength);
    this.txBuffer = Buffer.from(this.txBuf.buffer, this.txBuf.byteOffset, this.txBuf.byteLength);
    try {
      this.port = a.localPort(fd);
      this.#handle = a.attach(
        fd,
        this.batch,
        this.slot,
        this.rxBuf,
        this.rxLen,
        this.rxAddr,
        this.rxStamp,
        this.txBuf,
        this.txLen,
        this.txFrom,
        this.txFlags,
        onBatch,
      );
    } catch (err) {
      a.closeFd(fd);
      throw err;
    }
  }

  /**
   * Bind a batched socket; `onBatch(count)` is called from the event loop with a batch of `count` received
   * datagrams already in the rx arrays (the addon took them when the socket became readable); more may be
   * taken with recv(), else the next wake-up brings them. Undefined without the addon. Throws (with
   * `errno`) when the address cannot be bound.
   */
  static bind(o: BatchSocketOptions, onBatch: (count: number) => void): BatchSocket | undefined {
    const a = addon();
    if (!a) return undefined;
    const batch = o.batch ?? DEFAULT_BATCH;
    const slot = o.slot ?? DEFAULT_SLOT;
    if (!Number.isInteger(batch) || batch < 1 || batch > 256 || !Number.isInteger(slot) || slot < 48) {
      throw new RangeError('batch must be 1-256 and slot at least 48 bytes');
    }
    const fd = a.bind(o.family, o.address, o.port, o.recvBufferSize, o.timestamps);
    return new BatchSocket(a, o, fd, onBatch);
  }

  get closed(): boolean {
    return this.#handle === undefined;
  }

  /** Take up to `batch` waiting datagrams; returns how many (0: none waiting), or -errno. */
  recv(): number {
    return this.#handle === undefined ? 0 : this.#a.recv(this.#handle);
  }

  /**
   * Send replies 0..count-1 (txLen, txFrom, txFlags set); (seconds, fraction) is the served time read just
   * before the call, for the TX_STAMP replies. Returns how many could not be sent.
   */
  send(count: number, seconds: number, fraction: number): number {
    return this.#handle === undefined ? count : this.#a.send(this.#handle, count, seconds, fraction);
  }

  /** Source address of received datagram i as text (dotted IPv4, or IPv6 as Node prints it). */
  sourceAddress(i: number): string {
    const a = this.rxAddr;
    const o = i * ADDR_BYTES;
    if (a[o] === 4) return `${a[o + 4]}.${a[o + 5]}.${a[o + 6]}.${a[o + 7]}`;
    return ipv6Text(a, o + 4);
  }

  /** Source port of received datagram i. */
  sourcePort(i: number): number {
    const o = i * ADDR_BYTES;
    return ((this.rxAddr[o + 2] ?? 0) << 8) | (this.rxAddr[o + 3] ?? 0);
  }

  /**
   * Hand the socket to the addon's own thread, which answers plain requests itself and passes the rest to
   * `onBatch` (native-served.ts builds the arrays; docs/performance.md "Native responder").
   */
  startNative(
    originNs: bigint,
    options: Float64Array,
    policy: Float64Array,
    networks: Uint8Array,
    served: Float64Array,
  ): void {
    if (this.#handle !== undefined)
      this.#a.startNative(this.#handle, originNs, options, policy, networks, served);
    this.#native = true;
  }

  /** Whether the addon's thread reads the socket (startNative). */
  get native(): boolean {
    return this.#native;
  }

  /** A new piece of the served clock and new reply fields for the native thread. */
  setServed(served: Float64Array): void {
    if (this.#handle !== undefined && this.#native) this.#a.setServed(this.#handle, served);
  }

  /** The NTS cookie master keys for the native thread (startNative with NTS on); false: out of memory. */
  setNtsKeys(current: number, ids: readonly number[], keys: Uint8Array): boolean {
    if (this.#handle === undefined || !this.#native) return false;
    return this.#a.setNtsKeys(this.#handle, current, Float64Array.from(ids), keys);
  }

  /** NTS sessions the native thread saw authentic at or after monotonic cutoffMs. */
  ntsActive(cutoffMs: number): number {
    return this.#handle === undefined || !this.#native ? 0 : this.#a.ntsActive(this.#handle, cutoffMs);
  }

  /** The native thread's counters into `out` (native-served.ts NATIVE_STATS order); zeros before start. */
  stats(out: Float64Array): void {
    if (this.#handle !== undefined) this.#a.stats(this.#handle, out);
  }

  /**
   * The native thread's client log (native/mmsg.c clients()), most recently seen first, at most `max`
   * (≤ MAX_CLIENT_REPORT); none before the thread starts or after close.
   */
  clients(max: number, bits: number): LoggedClient[] {
    if (this.#handle === undefined || !this.#native) return [];
    const m = Math.max(0, Math.min(MAX_CLIENT_REPORT, Math.floor(max)));
    const keys = new Uint8Array(m * 17);
    const nums = new Float64Array(m * 7);
    const n = this.#a.clients(this.#handle, m, keys, nums);
    return nativeClients(keys, nums, n, bits);
  }

  close(): void {
    const h = this.#handle;
    this.#handle = undefined;
    if (h !== undefined) this.#a.close(h);
  }
}
