/**
 * A simulated buttons device behind the buttons adapter interface, for demos and for the contract tests
 * (test/buttons/contract.ts) that a real buttons adapter must pass. Keys live at
 * `buttons.device.<id>.key.<index>`; press commands and simulated physical presses update them and emit
 * `pressed` / `released` events; `unplug()` / `plug()` simulate losing the device (keys go stale).
 */
import type { AdapterCommand, AdapterContext, AdapterResult } from '../../domain/adapter.ts';
import {
  BUTTONS_ADAPTER_NAME,
  BUTTONS_TARGET,
  keyPath,
  type ButtonKeyState,
  type ButtonsAdapter,
  type ButtonsDeviceInfo,
} from './types.ts';

const ID_RE = /^[a-z0-9_]{1,64}$/;
const COLOUR_RE = /^#[0-9a-f]{6}$/i;

export class ButtonsSimulatorAdapter implements ButtonsAdapter {
  readonly name = BUTTONS_ADAPTER_NAME;
  readonly targets = [BUTTONS_TARGET];
  readonly owns = [BUTTONS_ADAPTER_NAME];
  readonly implemented = true;
  /** Every command executed, for assertions. */
  readonly executed: AdapterCommand[] = [];
  readonly #devices: ButtonsDeviceInfo[];
  readonly #keys = new Map<string, ButtonKeyState>();
  #ctx: AdapterContext | undefined;
  #plugged = true;

  constructor(devices: ButtonsDeviceInfo[] = [{ id: 'sim_deck_1', rows: 2, columns: 4 }]) {
    for (const d of devices) {
      if (!ID_RE.test(d.id)) throw new Error(`buttons device id must match ${ID_RE.source}: ${d.id}`);
      for (let i = 0; i < d.rows * d.columns; i++) {
        this.#keys.set(keyPath(d.id, i), {
          deviceId: d.id,
          keyIndex: i,
          row: Math.floor(i / d.columns),
          column: i % d.columns,
          pressed: false,
          text: '',
          colour: '#000000',
        });
      }
    }
    this.#devices = devices.map((d) => ({ ...d }));
  }

  capabilities(): Record<string, boolean | number> {
    return { implemented: true, press: true, setKey: true, devices: this.#devices.length };
  }
  devices(): ButtonsDeviceInfo[] {
    return this.#devices.map((d) => ({ ...d }));
  }
  key(deviceId: string, keyIndex: number): ButtonKeyState | undefined {
    const k = this.#keys.get(keyPath(deviceId, keyIndex));
    return k && { ...k };
  }

  start(ctx: AdapterContext): void {
    this.#ctx = ctx;
    this.#publishAll();
  }
  stop(): void {
    this.#ctx?.setConnected(false);
    this.#ctx = undefined;
  }

  /** The device disappears: its keys go stale. */
  unplug(): void {
    this.#plugged = false;
    this.#ctx?.setConnected(false);
  }
  /** The device is back: keys republished and fresh. */
  plug(): void {
    this.#plugged = true;
    this.#publishAll();
  }
  /** A finger on the hardware key (not a command). */
  physicalPress(deviceId: string, keyIndex: number, pressed: boolean): void {
    const k = this.#keys.get(keyPath(deviceId, keyIndex));
    if (!k || !this.#plugged) throw new Error(`no key ${deviceId}/${keyIndex} or device unplugged`);
    this.#press(k, pressed);
  }

  #publishAll(): void {
    const ctx = this.#ctx;
    if (!ctx) return;
    for (const [path, k] of this.#keys) ctx.setState(path, { ...k });
    ctx.setConnected(true);
  }

  #press(k: ButtonKeyState, pressed: boolean, correlationId?: string): void {
    k.pressed = pressed;
    const path = keyPath(k.deviceId, k.keyIndex);
    const o = correlationId ? { correlationId } : undefined;
    this.#ctx?.setState(path, { ...k }, o);
    this.#ctx?.emitEvent(
      path,
      pressed ? 'pressed' : 'released',
      { deviceId: k.deviceId, keyIndex: k.keyIndex },
      o,
    );
  }

  execute(cmd: AdapterCommand): Promise<AdapterResult> {
    this.executed.push(cmd);
    const reject = (message: string): Promise<AdapterResult> =>
      Promise.resolve({ status: 'rejected', error: { code: 'ADAPTER_ERROR', message } });
    if (!this.#plugged) {
      return Promise.resolve({
        status: 'failed',
        error: { code: 'ADAPTER_ERROR', message: 'buttons device unplugged' },
      });
    }
    let path = cmd.path;
    const p = cmd.params;
    if (typeof p['deviceId'] === 'string' && typeof p['keyIndex'] === 'number')
      path = keyPath(p['deviceId'], p['keyIndex']);
    const k = this.#keys.get(path);
    if (!k)
      return reject(
        `no such key: ${path} (use buttons.device.<id>.key.<index> or params deviceId + keyIndex)`,
      );
    switch (cmd.action) {
      case 'press':
        this.#press(k, true, cmd.correlationId);
        this.#press(k, false, cmd.correlationId);
        break;
      case 'down':
        this.#press(k, true, cmd.correlationId);
        break;
      case 'up':
        this.#press(k, false, cmd.correlationId);
        break;
      case 'setKey': {
        const text = p['text'] ?? k.text;
        const colour = p['colour'] ?? k.colour;
        if (typeof text !== 'string' || text.length > 256)
          return reject('params.text must be a string of ≤ 256 characters');
        if (typeof colour !== 'string' || !COLOUR_RE.test(colour))
          return reject('params.colour must be #rrggbb');
        k.text = text;
        k.colour = colour.toLowerCase();
        this.#ctx?.setState(path, { ...k }, { correlationId: cmd.correlationId });
        break;
      }
      default:
        return reject(`unknown action "${cmd.action}" (press, down, up, setKey)`);
    }
    return Promise.resolve({ status: 'completed', result: { key: { ...k } } });
  }
}
