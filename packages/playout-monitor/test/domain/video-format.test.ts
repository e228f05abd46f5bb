// The one frame-rate/format module: every documented format name of each device kind maps to its rate.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  casparcgFormat,
  HYPERDECK_FORMATS,
  hyperdeckFormat,
  resolveFrameRate,
} from '../../src/domain/video-format.ts';

const NTSC24 = 24000 / 1001;
const NTSC30 = 30000 / 1001;
const NTSC60 = 60000 / 1001;

function close(actual: number | undefined, expected: number, what: string): void {
  assert.ok(actual !== undefined && Math.abs(actual - expected) < 1e-9, `${what}: ${actual} != ${expected}`);
}

test('every HyperDeck format the protocol documents maps to its frame rate', () => {
  // Blackmagic HyperDeck manual, Ethernet protocol, "Video Formats" (HyperDeck Studio, Studio Pro, Studio 12G),
  // and the DCI / 1080p50+ / 8K names decks report (the `VideoFormat` list of sofie-hyperdeck-connection).
  const documented: [string, number][] = [
    ['NTSC', NTSC30],
    ['PAL', 25],
    ['NTSCp', NTSC30],
    ['PALp', 25],
    ['720p50', 50],
    ['720p5994', NTSC60],
    ['720p60', 60],
    ['1080p23976', NTSC24],
    ['1080p24', 24],
    ['1080p25', 25],
    ['1080p2997', NTSC30],
    ['1080p30', 30],
    ['1080i50', 25],
    ['1080i5994', NTSC30],
    ['1080i60', 30],
    ['1080p50', 50],
    ['1080p5994', NTSC60],
    ['1080p60', 60],
    ['2Kp23976DCI', NTSC24],
    ['2Kp24DCI', 24],
    ['2Kp25DCI', 25],
    ['4Kp23976', NTSC24],
    ['4Kp24', 24],
    ['4Kp25', 25],
    ['4Kp2997', NTSC30],
    ['4Kp30', 30],
    ['4Kp23976DCI', NTSC24],
    ['4Kp24DCI', 24],
    ['4Kp25DCI', 25],
    ['4Kp50', 50],
    ['4Kp5994', NTSC60],
    ['4Kp60', 60],
    ['8Kp23976', NTSC24],
    ['8Kp24', 24],
    ['8Kp25', 25],
    ['8Kp2997', NTSC30],
    ['8Kp30', 30],
    ['8Kp23976DCI', NTSC24],
    ['8Kp24DCI', 24],
    ['8Kp25DCI', 25],
    ['8Kp50', 50],
    ['8Kp5994', NTSC60],
    ['8Kp60', 60],
  ];
  for (const [name, fps] of documented) close(hyperdeckFormat(name)?.fps, fps, name);
  assert.deepEqual(Object.keys(HYPERDECK_FORMATS).sort(), documented.map(([n]) => n).sort());
  assert.equal(hyperdeckFormat('1080i50')?.interlaced, true);
  assert.equal(hyperdeckFormat('1080p50')?.interlaced, false);
  assert.equal(hyperdeckFormat('weird'), undefined);
  assert.equal(hyperdeckFormat('2160p2398'), undefined, 'a CasparCG name is not a HyperDeck name');
});

test('CasparCG video-mode names from core/video_format.cpp (2.0.7 to 2.5.0)', () => {
  const names: [string, number, boolean][] = [
    ['PAL', 25, true],
    ['NTSC', NTSC30, true],
    ['576p2500', 25, false],
    ['720p2398', NTSC24, false],
    ['720p2400', 24, false],
    ['720p2500', 25, false],
    ['720p2997', NTSC30, false],
    ['720p3000', 30, false],
    ['720p5000', 50, false],
    ['720p5994', NTSC60, false],
    ['720p6000', 60, false],
    ['1080i5000', 25, true],
    ['1080i5994', NTSC30, true],
    ['1080i6000', 30, true],
    ['1080p2398', NTSC24, false],
    ['1080p2400', 24, false],
    ['1080p2500', 25, false],
    ['1080p2997', NTSC30, false],
    ['1080p3000', 30, false],
    ['1080p5000', 50, false],
    ['1080p5994', NTSC60, false],
    ['1080p6000', 60, false],
    ['1556p2398', NTSC24, false],
    ['1556p2400', 24, false],
    ['1556p2500', 25, false],
    ['dci1080p2398', NTSC24, false],
    ['dci1080p2400', 24, false],
    ['dci1080p2500', 25, false],
    ['2160p2398', NTSC24, false],
    ['2160p2400', 24, false],
    ['2160p2500', 25, false],
    ['2160p2997', NTSC30, false],
    ['2160p3000', 30, false],
    ['2160p5000', 50, false],
    ['2160p5994', NTSC60, false],
    ['2160p6000', 60, false],
    ['dci2160p2398', NTSC24, false],
    ['dci2160p2400', 24, false],
    ['dci2160p2500', 25, false],
    ['4kDCIp2398', NTSC24, false],
    ['4kDCIp2500', 25, false],
    ['4kDCIp5000', 50, false],
  ];
  for (const [name, fps, interlaced] of names) {
    const f = casparcgFormat(name);
    close(f?.fps, fps, name);
    assert.equal(f?.interlaced, interlaced, name);
  }
  assert.equal(casparcgFormat('2160p12000'), undefined, 'over 100 fps cannot be HH:MM:SS:FF');
  assert.equal(casparcgFormat('1080x50'), undefined);
});

test('one source of truth: device format, configured format, configured rate, device rate, default', () => {
  const i50 = casparcgFormat('1080i5000');
  const p50 = casparcgFormat('1080p5000');
  assert.deepEqual(
    resolveFrameRate({ deviceFormat: i50, configFormat: p50, configFps: 30, deviceFps: 50, defaultFps: 24 }),
    {
      fps: 25,
      source: 'device-format',
    },
  );
  assert.deepEqual(resolveFrameRate({ configFormat: i50, configFps: 30, deviceFps: 50, defaultFps: 24 }), {
    fps: 25,
    source: 'config-format',
  });
  assert.deepEqual(resolveFrameRate({ configFps: 30, deviceFps: 50, defaultFps: 24 }), {
    fps: 30,
    source: 'config',
  });
  assert.deepEqual(resolveFrameRate({ deviceFps: 50, defaultFps: 24 }), { fps: 50, source: 'device-rate' });
  assert.deepEqual(resolveFrameRate({ defaultFps: 24 }), { fps: 24, source: 'default' });
});
