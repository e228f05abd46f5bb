/**
 * The buttons adapter as shipped: a placeholder that says so. It publishes no keys, reports itself not
 * connected and `implemented: false`, and rejects every command with a reason (docs/buttons.md).
 */
import type { AdapterCommand, AdapterContext, AdapterResult } from '../../domain/adapter.ts';
import {
  BUTTONS_ADAPTER_NAME,
  BUTTONS_TARGET,
  type ButtonsAdapter,
  type ButtonsDeviceInfo,
} from './types.ts';

export const NOT_IMPLEMENTED =
  'the buttons adapter is a placeholder: no buttons hardware protocol is implemented yet';

export class ButtonsPlaceholderAdapter implements ButtonsAdapter {
  readonly name = BUTTONS_ADAPTER_NAME;
  readonly targets = [BUTTONS_TARGET];
  readonly owns = [BUTTONS_ADAPTER_NAME];
  readonly implemented = false;

  capabilities(): Record<string, boolean | string> {
    return { implemented: false, press: false, reason: NOT_IMPLEMENTED };
  }
  devices(): ButtonsDeviceInfo[] {
    return [];
  }
  start(ctx: AdapterContext): void {
    ctx.setConnected(false);
    ctx.logger.warn(NOT_IMPLEMENTED);
  }
  stop(): void {}
  execute(_cmd: AdapterCommand): Promise<AdapterResult> {
    return Promise.resolve({
      status: 'rejected',
      error: { code: 'ADAPTER_ERROR', message: NOT_IMPLEMENTED },
    });
  }
}
