/**
 * The normalised device state: one per configured server, whatever the device kind.
 * Reducers per device kind turn protocol traffic into `DevicePatch`es; the store applies them and emits a
 * change event only when something people can see changed. Outputs react to those events.
 */
import type { MixerInputTally } from './mixer-tally.ts';
import { ZERO_TIMECODE } from './timecode.ts';
import type { FrameRateSource } from './video-format.ts';

export type DeviceType = 'osc_player' | 'http_mixer' | 'tcp_recorder';
export type PlayState = 'play' | 'rec' | 'stop' | 'offline';

export const DEVICE_TYPES: readonly DeviceType[] = ['osc_player', 'http_mixer', 'tcp_recorder'];

export interface DeviceState {
  id: number;
  name: string;
  type: DeviceType;
  ip: string;
  port: number;
  state: PlayState;
  /** `HH:MM:SS:FF` at `framerate`, always with `:`. */
  timecode: string;
  filename: string;
  framerate: number;
  /** Where `framerate` comes from: the device's format, the configured format or rate, a bare rate the
   * device reports, or the default (see video-format.ts). */
  framerateSource?: FrameRateSource;
  /** Epoch ms of the last data from the device (or of the last state change when none). */
  updated: number;
  connected: boolean;
  /** Present only when the device tells them. */
  positionMs?: number;
  durationMs?: number;
  remainingMs?: number;
  loop?: boolean;
  /** Why the device is offline (or other notable condition), e.g. "no OSC for 5 s". */
  reason?: string;
  /** vMix only: whether it streams. */
  streaming?: boolean;
  /** vMix only: the input on preview. */
  preview?: { number: number; title: string };
  /** vMix only: fade to black engaged (program output is black). */
  fadeToBlack?: boolean;
  /** vMix only: the overlay channels with an input on them. */
  overlays?: { number: number; input: number; title: string }[];
  /** vMix only: recording (also shown through `state` = `rec`, kept apart so FTB and recording both show). */
  recording?: boolean;
  /** vMix only: the tally of every input, keyed by GUID (domain/mixer-tally.ts, docs/TALLY.md). */
  inputs?: MixerInputTally[];
  /** vMix only: where the tally comes from: the TCP API (pushed) or the HTTP poll. */
  tallySource?: 'tcp' | 'http';
  /** CasparCG only, when `layers` is configured: every watched layer of the channel (the device's own
   * `layer` first), each with its own state. */
  layers?: LayerState[];
}

/** One watched CasparCG layer: `play`, `stop` (with `paused` when a file is loaded but not running), or
 * `offline` with the server; the time and file of the layer's foreground producer. */
export interface LayerState {
  layer: number;
  state: PlayState;
  paused: boolean;
  timecode: string;
  filename: string;
  positionMs?: number;
  durationMs?: number;
  remainingMs?: number;
}

/** Fields a reducer may set; `undefined` for an optional field removes it. */
export type DevicePatch = {
  [K in Exclude<keyof DeviceState, 'id' | 'name' | 'type' | 'ip' | 'port' | 'updated'>]?:
    DeviceState[K] | undefined;
};

export interface DeviceIdentity {
  id: number;
  name: string;
  type: DeviceType;
  ip: string;
  port: number;
  framerate: number;
}

export function initialState(identity: DeviceIdentity, now: number): DeviceState {
  return {
    id: identity.id,
    name: identity.name,
    type: identity.type,
    ip: identity.ip,
    port: identity.port,
    state: 'offline',
    timecode: ZERO_TIMECODE,
    filename: '',
    framerate: identity.framerate,
    updated: now,
    connected: false,
    reason: 'not connected yet',
  };
}

/** Time left in the clip, when the device tells both position and duration. */
export function remainingMs(
  positionMs: number | undefined,
  durationMs: number | undefined,
): number | undefined {
  return positionMs !== undefined && durationMs !== undefined
    ? Math.max(0, durationMs - positionMs)
    : undefined;
}
